package audit

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// startRegistry runs a Kubernetes registry on client, watching ns, until
// the test ends, and waits until it has synced.
func startRegistry(t testing.TB, client *kubeapi.Client, ns string) *kube.Controller {
	t.Helper()
	c, err := kube.New(client, kube.Options{Namespaces: []string{ns}})
	if err != nil {
		t.Fatal(err)
	}
	runUntilEnd(t, c.Run)
	testenv.Eventually(t, "registry synced", func() (bool, string) { return c.HasSynced(), "" })
	return c
}

func runUntilEnd(t testing.TB, run func(context.Context) error) {
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

var httpPort = corev1.ServicePort{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}

func createService(t testing.TB, ns, name string) {
	t.Helper()
	_, err := env.Client.CoreV1().Services(ns).Create(ctx(t), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{httpPort}, Selector: map[string]string{"app": name}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// endpointSlice is a slice of service on port 9090 with one ready
// endpoint per address.
func endpointSlice(ns, name, service string, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](9090), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

// endpointsOf renders the model's endpoints of a service port.
func endpointsOf(d model.ServiceDiscovery, host model.Hostname) string {
	var out []string
	for _, e := range d.Endpoints(host, 8080, nil) {
		out = append(out, fmt.Sprintf("%s:%d %s", e.Address, e.Port, e.Health))
	}
	return strings.Join(out, ", ")
}

func waitEndpoints(t testing.TB, d model.ServiceDiscovery, host model.Hostname, want string) {
	t.Helper()
	testenv.Eventually(t, "endpoints of "+string(host), func() (bool, string) {
		got := endpointsOf(d, host)
		return got == want, fmt.Sprintf("got %q, want %q", got, want)
	})
}

// summary renders differences without their values and times, ordered
// as reported.
func summary(diffs []Difference) string {
	var out []string
	for _, d := range diffs {
		out = append(out, d.Kind+" "+d.Object+" "+d.Field)
	}
	return strings.Join(out, "\n")
}

func listedOf(rep Report, kind string) Listed {
	for _, l := range rep.Listed {
		if l.Kind == kind {
			return l
		}
	}
	return Listed{}
}

// TestConsistentClusterHasNoDifferences audits a registry that missed
// nothing: zero differences, every kind listed, and the LIST paginated
// (more objects than a page).
func TestConsistentClusterHasNoDifferences(t *testing.T) {
	ns := env.Namespace(t, nil)
	for i := range 5 {
		name := fmt.Sprintf("svc-%d", i)
		createService(t, ns, name)
		env.ApplyEndpointSlice(t, endpointSlice(ns, name+"-a", name, fmt.Sprintf("192.0.2.%d", 10+i), fmt.Sprintf("192.0.2.%d", 20+i)))
	}
	env.RunningPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "svc-0-pod", Namespace: ns, Labels: map[string]string{"app": "svc-0"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
	}, "192.0.2.10")
	c := startRegistry(t, env.API, ns)
	waitEndpoints(t, c, model.ServiceHostname("svc-4", ns, model.DefaultDomainSuffix), "192.0.2.14:9090 HEALTHY, 192.0.2.24:9090 HEALTHY")
	testenv.Eventually(t, "the pod's labels on its endpoint", func() (bool, string) {
		eps := c.Endpoints(model.ServiceHostname("svc-0", ns, model.DefaultDomainSuffix), 8080, model.Labels{"app": "svc-0"})
		return len(eps) == 1, fmt.Sprint(eps)
	})

	a, err := New(Options{Registry: c, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := a.Audit(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Differences) != 0 {
		t.Fatalf("differences in a consistent cluster:\n%s\n%+v", summary(rep.Differences), rep.Differences)
	}
	if rep.Services != 5 {
		t.Fatalf("%d services rebuilt from the list, want 5", rep.Services)
	}
	for _, kind := range kube.Kinds {
		if l := listedOf(rep, kind); l.Pages == 0 {
			t.Fatalf("%s not listed: %+v", kind, rep.Listed)
		}
	}
	// 5 objects in pages of 2: 3 requests.
	for _, kind := range []string{kube.KindService, kube.KindEndpointSlice} {
		if l := listedOf(rep, kind); l.Objects != 5 || l.Pages != 3 {
			t.Fatalf("%s listed %+v, want 5 objects in 3 pages", kind, l)
		}
	}
}

// observed records what an Auditor tells its Observer.
type observed struct {
	mu       sync.Mutex // guards the fields below
	audits   int
	last     map[string]int
	relisted []string
}

func (o *observed) Audited(d map[string]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.audits++
	o.last = d
}

func (o *observed) Relisted(kind string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.relisted = append(o.relisted, kind)
}

func (o *observed) relists() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.relisted...)
}

// TestLostWatchEventIsFoundAndRepaired drops one EndpointSlice MODIFIED
// event between the API server and the registry. The model then keeps
// the old endpoint for good: nothing in client-go notices. The audit
// reports the slice's resourceVersion, its old and new endpoint and both
// model endpoints, with the same first-seen time on the second audit; the
// periodic audit relists EndpointSlices once the differences have
// outlived two audits, logs it, and the model is exact again: no
// difference left.
func TestLostWatchEventIsFoundAndRepaired(t *testing.T) {
	ns := env.Namespace(t, nil)
	proxy := newDropProxy(t, env.Config)
	client, err := kubeapi.NewForConfig(proxy.config())
	if err != nil {
		t.Fatal(err)
	}
	createService(t, ns, "web")
	env.ApplyEndpointSlice(t, endpointSlice(ns, "web-a", "web", "192.0.2.1"))
	c := startRegistry(t, client, ns)
	host := model.ServiceHostname("web", ns, model.DefaultDomainSuffix)
	waitEndpoints(t, c, host, "192.0.2.1:9090 HEALTHY")

	proxy.arm(dropRule{resource: "endpointslices", eventType: "MODIFIED", name: "web-a"})
	env.ApplyEndpointSlice(t, endpointSlice(ns, "web-a", "web", "192.0.2.2"))
	testenv.Eventually(t, "the MODIFIED event dropped", func() (bool, string) {
		return len(proxy.droppedEvents()) == 1, "nothing dropped yet"
	})
	if got := endpointsOf(c, host); got != "192.0.2.1:9090 HEALTHY" {
		t.Fatalf("endpoints after the lost event = %q: the event was not lost", got)
	}

	logs := &logBuffer{}
	obs := &observed{}
	a, err := New(Options{Registry: c, Interval: 300 * time.Millisecond, Observer: obs,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"EndpointSlice " + ns + "/web-a metadata.resourceVersion",
		"EndpointSlice " + ns + "/web-a endpoints[192.0.2.1]",
		"EndpointSlice " + ns + "/web-a endpoints[192.0.2.2]",
		"model.Endpoint " + string(host) + ":8080 endpoint 192.0.2.1",
		"model.Endpoint " + string(host) + ":8080 endpoint 192.0.2.2",
	}, "\n")
	first, err := a.Audit(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(first.Differences); got != want {
		t.Fatalf("differences:\n%s\nwant:\n%s", got, want)
	}
	d := first.Differences[0]
	rv := strings.Fields(proxy.droppedEvents()[0])[2]
	if d.List != rv || d.Cache == rv || d.Audits != 1 || !d.Since.Equal(first.Started) {
		t.Fatalf("slice difference %+v: want list %s (the dropped event's), cache older, first audit", d, rv)
	}
	if e, n := first.Differences[1], first.Differences[2]; e.List != absent || n.Cache != absent {
		t.Fatalf("slice endpoints %+v, %+v: want the old address only cached, the new one only listed", e, n)
	}
	if e := first.Differences[3]; e.Cache != "present" || e.List != absent {
		t.Fatalf("old endpoint %+v: want present in the model, absent from the LIST", e)
	}
	if obs.last[kube.KindEndpointSlice] != 3 || obs.last[KindModelEndpoint] != 2 || obs.last[kube.KindPod] != 0 {
		t.Fatalf("observer told %v", obs.last)
	}
	second, err := a.Audit(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(second.Differences); got != want {
		t.Fatalf("second audit's differences:\n%s\nwant:\n%s", got, want)
	}
	if d := second.Differences[0]; d.Audits != 2 || !d.Since.Equal(first.Started) {
		t.Fatalf("second audit: %+v, want 2 audits since %v", d, first.Started)
	}
	if got := endpointsOf(c, host); got != "192.0.2.1:9090 HEALTHY" {
		t.Fatalf("endpoints = %q: on-demand audits repair nothing", got)
	}

	runUntilEnd(t, a.Run)
	testenv.Eventually(t, "the relist logged", func() (bool, string) {
		return strings.Contains(logs.String(), "relisted EndpointSlices: 3 differences outlived two audits"), logs.String()
	})
	waitEndpoints(t, c, host, "192.0.2.2:9090 HEALTHY")
	if r := obs.relists(); len(r) == 0 || r[0] != kube.KindEndpointSlice {
		t.Fatalf("relists told to the observer: %v", r)
	}
	testenv.Eventually(t, "an audit without differences", func() (bool, string) {
		rep, err := a.Audit(ctx(t))
		if err != nil {
			return false, err.Error()
		}
		return len(rep.Differences) == 0, summary(rep.Differences)
	})
	if n := len(proxy.droppedEvents()); n != 1 {
		t.Fatalf("%d events dropped, want 1", n)
	}
}

// logBuffer collects a logger's output. (testutil's Lines would import
// the server, which imports this package.)
type logBuffer struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLostDeleteIsRepaired drops the DELETED event of one of a
// service's two EndpointSlices: the cache and the model keep the deleted
// slice's endpoint until the periodic audit relists EndpointSlices, which
// deletes it.
func TestLostDeleteIsRepaired(t *testing.T) {
	ns := env.Namespace(t, nil)
	proxy := newDropProxy(t, env.Config)
	client, err := kubeapi.NewForConfig(proxy.config())
	if err != nil {
		t.Fatal(err)
	}
	createService(t, ns, "web")
	env.ApplyEndpointSlice(t, endpointSlice(ns, "web-a", "web", "192.0.2.1"))
	env.ApplyEndpointSlice(t, endpointSlice(ns, "web-b", "web", "192.0.2.2"))
	c := startRegistry(t, client, ns)
	host := model.ServiceHostname("web", ns, model.DefaultDomainSuffix)
	waitEndpoints(t, c, host, "192.0.2.1:9090 HEALTHY, 192.0.2.2:9090 HEALTHY")

	proxy.arm(dropRule{resource: "endpointslices", eventType: "DELETED", name: "web-b"})
	if err := env.Client.DiscoveryV1().EndpointSlices(ns).Delete(ctx(t), "web-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the DELETED event dropped", func() (bool, string) {
		return len(proxy.droppedEvents()) == 1, "nothing dropped yet"
	})
	logs := &logBuffer{}
	a, err := New(Options{Registry: c, Interval: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := a.Audit(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	want := "EndpointSlice " + ns + "/web-b \nmodel.Endpoint " + string(host) + ":8080 endpoint 192.0.2.2"
	if got := summary(rep.Differences); got != want {
		t.Fatalf("differences:\n%s\nwant:\n%s", got, want)
	}
	if d := rep.Differences[0]; !strings.HasPrefix(d.Cache, "resourceVersion ") || d.List != absent {
		t.Fatalf("deleted slice: %+v, want cached, absent from the LIST", d)
	}
	runUntilEnd(t, a.Run)
	waitEndpoints(t, c, host, "192.0.2.1:9090 HEALTHY")
	if !strings.Contains(logs.String(), "relisted EndpointSlices: 1 difference outlived two audits") {
		t.Fatalf("no relist logged:\n%s", logs.String())
	}
	testenv.Eventually(t, "an audit without differences", func() (bool, string) {
		rep, err := a.Audit(ctx(t))
		if err != nil {
			return false, err.Error()
		}
		return len(rep.Differences) == 0, summary(rep.Differences)
	})
}
