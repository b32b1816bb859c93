package aggregate

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/file"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// wait bounds every wait of the integration test.
const wait = 20 * time.Second

// filesManifests defines, in namespace NS, the Service "api" that the
// cluster defines too (on another port number, with its own endpoint and
// Pod) and a Service "web" of its own.
const filesManifests = `apiVersion: v1
kind: Namespace
metadata: {name: NS}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: NS}
spec:
  ports: [{name: grpc, port: 9090, targetPort: 9000}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: NS}
spec:
  ports: [{name: http, port: 80, targetPort: 8000}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: api-files
  namespace: NS
  labels: {kubernetes.io/service-name: api}
addressType: IPv4
ports: [{name: grpc, port: 9000}]
endpoints:
- addresses: [192.0.2.50]
  targetRef: {kind: Pod, name: api-files-1}
ENDPOINTS---
apiVersion: v1
kind: Pod
metadata: {name: api-files-1, namespace: NS}
status:
  phase: Running
  podIP: 192.0.2.50
`

func writeManifests(t *testing.T, dir, ns string, extraEndpoints ...string) {
	t.Helper()
	var eps strings.Builder
	for _, ip := range extraEndpoints {
		fmt.Fprintf(&eps, "- addresses: [%s]\n", ip)
	}
	content := strings.ReplaceAll(strings.Replace(filesManifests, "ENDPOINTS", eps.String(), 1), "NS", ns)
	// Written whole and renamed into place, as editors save.
	tmp := filepath.Join(dir, ".mesh.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "mesh.yaml")); err != nil {
		t.Fatal(err)
	}
}

// apiSlice is the cluster's EndpointSlice of "api".
func apiSlice(ns string, ips ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "api-kube", Namespace: ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("grpc"), Port: ptr.To[int32](9000), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
	return s
}

// createClusterObjects creates, in ns, the Service "api" on port 8080
// with one endpoint, and the Pod behind it.
func createClusterObjects(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "grpc", Port: 8080, TargetPort: intstr.FromInt32(9000), Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, apiSlice(ns, "192.0.2.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "api-kube-1", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
	}
	created, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "192.0.2.1", PodIPs: []corev1.PodIP{{IP: "192.0.2.1"}}}
	if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// awaitView waits until the aggregate serves, for hostname, a definition
// on port and exactly the endpoint addresses want, and until an event of
// kind about hostname has reached the handler. It returns the events
// seen meanwhile.
func awaitView(t *testing.T, a *Controller, rec *recorder, hostname model.Hostname, kind model.EventKind, port int32, want ...string) []model.Event {
	t.Helper()
	var events []model.Event
	testenv.Eventually(t, fmt.Sprintf("%s on %d with %v after a %s event", hostname, port, want, kind), func() (bool, string) {
		events = append(events, rec.take()...)
		svc := a.GetService(hostname)
		if svc == nil {
			return false, "not served"
		}
		if _, ok := svc.PortByNumber(port); !ok {
			return false, fmt.Sprintf("served with ports %v", svc.Ports)
		}
		var got []string
		for _, ep := range a.Endpoints(hostname, port, nil) {
			got = append(got, ep.Address)
		}
		if !slices.Equal(got, want) {
			return false, fmt.Sprintf("endpoints %v", got)
		}
		if !slices.ContainsFunc(events, func(ev model.Event) bool { return ev.Hostname == hostname && ev.Kind == kind }) {
			return false, fmt.Sprintf("events %v", events)
		}
		return true, ""
	})
	return events
}

// TestKubernetesAndFilesThroughOneAggregate runs the aggregate over the
// Kubernetes registry (first) and the file registry, which both define
// one hostname: the cluster's definition is served with the endpoints of
// both, and changes of either source reach the aggregate's handler.
func TestKubernetesAndFilesThroughOneAggregate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	ns := env.Namespace(t, nil)
	createClusterObjects(t, ctx, ns)
	dir := t.TempDir()
	writeManifests(t, dir, ns)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	kc, err := kube.New(env.API, kube.Options{Namespaces: []string{ns}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	fr, err := file.New(file.Options{Dir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Sources: []Source{{Name: "kubernetes", Controller: kc}, {Name: "files", Controller: fr}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	a.AppendEventHandler(rec.add)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	testenv.Eventually(t, "the aggregate synced", func() (bool, string) {
		return a.HasSynced(), fmt.Sprintf("kubernetes %v, files %v", kc.HasSynced(), fr.HasSynced())
	})
	if ps := fr.Problems(); len(ps) > 0 {
		t.Fatalf("the manifests have problems: %v", ps)
	}

	api := model.ServiceHostname("api", ns, "")
	web := model.ServiceHostname("web", ns, "")
	var hosts []model.Hostname
	for _, svc := range a.Services() {
		hosts = append(hosts, svc.Hostname)
	}
	if !slices.Equal(hosts, []model.Hostname{api, web}) {
		t.Fatalf("Services = %v, want %s and %s once each", hosts, api, web)
	}
	if svc := a.GetService(api); svc != kc.GetService(api) {
		t.Fatalf("api is served with %+v, want the cluster's definition", svc)
	}
	awaitView(t, a, rec, api, model.ServiceChanged, 8080, "192.0.2.1", "192.0.2.50")
	if eps := a.Endpoints(api, 9090, nil); eps != nil {
		t.Fatalf("the files' port number of api is served: %v", eps)
	}
	for ip, want := range map[string]string{"192.0.2.1": "api-kube-1", "192.0.2.50": "api-files-1"} {
		if w := a.WorkloadByIP(ip); w == nil || w.Name != want {
			t.Errorf("WorkloadByIP(%s) = %+v, want %s", ip, w, want)
		}
	}

	// A change in the folder: the shadowed definition's endpoints change
	// the union.
	rec.take()
	writeManifests(t, dir, ns, "192.0.2.51")
	awaitView(t, a, rec, api, model.EndpointsChanged, 8080, "192.0.2.1", "192.0.2.50", "192.0.2.51")

	// A change in the cluster.
	cur, err := env.Client.DiscoveryV1().EndpointSlices(ns).Get(ctx, "api-kube", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := apiSlice(ns, "192.0.2.1", "192.0.2.2")
	next.ResourceVersion = cur.ResourceVersion
	if _, err := env.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitView(t, a, rec, api, model.EndpointsChanged, 8080, "192.0.2.1", "192.0.2.2", "192.0.2.50", "192.0.2.51")

	// The cluster's Service goes: the folder's definition is served, on
	// its own port number, with its own endpoints; the service was never
	// deleted.
	if err := env.Client.CoreV1().Services(ns).Delete(ctx, "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	events := awaitView(t, a, rec, api, model.ServiceChanged, 9090, "192.0.2.50", "192.0.2.51")
	if svc := a.GetService(api); svc != fr.GetService(api) {
		t.Fatalf("api is served with %+v, want the folder's definition", svc)
	}
	for _, ev := range append(events, rec.take()...) {
		if ev.Hostname == api && ev.Kind == model.ServiceDeleted {
			t.Fatalf("the aggregate emitted %v while the folder still defines api", ev)
		}
	}
}
