package xds

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// cachedCount counts what the cache still has of a resource (every
// variant); the garbage collector runs first, so that what nobody holds
// is gone.
func cachedCount(t testing.TB, s *Server, typeURL, name string) int {
	t.Helper()
	typ, ok := s.typeOf(typeURL)
	if !ok {
		t.Fatalf("type %s is not served", typeURL)
	}
	runtime.GC()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cache.held(typ, name)
}

// awaitUncached waits until the cache has nothing of the named resources
// of a type. Entries go once the garbage collector frees them and its
// cleanups run, so this polls.
func awaitUncached(t testing.TB, s *Server, typeURL string, names ...string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		left := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return cachedCount(t, s, typeURL, n) == 0 })
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still cached: %v", typeURL, left)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// assertCached: something holds the resources, so a collection leaves
// them cached.
func assertCached(t testing.TB, s *Server, typeURL string, names ...string) {
	t.Helper()
	for _, n := range names {
		if cachedCount(t, s, typeURL, n) == 0 {
			t.Fatalf("%s %s is not cached while a client holds it", typeURL, n)
		}
	}
}

// TestCacheHoldsWhatClientsHold: a resource stays cached while a client
// holds it and goes when the last one closes its stream or unsubscribes;
// a push still reaches the client that waits on it, and a new client
// gets the same bytes, marshalled again once.
func TestCacheHoldsWhatClientsHold(t *testing.T) {
	ts := startServer(t, baseStore())
	cc := dial(t, ts.addr)
	a, b := openADS(t, cc, grpcNode("a", "default")), openADS(t, cc, grpcNode("b", "default"))
	var first []byte // reviews' ClusterLoadAssignment as first sent
	for _, cl := range []*xdstest.TestClient{a, b} {
		cl.Subscribe(resource.ClusterType, reviews)
		cl.ACK(cl.Next())
		cl.Subscribe(resource.EndpointType, reviews, ratings)
		r := cl.Next()
		cl.ACK(r)
		first = rawOf(t, r, reviews)
	}
	if got := ts.Stats().Marshals; got != 3 {
		t.Fatalf("%d marshals for one cluster and two assignments, want 3", got)
	}

	a.Close()
	assertCached(t, ts.Server, resource.ClusterType, reviews)
	assertCached(t, ts.Server, resource.EndpointType, reviews, ratings)

	// b lets go of ratings: it goes, reviews stays.
	b.SetSubscription(resource.EndpointType, reviews)
	awaitUncached(t, ts.Server, resource.EndpointType, ratings)
	assertCached(t, ts.Server, resource.EndpointType, reviews)

	// b waits on reviews' endpoints and is sent their change.
	ts.store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.1", "10.0.0.3"))
	r := b.Next()
	if got := claAddrs(t, r); r.TypeURL != resource.EndpointType || !slices.Equal(got[reviews], []string{"10.0.0.1", "10.0.0.3"}) || len(got) != 1 {
		t.Fatalf("b got %s %v", r.TypeURL, got)
	}
	b.ACK(r)
	changed := rawOf(t, r, reviews)

	b.Close()
	awaitUncached(t, ts.Server, resource.ClusterType, reviews)
	awaitUncached(t, ts.Server, resource.EndpointType, reviews, ratings)
	if s := ts.Stats(); s.Resources != 0 {
		t.Fatalf("stats after every client left: %+v", s)
	}

	// A new client is sent what b held, byte for byte.
	marshals := ts.Stats().Marshals
	c := openADS(t, cc, grpcNode("c", "default"))
	c.Subscribe(resource.EndpointType, reviews)
	if got := rawOf(t, c.Next(), reviews); !slices.Equal(got, changed) || slices.Equal(got, first) {
		t.Fatalf("a new client got other bytes than the last client held")
	}
	if got := ts.Stats().Marshals; got != marshals+1 {
		t.Fatalf("%d marshals, want %d + 1", got, marshals)
	}
}

