package crd

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	networkingclient "istio.io/client-go/pkg/clientset/versioned/typed/networking/v1"
	securityclient "istio.io/client-go/pkg/clientset/versioned/typed/security/v1"

	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// ownAPIServer starts an API server for one test and stops it when the
// test ends. TestLateInstall needs one without Istio's CRDs every time it
// runs (-count, a rerun), and CRDs cannot be uninstalled and reinstalled
// quickly: so the package has no shared server.
func ownAPIServer(t *testing.T) *testenv.Env {
	t.Helper()
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	return env
}

// notAvailable is the start of the line logged once without the CRDs.
const notAvailable = "Istio configuration is not available"

// events keeps the change events a registry emits; those of sync points'
// objects (syncPrefix) are kept apart, in synced.
type events struct {
	mu     sync.Mutex // guards got and synced
	got    []Event
	synced map[Event]bool
}

// syncPrefix starts the names of the objects sync points write.
const syncPrefix = "sync-"

func (e *events) add(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if strings.HasPrefix(ev.Name, syncPrefix) {
		if e.synced == nil {
			e.synced = map[Event]bool{}
		}
		e.synced[ev] = true
		return
	}
	e.got = append(e.got, ev)
}

func (e *events) hasSynced(ev Event) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.synced[ev]
}

// take returns and forgets the events recorded so far for a namespace.
func (e *events) take(ns string) []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out, rest []Event
	for _, ev := range e.got {
		if ev.Namespace == ns {
			out = append(out, ev)
		} else {
			rest = append(rest, ev)
		}
	}
	e.got = rest
	return out
}

// syncer writes sync points: one new object of each kind in ns, a
// namespace every registry of the test watches. A registry's events come
// in the order of its informers' events, one informer per kind (and
// namespace), through one work queue with one worker: so once a registry
// has emitted the events of a sync point's objects, it has emitted every
// event it owes for what was written before them, of every kind. That is
// how a test knows that nothing else follows, with no quiet period whose
// length a busy machine can outlast.
type syncer struct {
	net networkingclient.NetworkingV1Interface
	sec securityclient.SecurityV1Interface
	gw  gatewayclient.Interface
	ns  string
	n   int
}

