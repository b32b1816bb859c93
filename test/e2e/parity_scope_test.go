package e2e

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/server"
)

// TestDestinationRulesOfOneHostMerge: two DestinationRules of one
// namespace for one host merge as in istiod, oldest first: a grpc-go
// client routed to each subset reaches the backends of the older rule's
// definition of a subset both define, and of the subset only the newer
// one defines; the newer rule's status says it was merged and which of
// its subsets was dropped.
func TestDestinationRulesOfOneHostMerge(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.201", "127.0.0.202")
	v1, v2 := bs[0], bs[1]
	createService(t, ns, "reviews", 9080)
	versionedBackends(t, ns, "reviews", bs, "v1", "v2")
	istio := startIstio(t, ns)
	// The older rule is last by name, so that taking the first by name
	// would be seen.
	istio.destinationRule(t, "z-older", `  host: reviews
  subsets:
  - {name: v1, labels: {version: v1}}`)
	// Creation timestamps have a resolution of one second.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
	istio.destinationRule(t, "a-newer", `  host: reviews
  subsets:
  - {name: v2, labels: {version: v2}}
  - {name: v1, labels: {version: v2}}`)
	srv := istio.serve(t)
	cc := grpctest.Channel(t, srv.XDSAddr(), "xds:///reviews:9080", grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, v1, v2)

	istio.virtualService(t, "reviews", `  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v2}`)
	grpctest.AwaitSpread(t, cc, v2)
	istio.virtualService(t, "reviews", `  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}`)
	grpctest.AwaitSpread(t, cc, v1)

	st, _ := istio.status.Get(configstatus.Ref{Kind: "DestinationRule", Namespace: ns, Name: "a-newer"})
	if len(st.Merged) != 1 || !strings.Contains(st.Merged[0].Why, "merged into DestinationRule "+ns+"/z-older") {
		t.Errorf("a-newer: merged %+v, want it merged into z-older", st.Merged)
	}
	if len(st.IgnoredGRPC) != 1 || st.IgnoredGRPC[0].Path != "spec.subsets[1]" {
		t.Errorf("a-newer: ignored for gRPC %+v, want its second subset, v1", st.IgnoredGRPC)
	}
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}

// TestServiceEntryPortWithoutProtocol: a ServiceEntry port without
// protocol is served, as istiod serves it: a grpc-go client reaches its
// endpoints.
func TestServiceEntryPortWithoutProtocol(t *testing.T) {
	ns := env.Namespace(t, nil)
	b := grpctest.StartBackend(t, "127.0.0.203", 0)
	e := startServiceEntries(t, ns)
	e.applyServiceEntry(t, "plain", fmt.Sprintf("hosts: [plain.example.com]\nresolution: STATIC\n"+
		"ports: [{number: 7070, name: app, targetPort: %d}]\nendpoints: [{address: %s}]", b.Port, b.IP))
	grpctest.AwaitSpread(t, e.channel(t, "xds:///plain.example.com:7070"), b)
	if st, _ := e.status.Get(configstatus.Ref{Kind: "ServiceEntry", Namespace: ns, Name: "plain"}); st.Refused != nil {
		t.Errorf("refused: %+v", *st.Refused)
	}
	if n := e.srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}

// TestMeshDefaultServiceExportTo: MeshConfig's defaultServiceExportTo
// ["."] makes a Service without exportTo its namespace's alone, as in
// istiod: a grpc-go client of another namespace loses it while one of its
// namespace keeps it; with the default gone the other client gets it
// back.
func TestMeshDefaultServiceExportTo(t *testing.T) {
	ns := env.Namespace(t, nil)
	b := grpctest.StartBackend(t, "127.0.0.204", 0)
	createService(t, ns, "reviews", int32(b.Port))
	writeSlice(t, ns, "reviews", []grpctest.Backend{b})
	path := writeFile(t, "mesh.yaml", "defaultServiceExportTo: [.]\n")
	mesh, err := meshconfig.FromFile(path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := startObserved(t, ns, server.Options{Mesh: mesh})
	target := fmt.Sprintf("xds:///reviews.%s.svc.cluster.local:%d", ns, b.Port)
	own := grpctest.Channel(t, srv.XDSAddr(), target, grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	other := grpctest.Channel(t, srv.XDSAddr(), target, grpctest.ChannelOptions{Namespace: "elsewhere", MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, own, b)
	grpctest.AwaitUnavailable(t, other)

	if err := os.WriteFile(path, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	grpctest.AwaitSpread(t, other, b)
	grpctest.AwaitSpread(t, own, b)
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}

// TestWorkloadEntryNamedTargetPort: a WorkloadEntry behind a Kubernetes
// Service whose targetPort is a name serves on its port of that name, as
// istiod maps it, not on its port of the service port's name.
func TestWorkloadEntryNamedTargetPort(t *testing.T) {
	ns := env.Namespace(t, nil)
	b := grpctest.StartBackend(t, "127.0.0.205", 0)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "vm"},
			Ports:    []corev1.ServicePort{{Name: "grpc", Port: 7070, TargetPort: intstr.FromString("serving")}},
		},
	}
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := startServiceEntries(t, ns)
	we := &networkingv1.WorkloadEntry{ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: ns}}
	we.Spec.Address, we.Spec.Labels = b.IP, map[string]string{"app": "vm"}
	// Nothing listens on its port named as the service port.
	we.Spec.Ports = map[string]uint32{"serving": uint32(b.Port), "grpc": uint32(grpctest.FreePort(t, b.IP))}
	if _, err := e.istio.NetworkingV1().WorkloadEntries(ns).Create(ctx(t), we, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grpctest.AwaitSpread(t, e.channel(t, "xds:///vm."+ns+".svc.cluster.local:7070"), b)
	if n := e.srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}

// TestSubsetsByTopologyLabels: DestinationRule subsets selecting Istio's
// topology labels, which istiod adds to every endpoint, work for a
// grpc-go client: one by the endpoint's Node (kubernetes.io/hostname),
// one by its cluster (topology.istio.io/cluster).
func TestSubsetsByTopologyLabels(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.206", "127.0.0.207")
	createService(t, ns, "reviews", int32(bs[0].Port))
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "reviews-slice", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "reviews"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("grpc"), Port: ptr.To(int32(bs[0].Port))}},
	}
	for i, b := range bs {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{docAddr(b)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To(fmt.Sprintf("%s-node-%d", ns, i)),
		})
	}
	env.ApplyEndpointSlice(t, slice)
	istio := startIstio(t, ns)
	istio.destinationRule(t, "reviews", fmt.Sprintf(`  host: reviews
  subsets:
  - {name: first-node, labels: {kubernetes.io/hostname: %s-node-0}}
  - {name: this-cluster, labels: {topology.istio.io/cluster: Kubernetes}}`, ns))
	srv := istio.serve(t)
	cc := grpctest.Channel(t, srv.XDSAddr(), fmt.Sprintf("xds:///reviews:%d", bs[0].Port), grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, bs...)
	for _, step := range []struct {
		subset string
		want   []grpctest.Backend
	}{
		{"first-node", bs[:1]},
		{"this-cluster", bs},
	} {
		istio.virtualService(t, "reviews", fmt.Sprintf(`  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: %s}`, step.subset))
		grpctest.AwaitSpread(t, cc, step.want...)
	}
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}
