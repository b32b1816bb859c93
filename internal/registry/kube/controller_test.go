package kube

import (
	"context"
	"fmt"
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
	"github.com/meshpilot/meshpilot/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

const waitTimeout = 20 * time.Second

// startController starts a controller on the package's API server with
// a recorder of its events, whose sync points go into the first of
// opts.Namespaces.
func startController(t *testing.T, opts Options) (*Controller, *recorder) {
	t.Helper()
	rec := newRecorder(env.Client, "")
	if len(opts.Namespaces) > 0 {
		rec.syncNS = opts.Namespaces[0]
	}
	c, err := New(env.API, rec.instrument(opts))
	if err != nil {
		t.Fatal(err)
	}
	runController(t, c, rec)
	return c, rec
}

// runController runs c until the test ends, recording its events in rec,
// and waits until it has synced.
func runController(t *testing.T, c *Controller, rec *recorder) {
	t.Helper()
	c.AppendEventHandler(rec.add)
	runUntilEnd(t, "Run", c.Run)
	testenv.Eventually(t, "controller synced", func() (bool, string) { return c.HasSynced(), "not synced" })
}

// runUntilEnd runs run in the background until the test ends, and
// reports its error.
func runUntilEnd(t *testing.T, what string, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", what, err)
		}
	})
}

// waitEvents waits until the recorder holds as many events for ns as
// wanted, then for a sync point, and checks that the events for ns before
// it are exactly the wanted ones, in order: a late duplicate would
// otherwise pass for the event the next step waits for.
func waitEvents(t *testing.T, rec *recorder, ns string, want ...model.Event) {
	t.Helper()
	var got []model.Event
	testenv.Eventually(t, fmt.Sprintf("events %v", want), func() (bool, string) {
		got = append(got, rec.take(ns)...)
		return len(got) >= len(want), fmt.Sprintf("got %v", got)
	})
	rec.point(t)
	got = append(got, rec.take(ns)...)
	// Every event carries when its informer event reached the controller;
	// the comparison leaves the time out, and whether the identities of
	// the endpoints changed, which the model's Store decides and tests.
	for i, ev := range got {
		if ev.Observed.IsZero() || ev.Observed.After(time.Now()) || time.Since(ev.Observed) > 2*waitTimeout {
			t.Fatalf("event %v: implausible Observed time", ev)
		}
		got[i].Observed = time.Time{}
		got[i].SameServiceAccounts = false
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustCreateService(t *testing.T, ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec:       corev1.ServiceSpec{Ports: ports, Selector: map[string]string{"app": name}},
	}
	out, err := env.Client.CoreV1().Services(ns).Create(ctx(t), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating service %s/%s: %v", ns, name, err)
	}
	return out
}

type sliceEndpoint struct {
	ip, pod, node string
	ready         *bool
	serving, term *bool
	zone          string
}

func slice(ns, name, service string, port int32, portName string, eps ...sliceEndpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{
			Addresses:  []string{e.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.term},
		}
		if e.pod != "" {
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: e.pod}
		}
		if e.node != "" {
			ep.NodeName = ptr.To(e.node)
		}
		if e.zone != "" {
			ep.Zone = ptr.To(e.zone)
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

func mustCreateSlice(t *testing.T, s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	t.Helper()
	out, err := env.Client.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx(t), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating slice %s/%s: %v", s.Namespace, s.Name, err)
	}
	return out
}

func mustUpdateSlice(t *testing.T, s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	t.Helper()
	cur, err := env.Client.DiscoveryV1().EndpointSlices(s.Namespace).Get(ctx(t), s.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.ResourceVersion = cur.ResourceVersion
	out, err := env.Client.DiscoveryV1().EndpointSlices(s.Namespace).Update(ctx(t), s, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating slice %s/%s: %v", s.Namespace, s.Name, err)
	}
	return out
}

// mustCreatePod creates a pod and sets its status as a kubelet would.
func mustCreatePod(t *testing.T, ns, name, ip, node string, labels map[string]string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: "sa-" + name,
			Containers:         []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}},
		},
	}
	return env.RunningPod(t, pod, ip)
}