// rawOf returns the bytes of the named resource of r.
func rawOf(t testing.TB, r *xdstest.Response, name string) []byte {
	t.Helper()
	for _, res := range r.Resources {
		if res.Name == name {
			return res.Raw.GetValue()
		}
	}
	t.Fatalf("%s not in the response (%s)", name, r.TypeURL)
	return nil
}

// TestDeltaReconnectSendsNothingAgain: a delta client that reconnects
// with the versions it holds, after the cache dropped them, is sent
// nothing of them: regenerated, they have the same version. A push then
// reaches exactly the clients subscribed to what changed.
func TestDeltaReconnectSendsNothingAgain(t *testing.T) {
	ts := startServer(t, baseStore())
	cc := dial(t, ts.addr)
	d := openDelta(t, cc, envoyNode("d"))
	d.Subscribe(resource.EndpointType, reviews, ratings)
	r := d.Next()
	d.ACK(r)
	versions := map[string]string{}
	for _, res := range r.Resources {
		versions[res.Name] = res.Version
	}
	d.Close()
	awaitUncached(t, ts.Server, resource.EndpointType, reviews, ratings)

	d = openDelta(t, cc, envoyNode("d"))
	d.SendDelta(&discovery.DeltaDiscoveryRequest{
		TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{reviews, ratings}, InitialResourceVersions: versions,
	})
	other := openADS(t, cc, grpcNode("other", "default"))
	other.Subscribe(resource.EndpointType, ratings)
	other.ACK(other.Next())
	// Both assignments were regenerated (the second client's request
	// comes after d's), with the versions d holds: d is sent nothing
	// until ratings changes, and then ratings alone.
	awaitStreams(t, ts.Server, 2)
	ts.store.Update(service("ratings", "default", 7070), endpoints(7070, model.Healthy, "10.0.1.2"))
	r = d.Next()
	if got := claAddrs(t, r); len(r.Resources) != 1 || !slices.Equal(got[ratings], []string{"10.0.1.2"}) {
		t.Fatalf("d got %v, removed %v; want ratings alone", got, r.Removed)
	}
	d.ACK(r)
	r = other.Next()
	if !slices.Equal(claAddrs(t, r)[ratings], []string{"10.0.1.2"}) {
		t.Fatalf("other got %v", claAddrs(t, r))
	}
	other.ACK(r)
	// reviews changes: d is sent it; other, which does not hold it, is
	// not woken (its next response is the next change of ratings).
	ts.store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.7"))
	r = d.Next()
	if got := claAddrs(t, r); len(r.Resources) != 1 || !slices.Equal(got[reviews], []string{"10.0.0.7"}) {
		t.Fatalf("d got %v; want reviews alone", got)
	}
	if versions[reviews] == r.Resources[0].Version {
		t.Fatalf("reviews changed and kept its version %s", r.Resources[0].Version)
	}
	ts.store.Update(service("ratings", "default", 7070), endpoints(7070, model.Healthy, "10.0.1.3"))
	if r := other.Next(); !slices.Equal(claAddrs(t, r)[ratings], []string{"10.0.1.3"}) || len(r.Resources) != 1 {
		t.Fatalf("other got %v", claAddrs(t, r))
	}
}

