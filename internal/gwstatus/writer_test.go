package gwstatus

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// The election's timings in tests: short, so that a takeover after a
// lost renewal fits in a test, and with room for a slow API server.
const (
	testLease = 3 * time.Second
	testRenew = 2 * time.Second
	testRetry = 200 * time.Millisecond
)

// calls counts one replica's requests to the API server by what they
// are: a route's status written, a route read.
type calls struct{ statusWrites, routeReads atomic.Int64 }

func counted(cfg *rest.Config) (*rest.Config, *calls) {
	c := &calls{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			route := strings.Contains(r.URL.Path, "routes")
			switch {
			case route && r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/status"):
				c.statusWrites.Add(1)
			case route && r.Method == http.MethodGet:
				c.routeReads.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	return cfg, c
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// replica is one KubeWriter running in the test, as a meshpilot replica
// runs it.
type replica struct {
	w     *KubeWriter
	calls *calls
	stop  func() // ends Run and waits for it (the Lease released)
}

func startReplica(t *testing.T, ns, identity string) *replica {
	t.Helper()
	return startReplicaWith(t, Options{Namespace: ns, Identity: identity, LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry})
}

// startReplicaWith starts a replica with opts, whose Config and Client
// it sets.
func startReplicaWith(t *testing.T, opts Options) *replica {
	t.Helper()
	cfg, c := counted(env.Config)
	api, err := kubeapi.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts.Config, opts.Client = cfg, api
	w, err := NewKubeWriter(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return &replica{w: w, calls: c, stop: stop}
}

func httpRoutes(t *testing.T, ns string) *kubeapi.Resource[*gatewayv1.HTTPRoute, *gatewayv1.HTTPRouteList] {
	t.Helper()
	g, err := kubeapi.NewGroup(env.Config, kubeapi.GroupOptions{GroupVersion: gatewayv1.SchemeGroupVersion, AddToScheme: gatewayv1.AddToScheme})
	if err != nil {
		t.Fatal(err)
	}
	return kubeapi.NewResource(g, "httproutes", ns,
		func() *gatewayv1.HTTPRoute { return &gatewayv1.HTTPRoute{} },
		func() *gatewayv1.HTTPRouteList { return &gatewayv1.HTTPRouteList{} })
}

func serviceRef(name string) gatewayv1.ParentReference {
	return gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")), Name: gatewayv1.ObjectName(name)}
}

// createRoute creates an HTTPRoute attached to the Services parents,
// sending to the first.
func createRoute(t *testing.T, ns, name string, parents ...string) *gatewayv1.HTTPRoute {
	t.Helper()
	r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	for _, p := range parents {
		r.Spec.ParentRefs = append(r.Spec.ParentRefs, serviceRef(p))
	}
	r.Spec.Rules = []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(parents[0]), Port: ptr.To(gatewayv1.PortNumber(8080))},
	}}}}}
	got, err := httpRoutes(t, ns).Create(context.Background(), r, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func getRoute(t *testing.T, ns, name string) *gatewayv1.HTTPRoute {
	t.Helper()
	r, err := httpRoutes(t, ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// desired is the status the routes' conversion would hand the writer
// for a route whose backend is found (resolved) or not.
func desired(r *gatewayv1.HTTPRoute, resolved bool) RouteStatus {
	s := RouteStatus{Kind: KindHTTPRoute, Namespace: r.Namespace, Name: r.Name, Generation: r.Generation}
	rr := metav1.Condition{Type: string(gatewayv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue,
		Reason: string(gatewayv1.RouteReasonResolvedRefs), Message: "every backend is found"}
	if !resolved {
		rr.Status, rr.Reason, rr.Message = metav1.ConditionFalse, string(gatewayv1.RouteReasonBackendNotFound), "no Service "+r.Namespace+"/missing"
	}
	for _, p := range r.Spec.ParentRefs {
		s.Parents = append(s.Parents, ParentStatus{ParentRef: p, Conditions: []metav1.Condition{
			{Type: string(gatewayv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: string(gatewayv1.RouteReasonAccepted), Message: "attached to the Service"},
			rr,
		}})
	}
	return s
}

// ourEntries returns the route's status entries of meshpilot's.
func ourEntries(r *gatewayv1.HTTPRoute) []gatewayv1.RouteParentStatus {
	var out []gatewayv1.RouteParentStatus
	for _, p := range r.Status.Parents {
		if p.ControllerName == DefaultControllerName {
			out = append(out, p)
		}
	}
	return out
}

// awaitOurs waits until the route's entries of ours say what want says,
// with the route's generation observed, and returns the route.
func awaitOurs(t *testing.T, want RouteStatus) *gatewayv1.HTTPRoute {
	t.Helper()
	var r *gatewayv1.HTTPRoute
	testenv.Eventually(t, "the status of "+want.Name, func() (bool, string) {
		r = getRoute(t, want.Namespace, want.Name)
		got := ourEntries(r)
		if len(got) != len(want.Parents) {
			return false, fmt.Sprintf("%d entries of ours, want %d: %+v", len(got), len(want.Parents), r.Status.Parents)
		}
		for i, p := range got {
			w := want.Parents[i]
			if !sameParent(p.ParentRef, w.ParentRef, want.Namespace) || len(p.Conditions) != len(w.Conditions) {
				return false, fmt.Sprintf("entry %d: %+v, want %+v", i, p, w)
			}
			for j, c := range p.Conditions {
				wc := w.Conditions[j]
				if c.Type != wc.Type || c.Status != wc.Status || c.Reason != wc.Reason || c.Message != wc.Message ||
					c.ObservedGeneration != r.Generation || c.LastTransitionTime.IsZero() {
					return false, fmt.Sprintf("entry %d condition %d: %+v, want %+v at generation %d", i, j, c, wc, r.Generation)
				}
			}
		}
		return true, ""
	})
	return r
}

func awaitLeader(t *testing.T, rs ...*replica) *replica {
	t.Helper()
	var leader *replica
	testenv.Eventually(t, "a leader", func() (bool, string) {
		n := 0
		for _, r := range rs {
			if r.w.Leading() {
				leader = r
				n++
			}
		}
		return n == 1, fmt.Sprintf("%d replicas lead", n)
	})
	return leader
}

// settled waits until the replica has made more than reads reads of
// routes, and a little more (its sync done), so that what it did not
// write can be asserted.
func settled(t *testing.T, r *replica, reads int64) {
	t.Helper()
	testenv.Eventually(t, "the replica's read of the route", func() (bool, string) {
		return r.calls.routeReads.Load() > reads, "no read yet"
	})
	time.Sleep(2 * testRetry)
}

func TestWriterWritesOurEntriesAndLeavesOthers(t *testing.T) {
	env.InstallGatewayAPICRDs(t, "standard")
	ns := env.Namespace(t, nil)
	route := createRoute(t, ns, "echo", "echo", "other")

	// Another implementation's entry for the same route, written first.
	other := gatewayv1.RouteParentStatus{ParentRef: serviceRef("echo"), ControllerName: "example.com/mesh",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "NotAllowedByParent",
			LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), ObservedGeneration: route.Generation}}}
	route.Status.Parents = []gatewayv1.RouteParentStatus{other}
	route, err := httpRoutes(t, ns).UpdateStatus(context.Background(), route, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	a := startReplica(t, ns, "a")
	want := desired(route, false)
	a.w.Set(want)
	awaitLeader(t, a)
	got := awaitOurs(t, want)
	if !apiequality.Semantic.DeepEqual(got.Status.Parents[0], other) {
		t.Errorf("the other controller's entry changed:\n%+v\nwas:\n%+v", got.Status.Parents[0], other)
	}
	if got.Generation != route.Generation {
		t.Errorf("writing the status moved metadata.generation from %d to %d: registries filtering on it would see a change", route.Generation, got.Generation)
	}
	writes := a.calls.statusWrites.Load()
	if writes != 1 {
		t.Errorf("%d status writes for one change, want 1", writes)
	}

	t.Run("the same status again writes nothing", func(t *testing.T) {
		a.w.Set(desired(route, false))
		time.Sleep(2 * testRetry)
		if n := a.calls.statusWrites.Load(); n != writes {
			t.Errorf("%d status writes after the same status was set again, want %d", n, writes)
		}
		if now := getRoute(t, ns, "echo"); now.ResourceVersion != got.ResourceVersion {
			t.Errorf("resourceVersion %s, was %s", now.ResourceVersion, got.ResourceVersion)
		}
	})

	t.Run("a resolved backend changes one condition, whose transition time alone moves", func(t *testing.T) {
		fixed := desired(route, true)
		a.w.Set(fixed)
		now := awaitOurs(t, fixed)
		for i, p := range ourEntries(now) {
			before := ourEntries(got)[i]
			if !p.Conditions[0].LastTransitionTime.Equal(&before.Conditions[0].LastTransitionTime) {
				t.Errorf("entry %d: Accepted stayed True but its lastTransitionTime moved from %v to %v", i, before.Conditions[0].LastTransitionTime, p.Conditions[0].LastTransitionTime)
			}
		}
		got = now
	})

	t.Run("a parent removed from the route loses its entry, the other controller's stays", func(t *testing.T) {
		cur := getRoute(t, ns, "echo")
		cur.Spec.ParentRefs = cur.Spec.ParentRefs[:1]
		cur, err := httpRoutes(t, ns).Update(context.Background(), cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		one := desired(cur, true)
		a.w.Set(one)
		now := awaitOurs(t, one)
		if len(now.Status.Parents) != 2 || now.Status.Parents[0].ControllerName != other.ControllerName {
			t.Errorf("status.parents %+v, want the other controller's entry then ours for echo", now.Status.Parents)
		}
	})

	t.Run("a status computed from an older generation is not written", func(t *testing.T) {
		before := getRoute(t, ns, "echo")
		stale := desired(before, false)
		stale.Generation--
		reads := a.calls.routeReads.Load()
		a.w.Set(stale)
		settled(t, a, reads)
		if now := getRoute(t, ns, "echo"); now.ResourceVersion != before.ResourceVersion {
			t.Errorf("a status of generation %d was written over generation %d's: %+v", stale.Generation, before.Generation, now.Status.Parents)
		}
	})

	t.Run("a deleted route's entries of ours go, the other controller's stay", func(t *testing.T) {
		a.w.Delete(KindHTTPRoute, ns, "echo")
		testenv.Eventually(t, "our entries removed", func() (bool, string) {
			r := getRoute(t, ns, "echo")
			return len(ourEntries(r)) == 0 && len(r.Status.Parents) == 1, fmt.Sprintf("%+v", r.Status.Parents)
		})
	})
}

// TestOnlyTheLeaderWritesAndATakeoverDoesNotFlap: two replicas with the
// same desired status and one Lease. The leader alone writes; when it
// stops, the other leads, checks the route and writes nothing, since what
// the route holds is already what it would write.
func TestOnlyTheLeaderWritesAndATakeoverDoesNotFlap(t *testing.T) {
	env.InstallGatewayAPICRDs(t, "standard")
	ns := env.Namespace(t, nil)
	route := createRoute(t, ns, "echo", "echo")
	a, b := startReplica(t, ns, "a"), startReplica(t, ns, "b")
	want := desired(route, false)
	a.w.Set(want)
	b.w.Set(want)
	leader := awaitLeader(t, a, b)
	follower := b
	if leader == b {
		follower = a
	}
	written := awaitOurs(t, want)
	if n := follower.calls.statusWrites.Load(); n != 0 {
		t.Errorf("the follower wrote %d statuses", n)
	}

	reads := follower.calls.routeReads.Load()
	stopped := time.Now()
	leader.stop()
	if leader.w.Leading() {
		t.Fatal("a stopped replica still leads")
	}
	if got := awaitLeader(t, follower); got != follower {
		t.Fatal("the other replica did not take over")
	}
	// The stopped leader released the Lease: no wait for it to expire.
	if took := time.Since(stopped); took >= testLease {
		t.Errorf("the takeover took %v, as long as the Lease's expiry (%v): the Lease was not released", took, testLease)
	}
	settled(t, follower, reads)
	now := getRoute(t, ns, "echo")
	if now.ResourceVersion != written.ResourceVersion {
		t.Errorf("the new leader rewrote an unchanged status (resourceVersion %s, was %s):\n%+v\nwas:\n%+v",
			now.ResourceVersion, written.ResourceVersion, now.Status.Parents, written.Status.Parents)
	}
	if n := follower.calls.statusWrites.Load(); n != 0 {
		t.Errorf("the new leader made %d status writes for an unchanged status", n)
	}

	// A change of the route reaches the status through the new leader;
	// conditions whose status held keep their transition time.
	now.Spec.Rules[0].BackendRefs[0].Port = ptr.To(gatewayv1.PortNumber(9090))
	now, err := httpRoutes(t, ns).Update(context.Background(), now, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := desired(now, false)
	follower.w.Set(next)
	after := awaitOurs(t, next)
	for i, c := range ourEntries(after)[0].Conditions {
		if was := ourEntries(written)[0].Conditions[i]; !c.LastTransitionTime.Equal(&was.LastTransitionTime) {
			t.Errorf("%s stayed %s across the takeover but its lastTransitionTime moved from %v to %v", c.Type, c.Status, was.LastTransitionTime, c.LastTransitionTime)
		}
	}
}

// TestALeaderWhoseLeaseIsTakenStopsWriting: a leader that finds another
// holder on the Lease stops writing at its next renewal, well before its
// renew deadline (long here, to tell the two apart).
func TestALeaderWhoseLeaseIsTakenStopsWriting(t *testing.T) {
	env.InstallGatewayAPICRDs(t, "standard")
	ns := env.Namespace(t, nil)
	route := createRoute(t, ns, "echo", "echo")
	const renewDeadline = 15 * time.Second
	a := startReplicaWith(t, Options{Namespace: ns, Identity: "a", LeaseDuration: 20 * time.Second, RenewDeadline: renewDeadline, RetryPeriod: testRetry})
	a.w.Set(desired(route, false))
	awaitLeader(t, a)
	written := awaitOurs(t, desired(route, false))

	leases := env.API.Leases(ns)
	l, err := leases.Get(context.Background(), DefaultLeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Labels[LeaseComponentLabel] != LeaseComponentValue || l.Labels[LeaseNameLabel] != LeaseNameValue {
		t.Errorf("the Lease's labels %v lack the ones deploy/'s admission policy admits", l.Labels)
	}
	thief, long := "someone-else", int32(3600)
	taken := &coordinationv1.Lease{ObjectMeta: l.ObjectMeta, Spec: coordinationv1.LeaseSpec{HolderIdentity: &thief, LeaseDurationSeconds: &long,
		RenewTime: ptr.To(metav1.NowMicro())}}
	if _, err := leases.Update(context.Background(), taken, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	taking := time.Now()
	testenv.Eventually(t, "the leader to stop", func() (bool, string) { return !a.w.Leading(), "still leading" })
	if took := time.Since(taking); took > renewDeadline/3 {
		t.Errorf("the leader went on writing for %v after the Lease was taken, as if it waited for its renew deadline (%v)", took, renewDeadline)
	}
	a.w.Set(desired(route, true))
	time.Sleep(3 * testRetry)
	if now := getRoute(t, ns, "echo"); now.ResourceVersion != written.ResourceVersion {
		t.Errorf("a replica that lost the Lease wrote the status: %+v", now.Status.Parents)
	}
}

// TestDeleteRemovesEntriesLeftFromBefore: a route meshpilot has no
// status for, whose entry of ours was written before (its Service parent
// removed while no replica led), loses that entry on Delete, and the
// writer keeps nothing of it, nor of a route that does not exist.
func TestDeleteRemovesEntriesLeftFromBefore(t *testing.T) {
	env.InstallGatewayAPICRDs(t, "standard")
	ns := env.Namespace(t, nil)
	route := createRoute(t, ns, "echo", "echo")
	left := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	route.Status.Parents = []gatewayv1.RouteParentStatus{
		{ParentRef: serviceRef("removed"), ControllerName: DefaultControllerName, Conditions: []metav1.Condition{{Type: "Accepted",
			Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.NewTime(left), ObservedGeneration: 1}}},
		{ParentRef: serviceRef("echo"), ControllerName: "example.com/mesh", Conditions: []metav1.Condition{{Type: "Accepted",
			Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.NewTime(left), ObservedGeneration: 1}}},
	}
	if _, err := httpRoutes(t, ns).UpdateStatus(context.Background(), route, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, ns, "a")
	a.w.Delete(KindHTTPRoute, ns, "echo")
	a.w.Delete(KindHTTPRoute, ns, "never-created")
	a.w.Delete(KindGRPCRoute, ns, "echo") // no such GRPCRoute
	awaitLeader(t, a)
	testenv.Eventually(t, "our entry removed and the writer's record of the Deletes cleared", func() (bool, string) {
		r := getRoute(t, ns, "echo")
		a.w.mu.Lock()
		pending := len(a.w.gone)
		a.w.mu.Unlock()
		return len(r.Status.Parents) == 1 && r.Status.Parents[0].ControllerName == "example.com/mesh" && pending == 0,
			fmt.Sprintf("status %+v, %d Deletes pending", r.Status.Parents, pending)
	})
}