func mustCreateNode(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := env.Client.CoreV1().Nodes().Create(ctx(t), node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func mustUpdateNode(t *testing.T, name string, mutate func(*corev1.Node)) {
	t.Helper()
	n, err := env.Client.CoreV1().Nodes().Get(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mutate(n)
	if _, err := env.Client.CoreV1().Nodes().Update(ctx(t), n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating node %s: %v", name, err)
	}
}

func nodeName(t *testing.T, suffix string) string {
	return strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")) + "-" + suffix
}

// endpointsOf renders the endpoints of a service port as comparable text.
func endpointsOf(c *Controller, host model.Hostname, port int32) string {
	var parts []string
	for _, ep := range c.Endpoints(host, port, nil) {
		parts = append(parts, fmt.Sprintf("%s:%d %s %s", ep.Address, ep.Port, ep.Health, ep.Locality))
	}
	return strings.Join(parts, ", ")
}

func waitEndpoints(t *testing.T, c *Controller, host model.Hostname, port int32, want string) {
	t.Helper()
	testenv.Eventually(t, "endpoints of "+string(host), func() (bool, string) {
		got := endpointsOf(c, host, port)
		return got == want, fmt.Sprintf("got %q, want %q", got, want)
	})
}

var grpcPort = corev1.ServicePort{Name: "grpc-api", Port: 8080, TargetPort: intstr.FromInt32(9090)}

func TestServiceAndEndpointsLifecycle(t *testing.T) {
	ns := env.Namespace(t, nil)
	node := nodeName(t, "n1")
	mustCreateNode(t, node, map[string]string{
		corev1.LabelTopologyRegion: "eu-west", corev1.LabelTopologyZone: "eu-west-1a", "topology.istio.io/subzone": "rack1"})
	mustCreatePod(t, ns, "api-1", "192.0.2.1", node, map[string]string{"app": "api", "version": "v1"})

	c, rec := startController(t, Options{Namespaces: []string{ns}})
	host := model.ServiceHostname("api", ns, model.DefaultDomainSuffix)

	mustCreateService(t, ns, "api", grpcPort)
	waitEvents(t, rec, ns, model.Event{Kind: model.ServiceChanged, Hostname: host, Namespace: ns, NoEndpoints: true})
	svc := c.GetService(host)
	if svc == nil || len(svc.Ports) != 1 || svc.Ports[0].Protocol != model.GRPC || svc.Resolution != model.ClientSideLB || len(svc.ClusterIPs) != 1 {
		t.Fatalf("service = %+v", svc)
	}

	s := mustCreateSlice(t, slice(ns, "api-abc", "api", 9090, "grpc-api",
		sliceEndpoint{ip: "192.0.2.1", pod: "api-1", node: node},
		sliceEndpoint{ip: "192.0.2.2", ready: ptr.To(false)}))
	waitEvents(t, rec, ns, model.Event{Kind: model.EndpointsChanged, Hostname: host, Namespace: ns})
	waitEndpoints(t, c, host, 8080, "192.0.2.1:9090 HEALTHY eu-west/eu-west-1a/rack1, 192.0.2.2:9090 UNHEALTHY ")
	ep := c.Endpoints(host, 8080, model.Labels{"version": "v1"})
	if len(ep) != 1 || ep[0].PodName != "api-1" || ep[0].ServiceAccount != "sa-api-1" || ep[0].NodeName != node ||
		ep[0].Labels[corev1.LabelTopologyZone] != "eu-west-1a" {
		t.Fatalf("endpoints selected by version=v1: %+v", ep)
	}
	if w := c.WorkloadByIP("192.0.2.1"); w == nil || w.Name != "api-1" || w.Locality.Zone != "eu-west-1a" {
		t.Fatalf("WorkloadByIP = %+v", w)
	}

	// Ready, then not ready but serving and terminating: draining.
	s.Endpoints[1].Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
	s = mustUpdateSlice(t, s)
	waitEvents(t, rec, ns, model.Event{Kind: model.EndpointsChanged, Hostname: host, Namespace: ns})
	waitEndpoints(t, c, host, 8080, "192.0.2.1:9090 HEALTHY eu-west/eu-west-1a/rack1, 192.0.2.2:9090 DRAINING ")

	// A port change is a service change.
	svcObj, err := env.Client.CoreV1().Services(ns).Get(ctx(t), "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svcObj.Spec.Ports = append(svcObj.Spec.Ports, corev1.ServicePort{Name: "http-metrics", Port: 9000})
	if _, err := env.Client.CoreV1().Services(ns).Update(ctx(t), svcObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, rec, ns, model.Event{Kind: model.ServiceChanged, Hostname: host, Namespace: ns})
	if p, ok := c.GetService(host).PortByNumber(9000); !ok || p.Protocol != model.HTTP {
		t.Fatalf("new port = %+v %v", p, ok)
	}

	// Deleting the slice empties the endpoints; deleting the service removes it.
	if err := env.Client.DiscoveryV1().EndpointSlices(ns).Delete(ctx(t), s.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, rec, ns, model.Event{Kind: model.EndpointsChanged, Hostname: host, Namespace: ns, NoEndpoints: true})
	waitEndpoints(t, c, host, 8080, "")
	if err := env.Client.CoreV1().Services(ns).Delete(ctx(t), "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, rec, ns, model.Event{Kind: model.ServiceDeleted, Hostname: host, Namespace: ns, NoEndpoints: true})
	if c.GetService(host) != nil {
		t.Fatal("service still in the model after delete")
	}
}

func TestPodArrivesAfterItsSlice(t *testing.T) {
	ns := env.Namespace(t, nil)
	c, rec := startController(t, Options{Namespaces: []string{ns}})
	host := model.ServiceHostname("late", ns, model.DefaultDomainSuffix)
	mustCreateService(t, ns, "late", grpcPort)
	mustCreateSlice(t, slice(ns, "late-1", "late", 9090, "grpc-api",
		sliceEndpoint{ip: "192.0.2.10", pod: "late-1", zone: "slice-zone"}))
	waitEndpoints(t, c, host, 8080, "192.0.2.10:9090 HEALTHY /slice-zone/")
	settledEvents(t, rec, ns)
	if ep := c.Endpoints(host, 8080, nil); ep[0].ServiceAccount != "" || ep[0].Labels["app"] != "" {
		t.Fatalf("endpoint has pod data before the pod exists: %+v", ep[0])
	}

	mustCreatePod(t, ns, "late-1", "192.0.2.10", "", map[string]string{"app": "late", "istio-locality": "us.us-east-1b.r7"})
	waitEndpoints(t, c, host, 8080, "192.0.2.10:9090 HEALTHY us/us-east-1b/r7")
	ep := c.Endpoints(host, 8080, nil)[0]
	if ep.ServiceAccount != "sa-late-1" || ep.Labels["app"] != "late" {
		t.Fatalf("endpoint after the pod arrived: %+v", ep)
	}
	waitEvents(t, rec, ns, model.Event{Kind: model.EndpointsChanged, Hostname: host, Namespace: ns})
}

func TestNodeZoneChangeMovesLocality(t *testing.T) {
	ns := env.Namespace(t, nil)
	node := nodeName(t, "n")
	mustCreateNode(t, node, map[string]string{corev1.LabelTopologyRegion: "r1", corev1.LabelTopologyZone: "z1"})
	mustCreatePod(t, ns, "p1", "192.0.2.20", node, map[string]string{"app": "zoned"})
	c, rec := startController(t, Options{Namespaces: []string{ns}})
	host := model.ServiceHostname("zoned", ns, model.DefaultDomainSuffix)
	mustCreateService(t, ns, "zoned", grpcPort)
	mustCreateSlice(t, slice(ns, "zoned-1", "zoned", 9090, "grpc-api", sliceEndpoint{ip: "192.0.2.20", pod: "p1", node: node}))
	waitEndpoints(t, c, host, 8080, "192.0.2.20:9090 HEALTHY r1/z1/")
	settledEvents(t, rec, ns)

	mustUpdateNode(t, node, func(n *corev1.Node) { n.Labels[corev1.LabelTopologyZone] = "z2" })
	waitEndpoints(t, c, host, 8080, "192.0.2.20:9090 HEALTHY r1/z2/")
	waitEvents(t, rec, ns, model.Event{Kind: model.EndpointsChanged, Hostname: host, Namespace: ns})

	// A node update that touches nothing we read changes nothing. Node
	// events are not ordered with a sync point's: once the controller has
	// handled the update and its work queue is idle, a later update that
	// is read stands for one, since the informer hands the updates over
	// in order and any rebuild of the first is done by then. Only the
	// second one's event may come.
	updates := rec.informerEvents("Node", "update")
	mustUpdateNode(t, node, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	testenv.Eventually(t, "the node update handled", func() (bool, string) {
		n := rec.informerEvents("Node", "update")
		return n > updates, fmt.Sprintf("%d node updates", n-updates)
	})
	rec.idle(t)
	mustUpdateNode(t, node, func(n *corev1.Node) { n.Labels[corev1.LabelTopologyZone] = "z3" })
	waitEndpoints(t, c, host, 8080, "192.0.2.20:9090 HEALTHY r1/z3/")
	waitEvents(t, rec, ns, model.Event{Kind: model.EndpointsChanged, Hostname: host, Namespace: ns})
}

// settledEvents returns the events for ns up to a sync point: everything
// the steps so far caused, late events included. A test that only waited
// for the model to show a change could miss an event still on its way
// (handlers run after the change is visible) and take it later for the
// event of its next step.
func settledEvents(t *testing.T, rec *recorder, ns string) []model.Event {
	t.Helper()
	rec.point(t)
	return rec.take(ns)
}

// assertNoEvents checks that the controller emitted nothing for the
// namespaces up to a sync point. An absence cannot be awaited; a sync
// point, after which anything owed would have come, stands for it.
func assertNoEvents(t *testing.T, rec *recorder, namespaces ...string) {
	t.Helper()
	rec.point(t)
	for _, ns := range namespaces {
		if got := rec.take(ns); len(got) > 0 {
			t.Fatalf("unexpected events for %s: %v", ns, got)
		}
	}
}

func TestServiceWithTwoSlicesMerges(t *testing.T) {
	ns := env.Namespace(t, nil)
	c, _ := startController(t, Options{Namespaces: []string{ns}})
	host := model.ServiceHostname("two", ns, model.DefaultDomainSuffix)
	mustCreateService(t, ns, "two", grpcPort)
	mustCreateSlice(t, slice(ns, "two-a", "two", 9090, "grpc-api",
		sliceEndpoint{ip: "192.0.2.31"}, sliceEndpoint{ip: "192.0.2.32"}))
	mustCreateSlice(t, slice(ns, "two-b", "two", 9090, "grpc-api",
		sliceEndpoint{ip: "192.0.2.33"}, sliceEndpoint{ip: "192.0.2.32", ready: ptr.To(false)}))
	// 192.0.2.32 is in both slices (a pod moving between them): one
	// endpoint, the healthier state wins.
	waitEndpoints(t, c, host, 8080, "192.0.2.31:9090 HEALTHY , 192.0.2.32:9090 HEALTHY , 192.0.2.33:9090 HEALTHY ")
	if err := env.Client.DiscoveryV1().EndpointSlices(ns).Delete(ctx(t), "two-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, c, host, 8080, "192.0.2.32:9090 UNHEALTHY , 192.0.2.33:9090 HEALTHY ")
}

func TestHeadlessAndExternalName(t *testing.T) {
	ns := env.Namespace(t, nil)
	c, _ := startController(t, Options{Namespaces: []string{ns}, DomainSuffix: "mesh.example"})
	headless := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "tcp-db", Port: 5432}}},
	}
	ext := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "search", Namespace: ns},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "search.example.com", Ports: []corev1.ServicePort{{Name: "https", Port: 443}}},
	}
	for _, s := range []*corev1.Service{headless, ext} {
		if _, err := env.Client.CoreV1().Services(ns).Create(ctx(t), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mustCreateSlice(t, slice(ns, "db-1", "db", 5432, "tcp-db", sliceEndpoint{ip: "192.0.2.40"}))
	dbHost := model.Hostname("db." + ns + ".svc.mesh.example")
	waitEndpoints(t, c, dbHost, 5432, "192.0.2.40:5432 HEALTHY ")
	if s := c.GetService(dbHost); s.Resolution != model.Passthrough || len(s.ClusterIPs) != 0 || s.Ports[0].Protocol != model.TCP {
		t.Fatalf("headless service = %+v", s)
	}
	extHost := model.Hostname("search." + ns + ".svc.mesh.example")
	testenv.Eventually(t, "external name service", func() (bool, string) {
		s := c.GetService(extHost)
		return s != nil && s.Resolution == model.DNSAlias && s.ExternalName == "search.example.com", fmt.Sprintf("%+v", s)
	})
}

// TestTrafficPoliciesReachTheModel: spec.internalTrafficPolicy and
// spec.trafficDistribution, as a real API server stores them (PreferClose
// with its deprecation warning), reach the model, and a change of either
// is a service change, since the endpoints each client gets depend on
// them; an endpoint's node comes from its slice when no Pod is behind it.
func TestTrafficPoliciesReachTheModel(t *testing.T) {
	ns := env.Namespace(t, nil)
	c, rec := startController(t, Options{Namespaces: []string{ns}})
	host := model.ServiceHostname("policy", ns, model.DefaultDomainSuffix)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "policy", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{grpcPort},
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
			TrafficDistribution:   ptr.To(corev1.ServiceTrafficDistributionPreferClose)},
	}
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, rec, ns, model.Event{Kind: model.ServiceChanged, Hostname: host, Namespace: ns, NoEndpoints: true})
	if got := c.GetService(host); got.InternalTrafficPolicy != model.InternalTrafficLocal || got.TrafficDistribution != model.PreferSameZone {
		t.Fatalf("service = %+v, want internal traffic Local and PreferSameZone", got)
	}

	node := nodeName(t, "n1")
	mustCreateSlice(t, slice(ns, "policy-1", "policy", 9090, "grpc-api", sliceEndpoint{ip: "192.0.2.70", node: node}))
	waitEvents(t, rec, ns, model.Event{Kind: model.EndpointsChanged, Hostname: host, Namespace: ns})
	if eps := c.Endpoints(host, 8080, nil); len(eps) != 1 || eps[0].NodeName != node {
		t.Fatalf("endpoints = %+v, want one on node %s", eps, node)
	}

	// The API server defaults an unset policy to Cluster.
	cur, err := env.Client.CoreV1().Services(ns).Get(ctx(t), "policy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.InternalTrafficPolicy = nil
	cur.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferSameNode)
	if _, err := env.Client.CoreV1().Services(ns).Update(ctx(t), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, rec, ns, model.Event{Kind: model.ServiceChanged, Hostname: host, Namespace: ns})
	if got := c.GetService(host); got.InternalTrafficPolicy != model.InternalTrafficCluster || got.TrafficDistribution != model.PreferSameNode {
		t.Fatalf("service = %+v, want internal traffic Cluster and PreferSameNode", got)
	}

	// A distribution removed is no preference.
	if cur, err = env.Client.CoreV1().Services(ns).Get(ctx(t), "policy", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	cur.Spec.TrafficDistribution = nil
	if _, err := env.Client.CoreV1().Services(ns).Update(ctx(t), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, rec, ns, model.Event{Kind: model.ServiceChanged, Hostname: host, Namespace: ns})
	if got := c.GetService(host); got.InternalTrafficPolicy != model.InternalTrafficCluster || got.TrafficDistribution != model.TrafficDistributionAny {
		t.Fatalf("service = %+v, want internal traffic Cluster and no preference", got)
	}
}