func awaitStreams(t testing.TB, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for len(s.Clients()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("clients never as wanted: %+v", s.Clients())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNACKedNotHeld: what a client rejected is not held for it (it goes
// from the cache once nobody holds it), yet regenerated with the same
// bytes it is not resent until something else in the response changes;
// what the client ACKed before stays held and is what ConfigDump shows.
func TestNACKedNotHeld(t *testing.T) {
	ts := startServer(t, baseStore())
	a := openADS(t, dial(t, ts.addr), grpcNode("a", "default"))
	a.Subscribe(resource.EndpointType, reviews, ratings)
	r1 := a.Next()
	a.ACK(r1)
	acked := rawOf(t, r1, reviews)
	ts.store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.9"))
	r2 := a.Next()
	a.NACK(r2, "rejected")
	awaitClient(t, ts.Server, "NACK", func(c ClientInfo) bool { return c.Types["EDS"].Status == NACKed })
	awaitUncached(t, ts.Server, resource.EndpointType, reviews)

	dump := ts.ConfigDump("a")
	if len(dump) != 1 || len(dump[0].Resources["EDS"]) != 2 {
		t.Fatalf("dump %+v", dump)
	}
	var dumped []byte
	for _, res := range dump[0].Resources["EDS"] {
		if m, _ := res.UnmarshalNew(); resourceName(m) == reviews {
			dumped = res.GetValue()
		}
	}
	if !slices.Equal(dumped, acked) {
		t.Fatalf("ConfigDump shows other bytes than the ACKed reviews")
	}

	// ratings changes: the client holds what it ACKed, so it is sent
	// ratings and the reviews it rejected (which it does not hold): a
	// NACK goes back to the last ACKed state.
	ts.store.Update(service("ratings", "default", 7070), endpoints(7070, model.Healthy, "10.0.1.5"))
	r3 := a.Next()
	if got := claAddrs(t, r3); len(got) != 2 || !slices.Equal(got[ratings], []string{"10.0.1.5"}) || !slices.Equal(got[reviews], []string{"10.0.0.9"}) {
		t.Fatalf("after the NACK got %v, want ratings at 10.0.1.5 and reviews at 10.0.0.9", got)
	}
}

// TestWildcardAndRESTHoldNothingAfter: a wildcard subscription holds
// everything it was sent until its stream closes, of either kind; a REST
// request holds nothing once answered.
func TestWildcardAndRESTHoldNothingAfter(t *testing.T) {
	ts := startServer(t, baseStore())
	cc := dial(t, ts.addr)
	for _, open := range []func() *xdstest.TestClient{
		func() *xdstest.TestClient { return openADS(t, cc, envoyNode("sotw")) },
		func() *xdstest.TestClient { return openDelta(t, cc, envoyNode("delta")) },
	} {
		c := open()
		c.Subscribe(resource.ClusterType)
		r := c.Next()
		c.ACK(r)
		if got := sortedNames(r); !slices.Equal(got, []string{ratings, reviews}) {
			t.Fatalf("wildcard got %v", got)
		}
		assertCached(t, ts.Server, resource.ClusterType, reviews, ratings)
		c.Close()
		awaitUncached(t, ts.Server, resource.ClusterType, reviews, ratings)
	}

	hs := httptest.NewServer(ts.RESTHandler())
	defer hs.Close()
	body, err := protojson.Marshal(&discovery.DiscoveryRequest{Node: envoyNode("rest"), ResourceNames: []string{reviews}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(hs.URL+"/v3/discovery:clusters", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out discovery.DiscoveryResponse
	if err := protojson.Unmarshal(got, &out); err != nil || !slices.Equal(resourceNames(t, &out), []string{reviews}) {
		t.Fatalf("REST answered %d %s (%v)", resp.StatusCode, got, err)
	}
	awaitUncached(t, ts.Server, resource.ClusterType, reviews)
}

// TestGRPCChannelClosedLeavesNothingCached: a real grpc-go xDS client
// holds its listener, route, cluster and endpoints while its channel is
// open, and the cache keeps nothing of them once it closes; a new
// channel is served them again.
func TestGRPCChannelClosedLeavesNothingCached(t *testing.T) {
	b := grpctest.StartBackend(t, "127.0.0.2", 0)
	st := model.NewStore()
	svc := service("echo", "default", 9080)
	st.Update(svc, backendEndpoints(nil, b))
	ts := startServer(t, st)
	name := model.ClusterName(9080, "", svc.Hostname)
	byType := map[string]string{resource.ListenerType: "echo:9080", resource.RouteType: name, resource.ClusterType: name, resource.EndpointType: name}

	cc := xdsChannel(t, ts.addr, "default", "xds:///echo:9080")
	grpctest.AwaitSpread(t, cc, b)
	for typ, n := range byType {
		assertCached(t, ts.Server, typ, n)
	}
	if err := cc.Close(); err != nil {
		t.Fatal(err)
	}
	for typ, n := range byType {
		awaitUncached(t, ts.Server, typ, n)
	}
	grpctest.AwaitSpread(t, xdsChannel(t, ts.addr, "default", "xds:///echo:9080"), b)
}