// point writes a sync point and waits until rec has its events.
func (s *syncer) point(t *testing.T, rec *events) {
	t.Helper()
	s.n++
	name := fmt.Sprintf("%s%d", syncPrefix, s.n)
	dr, vs, se, we := objects(s.ns, name)
	ctx := t.Context()
	if _, err := s.net.DestinationRules(s.ns).Create(ctx, dr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.net.VirtualServices(s.ns).Create(ctx, vs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.net.ServiceEntries(s.ns).Create(ctx, se, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.net.WorkloadEntries(s.ns).Create(ctx, we, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createSecurityObjects(t, s.sec, s.ns, name)
	createGatewayObjects(t, s.gw, s.ns, name)
	testenv.Eventually(t, "the events of sync point "+name, func() (bool, string) {
		for _, k := range kinds {
			if ev := (Event{Kind: k.kind, Namespace: s.ns, Name: name}); !rec.hasSynced(ev) {
				return false, "no " + ev.String()
			}
		}
		return true, ""
	})
}

// waitEvents waits for the wanted events of ns, in any order, then for a
// sync point, and checks that the events of ns before it are exactly the
// wanted ones: a late duplicate, or an event for a write that should have
// caused none, comes before the sync point's.
func waitEvents(t *testing.T, s *syncer, rec *events, ns string, want ...Event) {
	t.Helper()
	var got []Event
	testenv.Eventually(t, fmt.Sprintf("events %v", want), func() (bool, string) {
		got = append(got, rec.take(ns)...)
		return len(got) >= len(want), fmt.Sprintf("got %v", got)
	})
	s.point(t, rec)
	got = append(got, rec.take(ns)...)
	cmpEvent := func(a, b Event) int { return strings.Compare(a.String(), b.String()) }
	slices.SortFunc(got, cmpEvent)
	want = slices.Clone(want)
	slices.SortFunc(want, cmpEvent)
	if !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

func startRegistry(t *testing.T, env *testenv.Env, opts Options) (*Registry, *events) {
	t.Helper()
	r, err := NewForConfig(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	rec := &events{}
	r.AppendEventHandler(rec.add)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return r, rec
}

// objects are one object of each kind in a namespace, named name.
func objects(ns, name string) (*networkingv1.DestinationRule, *networkingv1.VirtualService, *networkingv1.ServiceEntry, *networkingv1.WorkloadEntry) {
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	return &networkingv1.DestinationRule{ObjectMeta: meta, Spec: apinetworking.DestinationRule{
			Host:    "reviews",
			Subsets: []*apinetworking.Subset{{Name: "v1", Labels: map[string]string{"version": "v1"}}},
		}},
		&networkingv1.VirtualService{ObjectMeta: meta, Spec: apinetworking.VirtualService{
			Hosts: []string{"reviews"},
			Http: []*apinetworking.HTTPRoute{{Route: []*apinetworking.HTTPRouteDestination{
				{Destination: &apinetworking.Destination{Host: "reviews", Subset: "v1"}},
			}}},
		}},
		&networkingv1.ServiceEntry{ObjectMeta: meta, Spec: apinetworking.ServiceEntry{
			Hosts:      []string{name + ".example.com"},
			Ports:      []*apinetworking.ServicePort{{Number: 443, Name: "https", Protocol: "TLS"}},
			Resolution: apinetworking.ServiceEntry_DNS,
		}},
		&networkingv1.WorkloadEntry{ObjectMeta: meta, Spec: apinetworking.WorkloadEntry{
			Address: "192.0.2.10",
			Labels:  map[string]string{"app": "reviews"},
		}}
}

// TestLateInstall starts registries on an API server without Istio's CRDs,
// installs them while they run, and follows objects of each kind through
// the reads and the events; a registry limited to one namespace sees only
// that namespace.
func TestLateInstall(t *testing.T) {
	env := ownAPIServer(t)
	ctx := t.Context()
	logs := testutil.NewLines()
	all, allEvents := startRegistry(t, env, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	nsA, nsB := env.Namespace(t, nil), env.Namespace(t, nil)
	scoped, scopedEvents := startRegistry(t, env, Options{Namespaces: []string{nsA}, Logger: slog.New(slog.DiscardHandler)})

	// Without the CRDs: synced at once, nothing watched, one log line.
	testenv.Eventually(t, "synced without the CRDs", func() (bool, string) { return all.HasSynced() && scoped.HasSynced(), "" })
	logs.Await(t, notAvailable, 0, func(l string) bool { return strings.Contains(l, notAvailable) })
	for _, k := range kinds {
		if all.Watching(k.kind) {
			t.Fatalf("%s watched before its CRD exists", k.kind)
		}
	}
	if got := all.DestinationRules(); len(got) != 0 {
		t.Fatalf("DestinationRules() = %v without the CRD", got)
	}

	env.InstallIstioCRDs(t)
	env.InstallGatewayAPICRDs(t, "standard")
	testenv.Eventually(t, "every kind watched and synced", func() (bool, string) {
		for _, r := range []*Registry{all, scoped} {
			for _, k := range kinds {
				if !r.Watching(k.kind) {
					return false, string(k.kind) + " not watched"
				}
			}
			if !r.HasSynced() {
				return false, "not synced"
			}
		}
		return true, ""
	})

	istio, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	net := istio.NetworkingV1()
	// Both registries watch nsA.
	sp := &syncer{net: net, sec: istio.SecurityV1(), gw: gatewayClient(t, env), ns: nsA}
	create := func(ns string) {
		t.Helper()
		dr, vs, se, we := objects(ns, "reviews")
		if _, err := net.DestinationRules(ns).Create(ctx, dr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := net.VirtualServices(ns).Create(ctx, vs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := net.ServiceEntries(ns).Create(ctx, se, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := net.WorkloadEntries(ns).Create(ctx, we, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createSecurityObjects(t, istio.SecurityV1(), ns, "reviews")
		createGatewayObjects(t, sp.gw, ns, "reviews")
	}
	eventsOf := func(ns string) []Event {
		var out []Event
		for _, k := range kinds {
			out = append(out, Event{Kind: k.kind, Namespace: ns, Name: "reviews"})
		}
		return out
	}
	create(nsA)
	create(nsB)
	waitEvents(t, sp, allEvents, nsA, eventsOf(nsA)...)
	waitEvents(t, sp, allEvents, nsB, eventsOf(nsB)...)
	waitEvents(t, sp, scopedEvents, nsA, eventsOf(nsA)...)
	waitEvents(t, sp, scopedEvents, nsB)

	dr := all.DestinationRule(nsA, "reviews")
	if dr == nil || dr.Spec.GetHost() != "reviews" || len(dr.Spec.GetSubsets()) != 1 {
		t.Fatalf("DestinationRule(%s, reviews) = %v", nsA, dr)
	}
	if dr.ManagedFields != nil {
		t.Fatal("managedFields kept in the cache")
	}
	if vs := all.VirtualService(nsA, "reviews"); vs == nil || vs.Spec.GetHttp()[0].GetRoute()[0].GetDestination().GetSubset() != "v1" {
		t.Fatalf("VirtualService(%s, reviews) = %v", nsA, vs)
	}
	if se := all.ServiceEntry(nsA, "reviews"); se == nil || se.Spec.GetResolution() != apinetworking.ServiceEntry_DNS {
		t.Fatalf("ServiceEntry(%s, reviews) = %v", nsA, se)
	}
	if we := all.WorkloadEntry(nsA, "reviews"); we == nil || we.Spec.GetAddress() != "192.0.2.10" {
		t.Fatalf("WorkloadEntry(%s, reviews) = %v", nsA, we)
	}
	names := func(objs []metav1.Object) []string {
		var out []string
		for _, o := range objs {
			if (o.GetNamespace() == nsA || o.GetNamespace() == nsB) && o.GetName() == "reviews" {
				out = append(out, o.GetNamespace())
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		all  []metav1.Object
		want []string
	}{
		{"DestinationRules", asObjects(all.DestinationRules()), []string{nsA, nsB}},
		{"VirtualServices", asObjects(all.VirtualServices()), []string{nsA, nsB}},
		{"ServiceEntries", asObjects(all.ServiceEntries()), []string{nsA, nsB}},
		{"WorkloadEntries", asObjects(all.WorkloadEntries()), []string{nsA, nsB}},
		{"scoped DestinationRules", asObjects(scoped.DestinationRules()), []string{nsA}},
		{"scoped WorkloadEntries", asObjects(scoped.WorkloadEntries()), []string{nsA}},
	} {
		if got := names(tc.all); !slices.Equal(got, tc.want) {
			t.Errorf("%s: namespaces %v, want %v", tc.name, got, tc.want)
		}
	}
	if scoped.DestinationRule(nsB, "reviews") != nil {
		t.Error("a namespace-scoped registry returned an object of another namespace")
	}

	// A status write (istiod's, in a cluster that runs it) changes the
	// resourceVersion alone: no event.
	se := all.ServiceEntry(nsA, "reviews").DeepCopy()
	se.Status.ObservedGeneration = se.Generation
	if _, err := net.ServiceEntries(nsA).UpdateStatus(ctx, se, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A spec change: one event.
	vs := all.VirtualService(nsA, "reviews").DeepCopy()
	vs.Spec.Hosts = append(vs.Spec.Hosts, "ratings")
	if _, err := net.VirtualServices(nsA).Update(ctx, vs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, sp, allEvents, nsA, Event{VirtualService, nsA, "reviews"})
	if got := all.VirtualService(nsA, "reviews").Spec.GetHosts(); !slices.Equal(got, []string{"reviews", "ratings"}) {
		t.Fatalf("VirtualService hosts after the update = %v", got)
	}

	// Deletes: one event each, and the reads say nil.
	if err := net.DestinationRules(nsA).Delete(ctx, "reviews", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := net.WorkloadEntries(nsA).Delete(ctx, "reviews", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, sp, allEvents, nsA, Event{DestinationRule, nsA, "reviews"}, Event{WorkloadEntry, nsA, "reviews"})
	waitEvents(t, sp, scopedEvents, nsA, Event{DestinationRule, nsA, "reviews"}, Event{WorkloadEntry, nsA, "reviews"}, Event{VirtualService, nsA, "reviews"})
	if all.DestinationRule(nsA, "reviews") != nil || all.WorkloadEntry(nsA, "reviews") != nil {
		t.Fatal("deleted objects still read")
	}

	if n := strings.Count(logs.String(), notAvailable); n != 1 {
		t.Fatalf("%q logged %d times, want once:\n%s", notAvailable, n, logs.String())
	}
}

func asObjects[T metav1.Object](in []T) []metav1.Object {
	out := make([]metav1.Object, len(in))
	for i, o := range in {
		out[i] = o
	}
	return out
}