func TestNamespaceListScope(t *testing.T) {
	in := env.Namespace(t, nil)
	out := env.Namespace(t, nil)
	mustCreateService(t, out, "hidden", grpcPort)
	mustCreatePod(t, out, "hidden-1", "192.0.2.50", "", nil)
	c, _ := startController(t, Options{Namespaces: []string{in}})
	mustCreateService(t, in, "shown", grpcPort)
	testenv.Eventually(t, "service in scope", func() (bool, string) {
		return c.GetService(model.ServiceHostname("shown", in, model.DefaultDomainSuffix)) != nil, "missing"
	})
	if c.GetService(model.ServiceHostname("hidden", out, model.DefaultDomainSuffix)) != nil {
		t.Fatal("service outside --namespaces is in the model")
	}
	// The API server sent nothing of the other namespace: the caches hold
	// only objects of the listed one.
	for ns, scope := range c.scopes {
		if ns != in {
			t.Fatalf("informers for namespace %q exist", ns)
		}
		for _, obj := range append(scope.services.GetStore().List(), scope.pods.GetStore().List()...) {
			if m := obj.(metav1.Object); m.GetNamespace() != in {
				t.Fatalf("cache holds %s/%s from outside the scope", m.GetNamespace(), m.GetName())
			}
		}
	}
	if c.WorkloadByIP("192.0.2.50") != nil {
		t.Fatal("pod outside --namespaces is visible")
	}
}

