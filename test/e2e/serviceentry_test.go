package e2e

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/registry/serviceentry"
	"github.com/meshpilot/meshpilot/internal/server"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// entries runs meshpilot for ns as serve wires the ServiceEntry registry:
// a source after the Kubernetes registry, reading the Istio registry's
// objects and the Kubernetes Services.
type entries struct {
	srv    *running
	istio  istioclient.Interface
	status *configstatus.Reporter
	ns     string
}

func startServiceEntries(t *testing.T, ns string) *entries {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	k, err := kube.New(env.API, kube.Options{Namespaces: []string{ns}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	status := configstatus.NewReporter()
	var se *serviceentry.Registry
	runIstio(t, ns, func(store crd.Store) {
		se = serviceentry.New(store, serviceentry.Options{Services: k, Pods: k, Reporter: status})
	})
	srv := startObserved(t, ns, server.Options{Sources: []aggregate.Source{
		{Name: "kubernetes", Controller: k}, {Name: "serviceentries", Controller: se},
	}})
	client, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &entries{srv: srv, istio: client, status: status, ns: ns}
}

// apply creates or replaces a ServiceEntry written in YAML.
func (e *entries) applyServiceEntry(t *testing.T, name, spec string) {
	t.Helper()
	se := &networkingv1.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}
	if err := yaml.Unmarshal([]byte(spec), &se.Spec); err != nil {
		t.Fatal(err)
	}
	api := e.istio.NetworkingV1().ServiceEntries(e.ns)
	old, err := api.Get(ctx(t), name, metav1.GetOptions{})
	if err == nil {
		se.ResourceVersion = old.ResourceVersion
		_, err = api.Update(ctx(t), se, metav1.UpdateOptions{})
	} else {
		_, err = api.Create(ctx(t), se, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (e *entries) channel(t *testing.T, target string) *grpc.ClientConn {
	return grpctest.Channel(t, e.srv.XDSAddr(), target, grpctest.ChannelOptions{Namespace: "client", MapAddress: grpctest.DocToLoopback})
}

// TestStaticServiceEntry: a STATIC ServiceEntry's endpoints serve a
// grpc-go client through xds:///<host>:<port>; a change of its endpoints
// reaches the client; a refused change (a protocol Istio does not know) leaves
// the last good version serving, and says why.
func TestStaticServiceEntry(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.101", "127.0.0.102")
	e := startServiceEntries(t, ns)
	spec := func(ips ...string) string {
		s := fmt.Sprintf("hosts: [echo.example.com]\nlocation: MESH_INTERNAL\nresolution: STATIC\n"+
			"ports: [{number: 7070, protocol: GRPC, name: grpc, targetPort: %d}]\nendpoints:\n", bs[0].Port)
		for _, ip := range ips {
			s += "- {address: " + ip + "}\n"
		}
		return s
	}
	e.applyServiceEntry(t, "echo", spec(bs[0].IP, bs[1].IP))
	cc := e.channel(t, "xds:///echo.example.com:7070")
	grpctest.AwaitSpread(t, cc, bs...)

	e.applyServiceEntry(t, "echo", spec(bs[1].IP))
	grpctest.AwaitSpread(t, cc, bs[1])

	e.applyServiceEntry(t, "echo", "hosts: [echo.example.com]\nresolution: STATIC\nports: [{number: 7070, protocol: QUIC, name: grpc}]\nendpoints: [{address: 127.0.0.1}]")
	ref := configstatus.Ref{Kind: "ServiceEntry", Namespace: ns, Name: "echo"}
	awaitRefused(t, e.status, ref, "spec.ports[0].protocol")
	grpctest.AwaitSpread(t, cc, bs[1])
	if n := e.srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}

// TestDNSServiceEntry: a DNS ServiceEntry whose endpoint is a name
// ("localhost", 127.0.0.1 in /etc/hosts) reaches a grpc-go client through
// a LOGICAL_DNS cluster that grpc-go resolves itself (istiod gives gRPC
// clients no endpoints for it). A DNS ServiceEntry without endpoints
// resolves its own host through the same cluster as an ExternalName
// Service (internal/xds TestGRPCResolvesALogicalDNSCluster): no host with
// a dot resolves to loopback here.
func TestDNSServiceEntry(t *testing.T) {
	ns := env.Namespace(t, nil)
	b := grpctest.StartBackend(t, "127.0.0.1", 0)
	e := startServiceEntries(t, ns)
	e.applyServiceEntry(t, "mirror", fmt.Sprintf("hosts: [mirror.example.com]\nresolution: DNS\n"+
		"ports: [{number: 7070, protocol: GRPC, name: grpc}]\nendpoints: [{address: localhost, ports: {grpc: %d}}]", b.Port))
	grpctest.AwaitSpread(t, e.channel(t, "xds:///mirror.example.com:7070"), b)
	if n := e.srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}

// TestWorkloadEntrySelectedByAService: a WorkloadEntry whose labels a
// Kubernetes Service's selector matches is an endpoint of that Service,
// reachable through xds:///<service>, on the Service's target port;
// deleting it takes it away.
func TestWorkloadEntrySelectedByAService(t *testing.T) {
	ns := env.Namespace(t, nil)
	b := grpctest.StartBackend(t, "127.0.0.103", 0)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "vm"},
			Ports:    []corev1.ServicePort{{Name: "grpc", Port: 7070, TargetPort: intstr.FromInt32(int32(b.Port))}},
		},
	}
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := startServiceEntries(t, ns)
	we := &networkingv1.WorkloadEntry{ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: ns}}
	we.Spec.Address, we.Spec.Labels = b.IP, map[string]string{"app": "vm"}
	api := e.istio.NetworkingV1().WorkloadEntries(ns)
	if _, err := api.Create(ctx(t), we, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cc := e.channel(t, "xds:///vm."+ns+".svc.cluster.local:7070")
	grpctest.AwaitSpread(t, cc, b)
	if err := api.Delete(ctx(t), "vm1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	grpctest.AwaitUnavailable(t, cc)
	if n := e.srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}

// TestServiceEntrySelectsPods: a ServiceEntry's workloadSelector selects
// the ready Pods of its namespace, reachable through xds:///<host> on the
// entry's target port; a Pod relabelled away stops serving it.
func TestServiceEntrySelectsPods(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.104", "127.0.0.105")
	e := startServiceEntries(t, ns)
	var pods []*corev1.Pod
	for i, b := range bs {
		pods = append(pods, env.RunningPod(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", i), Namespace: ns, Labels: map[string]string{"app": "pods"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
		}, docAddr(b)))
	}
	e.applyServiceEntry(t, "pods", fmt.Sprintf("hosts: [pods.example.com]\nlocation: MESH_INTERNAL\nresolution: STATIC\n"+
		"ports: [{number: 7070, protocol: GRPC, name: grpc, targetPort: %d}]\nworkloadSelector: {labels: {app: pods}}", bs[0].Port))
	cc := e.channel(t, "xds:///pods.example.com:7070")
	grpctest.AwaitSpread(t, cc, bs...)

	pod := pods[0]
	pod.Labels = map[string]string{"app": "other"}
	if _, err := env.Client.CoreV1().Pods(ns).Update(ctx(t), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	grpctest.AwaitSpread(t, cc, bs[1])
	if n := e.srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}

func awaitRefused(t *testing.T, r *configstatus.Reporter, ref configstatus.Ref, path string) {
	t.Helper()
	testenv.Eventually(t, ref.String()+" refused at "+path, func() (bool, string) {
		st, ok := r.Get(ref)
		return ok && st.Refused != nil && st.Refused.Path == path, fmt.Sprintf("%+v", st.Refused)
	})
}