func TestDiscoverySelectorsFollowLabels(t *testing.T) {
	prod := env.Namespace(t, map[string]string{"env": "prod"})
	dev := env.Namespace(t, map[string]string{"env": "dev"})
	mustCreateService(t, prod, "a", grpcPort)
	mustCreateService(t, dev, "b", grpcPort)
	c, rec := startController(t, Options{DiscoverySelectors: []string{"env=prod", "team in (x,y)"}})
	rec.syncNS = prod
	hostA, hostB := model.ServiceHostname("a", prod, model.DefaultDomainSuffix), model.ServiceHostname("b", dev, model.DefaultDomainSuffix)
	if c.GetService(hostA) == nil || c.GetService(hostB) != nil {
		t.Fatalf("after sync: a=%v b=%v, want only a", c.GetService(hostA), c.GetService(hostB))
	}
	settledEvents(t, rec, prod)
	settledEvents(t, rec, dev)

	relabel := func(ns string, labels map[string]string) {
		t.Helper()
		obj, err := env.Client.CoreV1().Namespaces().Get(ctx(t), ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		obj.Labels = labels
		if _, err := env.Client.CoreV1().Namespaces().Update(ctx(t), obj, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// dev matches the second selector now: its service appears.
	relabel(dev, map[string]string{"env": "dev", "team": "y"})
	waitEvents(t, rec, dev, model.Event{Kind: model.ServiceChanged, Hostname: hostB, Namespace: dev, NoEndpoints: true})
	// prod matches nothing now: its service disappears.
	rec.syncNS = dev
	relabel(prod, map[string]string{"env": "staging"})
	waitEvents(t, rec, prod, model.Event{Kind: model.ServiceDeleted, Hostname: hostA, Namespace: prod, NoEndpoints: true})
	if c.GetService(hostA) != nil || c.GetService(hostB) == nil {
		t.Fatal("model does not follow the namespace labels")
	}
	// New objects in an unselected namespace stay out. (The sync point
	// is in dev, selected now; the Service informer watches every
	// namespace and hands over a2's add before it.)
	mustCreateService(t, prod, "a2", grpcPort)
	assertNoEvents(t, rec, prod)
}

func TestSyncedMeansModelBuilt(t *testing.T) {
	ns := env.Namespace(t, nil)
	for i := range 20 {
		name := fmt.Sprintf("s%d", i)
		mustCreateService(t, ns, name, grpcPort)
		mustCreateSlice(t, slice(ns, name, name, 9090, "grpc-api", sliceEndpoint{ip: fmt.Sprintf("192.0.2.%d", 100+i)}))
	}
	c, err := New(env.API, Options{Namespaces: []string{ns}})
	if err != nil {
		t.Fatal(err)
	}
	if c.HasSynced() {
		t.Fatal("synced before Run")
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	testenv.Eventually(t, "synced", func() (bool, string) { return c.HasSynced(), "" })
	// The moment it says synced, the whole model is there.
	if svcs, eps := c.Len(); svcs != 20 || eps != 20 {
		t.Fatalf("at sync: %d services, %d endpoints; want 20, 20", svcs, eps)
	}
}

func TestBadSelectorIsAnError(t *testing.T) {
	_, err := New(env.API, Options{DiscoverySelectors: []string{"env in (a"}})
	if err == nil || !strings.Contains(err.Error(), "env in (a") {
		t.Fatalf("err = %v, want one naming the selector", err)
	}
}

// TestAPIServerRestart stops and restarts the API server under a running
// controller: it must reconnect, relist, end with the API's state, and
// emit nothing for objects that did not change.
func TestAPIServerRestart(t *testing.T) {
	ns := env.Namespace(t, nil)
	c, rec := startController(t, Options{Namespaces: []string{ns}})
	host := model.ServiceHostname("steady", ns, model.DefaultDomainSuffix)
	mustCreateService(t, ns, "steady", grpcPort)
	mustCreateSlice(t, slice(ns, "steady-1", "steady", 9090, "grpc-api", sliceEndpoint{ip: "192.0.2.60"}))
	waitEndpoints(t, c, host, 8080, "192.0.2.60:9090 HEALTHY ")
	settledEvents(t, rec, ns)

	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	// A change after the restart arrives: the watches are back.
	mustCreateService(t, ns, "after", grpcPort)
	after := model.ServiceHostname("after", ns, model.DefaultDomainSuffix)
	testenv.Eventually(t, "service created after the restart", func() (bool, string) {
		return c.GetService(after) != nil, "missing"
	})
	// The sync point of waitEvents writes a Service and an EndpointSlice
	// after the restart, so both informers have relisted or resumed by
	// then: nothing else came.
	waitEvents(t, rec, ns, model.Event{Kind: model.ServiceChanged, Hostname: after, Namespace: ns, NoEndpoints: true})
	waitEndpoints(t, c, host, 8080, "192.0.2.60:9090 HEALTHY ")
}

// TestPodAndNodeDeletes: a deleted Pod takes its labels and service
// account off the endpoint (the slice still names the address until the
// endpoints controller updates it); a deleted Node takes its locality off,
// and the slice's zone is used again.
func TestPodAndNodeDeletes(t *testing.T) {
	ns := env.Namespace(t, nil)
	node := nodeName(t, "n")
	mustCreateNode(t, node, map[string]string{corev1.LabelTopologyRegion: "r9", corev1.LabelTopologyZone: "z9"})
	mustCreatePod(t, ns, "p1", "192.0.2.70", node, map[string]string{"app": "del", "tier": "web"})
	c, rec := startController(t, Options{Namespaces: []string{ns}})
	host := model.ServiceHostname("del", ns, model.DefaultDomainSuffix)
	mustCreateService(t, ns, "del", grpcPort)
	mustCreateSlice(t, slice(ns, "del-1", "del", 9090, "grpc-api",
		sliceEndpoint{ip: "192.0.2.70", pod: "p1", node: node, zone: "slice-zone"}))
	waitEndpoints(t, c, host, 8080, "192.0.2.70:9090 HEALTHY r9/z9/")
	if ep := c.Endpoints(host, 8080, model.Labels{"tier": "web"}); len(ep) != 1 || ep[0].ServiceAccount != "sa-p1" {
		t.Fatalf("endpoint before the deletes: %+v", ep)
	}
	settledEvents(t, rec, ns)

	if err := env.Client.CoreV1().Pods(ns).Delete(ctx(t), "p1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "pod data gone from the endpoint", func() (bool, string) {
		eps := c.Endpoints(host, 8080, nil)
		return len(eps) == 1 && eps[0].Labels["tier"] == "" && eps[0].ServiceAccount == "", fmt.Sprintf("%+v", eps)
	})
	if w := c.WorkloadByIP("192.0.2.70"); w != nil {
		t.Fatalf("WorkloadByIP after the pod's deletion = %+v", w)
	}
	waitEvents(t, rec, ns, model.Event{Kind: model.EndpointsChanged, Hostname: host, Namespace: ns})

	if err := env.Client.CoreV1().Nodes().Delete(ctx(t), node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, c, host, 8080, "192.0.2.70:9090 HEALTHY /slice-zone/")
	waitEvents(t, rec, ns, model.Event{Kind: model.EndpointsChanged, Hostname: host, Namespace: ns})
}

// TestLocalityFromDeprecatedNodeLabels: a Node labelled only with the
// deprecated failure-domain labels (older clusters, some providers) gives
// its Pods' endpoints their locality, a change of the deprecated zone
// moves them, and a Pod's topology.istio.io/locality label overrides its
// Node.
func TestLocalityFromDeprecatedNodeLabels(t *testing.T) {
	ns := env.Namespace(t, nil)
	node := nodeName(t, "n")
	mustCreateNode(t, node, map[string]string{
		corev1.LabelFailureDomainBetaRegion: "old-r", corev1.LabelFailureDomainBetaZone: "old-z1",
		"topology.istio.io/subzone": "rack3"})
	mustCreatePod(t, ns, "p1", "192.0.2.80", node, map[string]string{"app": "loc"})
	mustCreatePod(t, ns, "p2", "192.0.2.81", node, map[string]string{"app": "loc",
		"topology.istio.io/locality": "pinned-r.pinned-z.pinned-s", "istio-locality": "legacy-r.legacy-z"})
	c, rec := startController(t, Options{Namespaces: []string{ns}})
	host := model.ServiceHostname("loc", ns, model.DefaultDomainSuffix)
	mustCreateService(t, ns, "loc", grpcPort)
	mustCreateSlice(t, slice(ns, "loc-1", "loc", 9090, "grpc-api",
		sliceEndpoint{ip: "192.0.2.80", pod: "p1", node: node, zone: "slice-zone"},
		sliceEndpoint{ip: "192.0.2.81", pod: "p2", node: node, zone: "slice-zone"}))
	waitEndpoints(t, c, host, 8080,
		"192.0.2.80:9090 HEALTHY old-r/old-z1/rack3, 192.0.2.81:9090 HEALTHY pinned-r/pinned-z/pinned-s")
	settledEvents(t, rec, ns)

	mustUpdateNode(t, node, func(n *corev1.Node) { n.Labels[corev1.LabelFailureDomainBetaZone] = "old-z2" })
	waitEndpoints(t, c, host, 8080,
		"192.0.2.80:9090 HEALTHY old-r/old-z2/rack3, 192.0.2.81:9090 HEALTHY pinned-r/pinned-z/pinned-s")
	waitEvents(t, rec, ns, model.Event{Kind: model.EndpointsChanged, Hostname: host, Namespace: ns})
}

// TestStaleSliceAfterTargetPortChange: the Service's targetPort is 9090;
// a slice written before a change still lists an address on 8080 when the
// new slice lists it on 9090: one endpoint, on 9090.
func TestStaleSliceAfterTargetPortChange(t *testing.T) {
	ns := env.Namespace(t, nil)
	c, _ := startController(t, Options{Namespaces: []string{ns}})
	host := model.ServiceHostname("moved", ns, model.DefaultDomainSuffix)
	mustCreateService(t, ns, "moved", grpcPort)
	mustCreateSlice(t, slice(ns, "moved-old", "moved", 8080, "grpc-api", sliceEndpoint{ip: "192.0.2.90"}))
	// Alone, the old slice is all there is to go by.
	waitEndpoints(t, c, host, 8080, "192.0.2.90:8080 HEALTHY ")
	mustCreateSlice(t, slice(ns, "moved-new", "moved", 9090, "grpc-api", sliceEndpoint{ip: "192.0.2.90"}, sliceEndpoint{ip: "192.0.2.91"}))
	waitEndpoints(t, c, host, 8080, "192.0.2.90:9090 HEALTHY , 192.0.2.91:9090 HEALTHY ")
}

// TestPodByIPForEndpointWithoutTargetRef: a slice endpoint without a
// targetRef takes its labels from the Pod holding its IP. A hostNetwork
// IP is held by many Pods: one of another watched namespace, a finished
// one and a deleting one of the slice's namespace, and the live one the
// endpoint belongs to. A label change on that Pod reaches the endpoint.
func TestPodByIPForEndpointWithoutTargetRef(t *testing.T) {
	ns := env.Namespace(t, nil)
	other := env.Namespace(t, nil)
	node := nodeName(t, "n")
	mustCreateNode(t, node, map[string]string{corev1.LabelTopologyZone: "z1"})
	const ip = "192.0.2.100"
	mustCreatePod(t, other, "a-agent", ip, node, map[string]string{"app": "agent"})
	job := mustCreatePod(t, ns, "b-job", ip, node, map[string]string{"app": "job"})
	job.Status.Phase = corev1.PodSucceeded
	if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(ctx(t), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Pod bound to a node is deleted gracefully: with no kubelet to
	// finish the job, it stays, with its deletionTimestamp set.
	mustCreatePod(t, ns, "c-old", ip, node, map[string]string{"app": "old"})
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx(t), "c-old", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(3600))}); err != nil {
		t.Fatal(err)
	}
	mustCreatePod(t, ns, "d-new", ip, node, map[string]string{"app": "new", "version": "v1"})

	c, rec := startController(t, Options{Namespaces: []string{ns, other}})
	host := model.ServiceHostname("hostnet", ns, model.DefaultDomainSuffix)
	mustCreateService(t, ns, "hostnet", grpcPort)
	mustCreateSlice(t, slice(ns, "hostnet-1", "hostnet", 9090, "grpc-api", sliceEndpoint{ip: ip}))
	podOf := func() (bool, string) {
		eps := c.Endpoints(host, 8080, nil)
		if len(eps) != 1 {
			return false, fmt.Sprintf("%d endpoints", len(eps))
		}
		return true, fmt.Sprintf("pod %q labels %v", eps[0].PodName, eps[0].Labels)
	}
	want := fmt.Sprintf("pod %q labels %v", "d-new", map[string]string{"app": "new", "version": "v1", corev1.LabelTopologyZone: "z1",
		corev1.LabelHostname: node, "topology.istio.io/cluster": model.DefaultClusterID})
	testenv.Eventually(t, "the endpoint described by d-new", func() (bool, string) {
		ok, got := podOf()
		return ok && got == want, got
	})
	settledEvents(t, rec, ns)

	p, err := env.Client.CoreV1().Pods(ns).Get(ctx(t), "d-new", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels["version"] = "v2"
	if _, err := env.Client.CoreV1().Pods(ns).Update(ctx(t), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf("pod %q labels %v", "d-new", map[string]string{"app": "new", "version": "v2", corev1.LabelTopologyZone: "z1",
		corev1.LabelHostname: node, "topology.istio.io/cluster": model.DefaultClusterID})
	testenv.Eventually(t, "the endpoint relabelled", func() (bool, string) {
		ok, got := podOf()
		return ok && got == want, got
	})
	waitEvents(t, rec, ns, model.Event{Kind: model.EndpointsChanged, Hostname: host, Namespace: ns})

	// Once d-new is deleting too, no Pod of the namespace holds the IP.
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx(t), "d-new", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(3600))}); err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf("pod %q labels %v", "", map[string]string{"topology.istio.io/cluster": model.DefaultClusterID})
	testenv.Eventually(t, "the endpoint without a pod", func() (bool, string) {
		ok, got := podOf()
		return ok && got == want, got
	})
	waitEvents(t, rec, ns, model.Event{Kind: model.EndpointsChanged, Hostname: host, Namespace: ns})
}

// TestClusterIDOnEndpoints: a registry of a named cluster (a remote one)
// writes its ID on every endpoint, so that the merged model knows where
// each endpoint is; the local registry (no ID) leaves it empty.
func TestClusterIDOnEndpoints(t *testing.T) {
	for _, id := range []string{"", "cluster-b"} {
		t.Run("id="+id, func(t *testing.T) {
			ns := env.Namespace(t, nil)
			c, _ := startController(t, Options{Namespaces: []string{ns}, ClusterID: id})
			host := model.ServiceHostname("api", ns, model.DefaultDomainSuffix)
			mustCreateService(t, ns, "api", grpcPort)
			mustCreateSlice(t, slice(ns, "api-abc", "api", 9090, "grpc-api", sliceEndpoint{ip: "192.0.2.1"}))
			waitEndpoints(t, c, host, 8080, "192.0.2.1:9090 HEALTHY ")
			eps := c.Endpoints(host, 8080, nil)
			if len(eps) != 1 || eps[0].ClusterID != id {
				t.Fatalf("endpoints %+v, want one of cluster %q", eps, id)
			}
		})
	}
}

// TestAddressMovesBetweenPodAndSlice: an endpoint without a targetRef
// follows the addresses of Pods and slices as they change: a Pod that
// takes the endpoint's IP describes it, and so it does again once the
// slice and then the Pod move to another IP.
func TestAddressMovesBetweenPodAndSlice(t *testing.T) {
	ns := env.Namespace(t, nil)
	c, _ := startController(t, Options{Namespaces: []string{ns}})
	host := model.ServiceHostname("moving", ns, model.DefaultDomainSuffix)
	mustCreateService(t, ns, "moving", grpcPort)
	mustCreatePod(t, ns, "p", "192.0.2.121", "", map[string]string{"app": "p"})
	mustCreateSlice(t, slice(ns, "moving-1", "moving", 9090, "grpc-api", sliceEndpoint{ip: "192.0.2.120"}))
	endpointOf := func(want string) {
		t.Helper()
		testenv.Eventually(t, "endpoint "+want, func() (bool, string) {
			eps := c.Endpoints(host, 8080, nil)
			got := fmt.Sprintf("%d endpoints", len(eps))
			if len(eps) == 1 {
				got = fmt.Sprintf("%s pod %q", eps[0].Address, eps[0].PodName)
			}
			return got == want, got
		})
	}
	moveTo := func(ip string) {
		t.Helper()
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx(t), "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(ctx(t), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	endpointOf(`192.0.2.120 pod ""`)
	moveTo("192.0.2.120")
	endpointOf(`192.0.2.120 pod "p"`)
	env.ApplyEndpointSlice(t, slice(ns, "moving-1", "moving", 9090, "grpc-api", sliceEndpoint{ip: "192.0.2.122"}))
	endpointOf(`192.0.2.122 pod ""`)
	moveTo("192.0.2.122")
	endpointOf(`192.0.2.122 pod "p"`)
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx(t), "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	endpointOf(`192.0.2.122 pod ""`)
}
