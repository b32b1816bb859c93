package xds

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

const (
	reviews = "outbound|9080||reviews.default.svc.cluster.local"
	ratings = "outbound|7070||ratings.default.svc.cluster.local"
)

func baseStore() *model.Store {
	st := model.NewStore()
	st.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.1", "10.0.0.2"))
	st.Update(service("ratings", "default", 7070), endpoints(7070, model.Healthy, "10.0.1.1"))
	return st
}

// TestSotwFlow follows one gRPC client through LDS, RDS, CDS and EDS,
// ACKs, and checks that a change elsewhere sends it nothing while a
// change of its endpoints sends only the changed ClusterLoadAssignment.
func TestSotwFlow(t *testing.T) {
	ts := startServer(t, baseStore())
	a := openADS(t, dial(t, ts.addr), grpcNode("client-1", "default"))

	a.Subscribe(resource.ListenerType, "reviews:9080")
	r := a.Next()
	if got := r.Names(); !slices.Equal(got, []string{"reviews:9080"}) || r.TypeURL != resource.ListenerType {
		t.Fatalf("LDS got %v", got)
	}
	a.ACK(r)
	for _, typ := range []string{resource.RouteType, resource.ClusterType} {
		a.Subscribe(typ, reviews)
		r := a.Next()
		if got := r.Names(); !slices.Equal(got, []string{reviews}) || r.TypeURL != typ {
			t.Fatalf("%s got %v", typ, got)
		}
		a.ACK(r)
	}
	a.Subscribe(resource.EndpointType, reviews, ratings)
	r = a.Next()
	if got := claAddrs(t, r); len(got) != 2 || !slices.Equal(got[reviews], []string{"10.0.0.1", "10.0.0.2"}) {
		t.Fatalf("EDS got %v", got)
	}
	a.ACK(r)

	// A service nobody watches changes, then ratings' endpoints change:
	// the first thing the client gets is ratings' CLA alone.
	ts.store.Update(service("other", "default", 1), nil)
	ts.store.Update(service("ratings", "default", 7070), endpoints(7070, model.Healthy, "10.0.1.1", "10.0.1.2"))
	r = a.Next()
	got := claAddrs(t, r)
	if r.TypeURL != resource.EndpointType || len(got) != 1 || !slices.Equal(got[ratings], []string{"10.0.1.1", "10.0.1.2"}) {
		t.Fatalf("after endpoint change got %s %v", r.TypeURL, got)
	}
	a.ACK(r)

	// A push of reviews' unchanged endpoints and a full push send nothing;
	// then reviews loses an endpoint.
	ts.Push(pushOf(model.Event{Kind: model.EndpointsChanged, Hostname: "reviews.default.svc.cluster.local"}))
	ts.Push(pushRequest{Full: true})
	ts.store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.1"))
	r = a.Next()
	// A service change re-evaluates LDS, RDS, CDS too; only EDS changed.
	if got := claAddrs(t, r); r.TypeURL != resource.EndpointType || !slices.Equal(got[reviews], []string{"10.0.0.1"}) {
		t.Fatalf("got %s %v", r.TypeURL, got)
	}
	a.ACK(r)

	// The service is deleted: LDS and CDS responses without it.
	ts.store.Delete("reviews.default.svc.cluster.local")
	seen := map[string]bool{}
	for len(seen) < 2 {
		r := a.Next()
		if r.TypeURL != resource.ListenerType && r.TypeURL != resource.ClusterType {
			t.Fatalf("unexpected %s after delete", r.TypeURL)
		}
		if n := len(r.Resources); n != 0 {
			t.Fatalf("%s still has %d resources", r.TypeURL, n)
		}
		seen[r.TypeURL] = true
		a.ACK(r)
	}
	// It comes back: listener, cluster and endpoints are sent again; the
	// route configuration the client kept is the same and is not.
	ts.store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.3"))
	seen = map[string]bool{}
	for len(seen) < 3 {
		r := a.Next()
		seen[r.TypeURL] = true
		if r.TypeURL == resource.RouteType {
			t.Fatal("unchanged route configuration resent")
		}
		if len(r.Resources) == 0 {
			t.Fatalf("empty %s after re-adding", r.TypeURL)
		}
		a.ACK(r)
	}
}

func pushOf(evs ...model.Event) pushRequest {
	var r pushRequest
	for _, e := range evs {
		r.Add(e, timeNow())
	}
	return r
}

// TestNACK: a rejected version is logged with the client and the error,
// not resent, and the next change is sent.
func TestNACK(t *testing.T) {
	ts := startServer(t, baseStore())
	a := openADS(t, dial(t, ts.addr), grpcNode("nacker", "default"))
	a.Subscribe(resource.EndpointType, reviews)
	r := a.Next()
	a.NACK(r, "bad endpoints, says the client")
	// The NACK is handled before the change: nothing is resent, the next
	// response is the new endpoints.
	awaitClient(t, ts.Server, "the NACK", func(c ClientInfo) bool { return c.Types["EDS"] != nil && c.Types["EDS"].Status == NACKed })
	ts.store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.9"))
	r2 := a.Next()
	if got := claAddrs(t, r2); !slices.Equal(got[reviews], []string{"10.0.0.9"}) {
		t.Fatalf("after NACK got %v", got)
	}
	if r2.Version == r.Version {
		t.Fatal("version reused")
	}
	logs := ts.logs.String()
	if !strings.Contains(logs, "client=nacker") || !strings.Contains(logs, "bad endpoints, says the client") || !strings.Contains(logs, "type=EDS") {
		t.Fatalf("NACK not logged with client and detail:\n%s", logs)
	}
	if ts.NACKs() != 1 {
		t.Fatalf("NACKs = %d", ts.NACKs())
	}
	cs := ts.Clients()
	if len(cs) != 1 || cs[0].NodeID != "nacker" || cs[0].NACKs != 1 || cs[0].LastNACK != "bad endpoints, says the client" || !cs[0].GRPC || cs[0].Namespace != "default" {
		t.Fatalf("Clients() = %+v", cs)
	}
}

// TestUnservedType: a request for a type meshpilot does not serve gets an
// empty answer and the stream goes on.
func TestUnservedType(t *testing.T) {
	ts := startServer(t, baseStore())
	a := openADS(t, dial(t, ts.addr), envoyNode("envoy"))
	const secretType = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
	a.Subscribe(secretType, "default")
	r := a.Next()
	if r.TypeURL != secretType || len(r.Resources) != 0 {
		t.Fatalf("got %s with %d resources", r.TypeURL, len(r.Resources))
	}
	a.ACK(r)
	a.Subscribe(resource.ClusterType, reviews)
	if got := a.Next().Names(); !slices.Equal(got, []string{reviews}) {
		t.Fatalf("CDS after an unserved type: %v", got)
	}
}

// TestVersionsDifferAcrossInstances: two servers over the same model never
// give the same version for a response.
func TestVersionsDifferAcrossInstances(t *testing.T) {
	st := baseStore()
	var versions []string
	for range 2 {
		ts := startServer(t, st)
		a := openADS(t, dial(t, ts.addr), grpcNode("c", "default"))
		a.Subscribe(resource.ClusterType, reviews)
		versions = append(versions, a.Next().Version)
	}
	if versions[0] == versions[1] {
		t.Fatalf("both servers answered version %q", versions[0])
	}
}

// TestEnvoyWildcard: an Envoy node subscribing to everything gets every
// cluster and every ClusterLoadAssignment, and no listeners; new services
// appear and deleted ones go.
func TestEnvoyWildcard(t *testing.T) {
	ts := startServer(t, baseStore())
	a := openADS(t, dial(t, ts.addr), envoyNode("sidecar~10.1.1.1~envoy.default~default.svc.cluster.local"))
	a.Subscribe(resource.ClusterType)
	r := a.Next()
	if got := r.Names(); !slices.Equal(got, []string{ratings, reviews}) {
		t.Fatalf("wildcard CDS %v", got)
	}
	a.ACK(r)
	a.Subscribe(resource.EndpointType)
	r = a.Next()
	if got := claAddrs(t, r); len(got) != 2 {
		t.Fatalf("wildcard EDS %v", got)
	}
	a.ACK(r)
	a.Subscribe(resource.ListenerType)
	if r := a.Next(); len(r.Resources) != 0 {
		t.Fatalf("wildcard LDS for Envoy gave %d listeners", len(r.Resources))
	} else {
		a.ACK(r)
	}
	ts.store.Update(service("new", "default", 80), endpoints(80, model.Healthy, "10.0.2.1"))
	seen := map[string][]string{}
	for len(seen) < 2 {
		r := a.Next()
		seen[r.TypeURL] = r.Names()
		a.ACK(r)
	}
	if !slices.Contains(seen[resource.ClusterType], "outbound|80||new.default.svc.cluster.local") || len(seen[resource.ClusterType]) != 3 {
		t.Fatalf("CDS after add %v", seen[resource.ClusterType])
	}
	if !slices.Contains(seen[resource.EndpointType], "outbound|80||new.default.svc.cluster.local") {
		t.Fatalf("EDS after add %v", seen[resource.EndpointType])
	}
	ts.store.Delete("ratings.default.svc.cluster.local")
	for {
		r := a.Next()
		a.ACK(r)
		if r.TypeURL == resource.ClusterType {
			if got := r.Names(); slices.Contains(got, ratings) || len(got) != 2 {
				t.Fatalf("CDS after delete %v", got)
			}
			break
		}
	}
}

// TestDelta: delta ADS sends resources, then only what changed, and
// removals.
func TestDelta(t *testing.T) {
	ts := startServer(t, baseStore())
	d := openDelta(t, dial(t, ts.addr), envoyNode("delta-envoy"))
	d.Subscribe(resource.ClusterType, reviews, ratings, "outbound|1||nosuch.default.svc.cluster.local")
	r := d.Next()
	for _, res := range r.Resources {
		if res.Version == "" {
			t.Errorf("%s has no version", res.Name)
		}
	}
	if got := sortedNames(r); !slices.Equal(got, []string{ratings, reviews}) {
		t.Fatalf("delta CDS %v", got)
	}
	d.ACK(r)

	// ratings' port changes: only ratings' old cluster is removed and the
	// client learns nothing about reviews.
	svc := service("ratings", "default", 7071)
	ts.store.Update(svc, endpoints(7071, model.Healthy, "10.0.1.1"))
	r = d.Next()
	if len(r.Resources) != 0 || !slices.Equal(r.Removed, []string{ratings}) {
		t.Fatalf("delta after port change: %d resources, removed %v", len(r.Resources), r.Removed)
	}
	d.ACK(r)

	// Subscribing to one more name sends just it.
	d.Subscribe(resource.ClusterType, "outbound|7071||ratings.default.svc.cluster.local")
	r = d.Next()
	if got := sortedNames(r); !slices.Equal(got, []string{"outbound|7071||ratings.default.svc.cluster.local"}) {
		t.Fatalf("delta after subscribe: %v", got)
	}
}

// TestDeltaWildcardAndExplicitName: a name subscribed explicitly and
// also covered by a wildcard subscription gets a removal when its
// resource goes, like any name of the wildcard set.
func TestDeltaWildcardAndExplicitName(t *testing.T) {
	ts := startServer(t, baseStore())
	d := openDelta(t, dial(t, ts.addr), envoyNode("delta-envoy"))
	d.Subscribe(resource.ClusterType, "*", reviews)
	r := d.Next()
	if got := sortedNames(r); !slices.Equal(got, []string{ratings, reviews}) {
		t.Fatalf("wildcard CDS %v", got)
	}
	d.ACK(r)
	ts.store.Delete("reviews.default.svc.cluster.local")
	r = d.Next()
	if len(r.Resources) != 0 || !slices.Equal(r.Removed, []string{reviews}) {
		t.Fatalf("after the delete: resources %v, removed %v", sortedNames(r), r.Removed)
	}
}

// TestDeltaUnsubscribeUnderWildcard: a client subscribed to the wildcard
// that unsubscribes a name it also named explicitly can no longer tell
// whether the name is in the wildcard set, so the server must say: the
// resource when it exists, its removal when it does not (the
// subscription rules, go-control-plane's, mark the name returned with an
// empty version).
func TestDeltaUnsubscribeUnderWildcard(t *testing.T) {
	const nosuch = "outbound|1||nosuch.default.svc.cluster.local"
	for _, tc := range []struct {
		name            string
		resent, removed []string
	}{
		{reviews, []string{reviews}, nil},
		{nosuch, nil, []string{nosuch}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, baseStore())
			d := openDelta(t, dial(t, ts.addr), envoyNode("delta-envoy"))
			d.Subscribe(resource.ClusterType, "*", tc.name)
			r := d.Next()
			if got := sortedNames(r); !slices.Equal(got, []string{ratings, reviews}) {
				t.Fatalf("wildcard CDS %v", got)
			}
			d.ACK(r)
			d.Unsubscribe(resource.ClusterType, tc.name)
			r = d.Next()
			if got := sortedNames(r); !slices.Equal(got, tc.resent) || !slices.Equal(r.Removed, tc.removed) {
				t.Fatalf("after unsubscribing %s: resources %v, removed %v; want %v, %v", tc.name, got, r.Removed, tc.resent, tc.removed)
			}
		})
	}
}

// TestDeltaWildcardListeners: Envoy's first wildcard LDS request on a
// delta stream is answered at once, with no listeners (meshpilot makes
// only the API listeners of gRPC clients): Envoy waits for that answer,
// up to its initial_fetch_timeout, before it finishes starting.
func TestDeltaWildcardListeners(t *testing.T) {
	ts := startServer(t, baseStore())
	cc := dial(t, ts.addr)
	for _, subscribe := range [][]string{nil, {"*"}} {
		d := openDelta(t, cc, envoyNode("delta-envoy"))
		d.Subscribe(resource.ListenerType, subscribe...)
		r := d.Next()
		if r.TypeURL != resource.ListenerType || len(r.Resources) != 0 || len(r.Removed) != 0 {
			t.Fatalf("subscribe %q: %s with resources %v, removed %v", subscribe, r.TypeURL, sortedNames(r), r.Removed)
		}
	}
}

// TestREST serves REST-JSON discovery and answers 304 for a current
// version.
func TestREST(t *testing.T) {
	ts := startServer(t, baseStore())
	hs := httptest.NewServer(ts.RESTHandler())
	defer hs.Close()
	post := func(path, body string) (int, []byte) {
		t.Helper()
		resp, err := http.Post(hs.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, body := post("/v3/discovery:clusters", `{"node":{"id":"rest-envoy"}}`)
	if code != 200 {
		t.Fatalf("clusters: %d %s", code, body)
	}
	var r discovery.DiscoveryResponse
	if err := protojson.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if got := resourceNames(t, &r); !slices.Equal(got, []string{ratings, reviews}) {
		t.Fatalf("REST clusters %v", got)
	}
	code, _ = post("/v3/discovery:clusters", `{"node":{"id":"rest-envoy"},"version_info":"`+r.GetVersionInfo()+`"}`)
	if code != http.StatusNotModified {
		t.Fatalf("same version: %d", code)
	}
	code, body = post("/v3/discovery:listeners", `{"node":{"id":"g","metadata":{"NAMESPACE":"default","GENERATOR":"grpc"}},"resource_names":["reviews:9080"]}`)
	if code != 200 || !strings.Contains(string(body), `"name":"reviews:9080"`) && !strings.Contains(string(body), `"name": "reviews:9080"`) {
		t.Fatalf("listeners: %d %s", code, body)
	}
	code, body = post("/v3/discovery:endpoints", `{"node":{"id":"e"},"resource_names":["`+reviews+`"]}`)
	if code != 200 || !strings.Contains(string(body), "10.0.0.2") {
		t.Fatalf("endpoints: %d %s", code, body)
	}
	code, body = post("/v3/discovery:routes", `{"node":{"id":"e"},"resource_names":["`+reviews+`"]}`)
	if code != 200 || !strings.Contains(string(body), "reviews.default:9080") {
		t.Fatalf("routes: %d %s", code, body)
	}
	if code, _ := post("/v3/discovery:secrets", `{}`); code != http.StatusNotFound {
		t.Fatalf("secrets: %d", code)
	}
	resp, err := http.Get(hs.URL + "/v3/discovery:clusters")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
}

// TestUnavailableBeforeReady: streams and REST are refused until Ready.
func TestUnavailableBeforeReady(t *testing.T) {
	var ready atomicBool
	ts := startServer(t, baseStore(), func(o *Options) { o.Ready = ready.Load })
	cc := dial(t, ts.addr)
	a := openADS(t, cc, grpcNode("early", "default"))
	// The request may find the stream already ended.
	_ = a.Client.Subscribe(resource.ClusterType, reviews)
	// A response first fails the test.
	if err := a.ExpectEnd(wait); status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want Unavailable", err)
	}
	// A delta stream that asks for nothing is refused too.
	if err := openDelta(t, cc, envoyNode("early-delta")).ExpectEnd(wait); status.Code(err) != codes.Unavailable {
		t.Fatalf("delta: got %v, want Unavailable", err)
	}
	if got := ts.RefusedStreams(); got.NotReady != 2 || got.MaxClients != 0 {
		t.Fatalf("refused streams %+v, want 2 not ready", got)
	}
	hs := httptest.NewServer(ts.RESTHandler())
	defer hs.Close()
	resp, err := http.Post(hs.URL+"/v3/discovery:clusters", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("REST before ready: %d", resp.StatusCode)
	}

	ready.Store(true)
	b := openADS(t, cc, grpcNode("late", "default"))
	b.Subscribe(resource.ClusterType, reviews)
	if got := b.Next().Names(); !slices.Equal(got, []string{reviews}) {
		t.Fatalf("after ready %v", got)
	}
}

// TestSlowClient: a client that stops reading, so that a large response
// to it stays stuck in flow control, does not delay pushes to another
// client, and is sent the latest state, not every version it missed, once
// it reads and ACKs again.
func TestSlowClient(t *testing.T) {
	st := baseStore()
	ts := startServer(t, st)
	// The slow client's stream window is fixed at 64 KiB (a fixed window
	// also turns off grpc-go's BDP estimation, which would grow it), and
	// its connection counts the bytes it reads.
	var slowRead atomic.Int64
	slowConn := dial(t, ts.addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			return &countingConn{Conn: c, read: &slowRead}, err
		}))
	slow := xdstest.Connect(t, slowConn, xdstest.Options{Node: grpcNode("slow", "default"), Paused: true, Wait: wait})
	fast := openADS(t, dial(t, ts.addr), grpcNode("fast", "default"))
	for _, a := range []*xdstest.TestClient{slow, fast} {
		a.Subscribe(resource.EndpointType, reviews)
	}
	// Both take the small first response; then the slow client reads no
	// more.
	first := slow.Receive()
	slow.ACK(first)
	r := fast.Next()

	// 8000 endpoints make a ClusterLoadAssignment of about 200 KiB, three
	// times the slow client's window.
	big := make([]string, 8000)
	for i := range big {
		big[i] = "10.9." + itoa(i/250) + "." + itoa(i%250)
	}
	readBefore := slowRead.Load()
	const pushes = 20
	for i := range pushes {
		fast.ACK(r)
		st.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, big[i:]...))
		r = fast.Next()
		if got := claAddrs(t, r); len(got[reviews]) != len(big)-i {
			t.Fatalf("push %d: fast client got %d endpoints", i, len(got[reviews]))
		}
	}
	readDuring := slowRead.Load() - readBefore

	// The slow stream was blocked the whole time: its connection had not
	// delivered even the first response it was sent since, which holds the
	// first big version and not a later one.
	slow.Start()
	stuck := slow.Next()
	if size := int64(proto.Size(stuck.SotW)); readDuring >= size {
		t.Fatalf("the slow client read %d bytes while the fast one took %d pushes: more than the %d of its pending response, so it was never blocked", readDuring, pushes, size)
	}
	if got := claAddrs(t, stuck); len(got[reviews]) != len(big) {
		t.Fatalf("the slow client's pending response has %d endpoints, want the first big version's %d", len(got[reviews]), len(big))
	}
	// Once it ACKs, it is sent the latest state at once.
	slow.ACK(stuck)
	if got := claAddrs(t, slow.Next()); len(got[reviews]) != len(big)-pushes+1 {
		t.Fatalf("after its ACK the slow client got %d endpoints, want the latest %d", len(got[reviews]), len(big)-pushes+1)
	}
}

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// TestDisconnectLeavesNoState: once clients go, no watch is left; shared
// resources of deleted services go too.
func TestDisconnectLeavesNoState(t *testing.T) {
	ts := startServer(t, baseStore())
	cc := dial(t, ts.addr)
	var streams []*xdstest.TestClient
	for i := range 5 {
		a := openADS(t, cc, grpcNode("c"+itoa(i), "default"))
		for _, typ := range []string{resource.ListenerType, resource.RouteType, resource.ClusterType, resource.EndpointType} {
			names := []string{reviews, ratings}
			if typ == resource.ListenerType {
				names = []string{"reviews:9080", "ratings:7070"}
			}
			a.Subscribe(typ, names...)
			a.ACK(a.Next())
		}
		streams = append(streams, a)
	}
	awaitStats(t, ts.Server, func(s Stats) bool { return s.Watches == 20 }, "20 watches")
	for _, a := range streams {
		a.Close()
	}
	awaitStats(t, ts.Server, func(s Stats) bool { return s.Watches == 0 && registrations(ts.Server) == 0 }, "no watches")
	deadline := time.Now().Add(wait)
	for len(ts.Clients()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("clients left behind: %+v", ts.Clients())
		}
		time.Sleep(5 * time.Millisecond)
	}
	ts.store.Delete("reviews.default.svc.cluster.local")
	ts.store.Delete("ratings.default.svc.cluster.local")
	awaitStats(t, ts.Server, func(s Stats) bool { return s.Resources == 0 }, "no resources")
}

func awaitStats(t testing.TB, s *Server, ok func(Stats) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !ok(s.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("never reached %s: %+v", what, s.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPerTypeService: the Cluster Discovery Service alone works like ADS.
func TestPerTypeService(t *testing.T) {
	ts := startServer(t, baseStore())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := clusterservice.NewClusterDiscoveryServiceClient(dial(t, ts.addr)).StreamClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discovery.DiscoveryRequest{Node: grpcNode("cds", "default"), ResourceNames: []string{reviews}}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := resourceNames(t, r); !slices.Equal(got, []string{reviews}) || r.GetTypeUrl() != resource.ClusterType {
		t.Fatalf("CDS got %s %v", r.GetTypeUrl(), got)
	}
}

// TestEndpointsPerClientKind: gRPC clients and Envoy get different
// ClusterLoadAssignments when a locality has no HEALTHY endpoint (see
// translate's localityWithoutHealthy), each kind its own whichever asks first, and
// both follow a change.
func TestEndpointsPerClientKind(t *testing.T) {
	st := model.NewStore()
	eps := func(drainingZone string) []*model.Endpoint {
		var out []*model.Endpoint
		for i, zone := range []string{"a", "b"} {
			h := model.Healthy
			if zone == drainingZone {
				h = model.Draining
			}
			out = append(out, &model.Endpoint{Address: "10.0.0." + itoa(i+1), Port: 9080, ServicePortName: "grpc",
				Health: h, Locality: model.Locality{Region: "r", Zone: zone}})
		}
		return out
	}
	st.Update(service("reviews", "default", 9080), eps("a"))
	ts := startServer(t, st)
	cc := dial(t, ts.addr)
	envoy := openADS(t, cc, envoyNode("envoy"))
	grpcc := openADS(t, cc, grpcNode("grpc", "default"))
	zones := func(r *xdstest.Response) []string {
		t.Helper()
		if len(r.Resources) != 1 {
			t.Fatalf("%d resources", len(r.Resources))
		}
		cla, ok := r.Resources[0].Message.(*endpoint.ClusterLoadAssignment)
		if !ok {
			t.Fatalf("%s: not a ClusterLoadAssignment (%v)", r.Resources[0].Name, r.Err)
		}
		var out []string
		for _, l := range cla.GetEndpoints() {
			out = append(out, l.GetLocality().GetZone())
		}
		return out
	}
	for _, step := range []struct {
		drainingZone string
		envoy, grpc  []string
	}{
		{"a", []string{"a", "b"}, []string{"b"}},
		{"b", []string{"a", "b"}, []string{"a"}},
	} {
		if step.drainingZone != "a" {
			st.Update(service("reviews", "default", 9080), eps(step.drainingZone))
		} else {
			envoy.Subscribe(resource.EndpointType, reviews)
			grpcc.Subscribe(resource.EndpointType, reviews)
		}
		re, rg := envoy.Next(), grpcc.Next()
		if got := zones(re); !slices.Equal(got, step.envoy) {
			t.Errorf("zone %s draining: Envoy got localities %v, want %v", step.drainingZone, got, step.envoy)
		}
		if got := zones(rg); !slices.Equal(got, step.grpc) {
			t.Errorf("zone %s draining: gRPC got localities %v, want %v", step.drainingZone, got, step.grpc)
		}
		envoy.ACK(re)
		grpcc.ACK(rg)
	}
}

// TestMarshalledOncePerContent: however many clients hold a resource, a
// change marshals it once per variant, and what is unchanged is not
// marshalled again. A ClusterLoadAssignment has one variant per client
// kind only while some locality has no HEALTHY endpoint (gRPC clients are
// not sent it); otherwise both kinds share one.
func TestMarshalledOncePerContent(t *testing.T) {
	const perKind = 10
	ts := startServer(t, baseStore())
	cc := dial(t, ts.addr)
	var clients []*xdstest.TestClient
	for i := range perKind {
		clients = append(clients, openADS(t, cc, grpcNode("grpc-"+itoa(i), "default")),
			openADS(t, cc, envoyNode("envoy-"+itoa(i))))
	}
	for _, a := range clients {
		for _, typ := range []string{resource.ClusterType, resource.EndpointType} {
			a.Subscribe(typ, reviews)
			a.ACK(a.Next())
		}
	}
	// One cluster per kind (Envoy's carries istiod's connection pool
	// defaults), and one ClusterLoadAssignment for both kinds.
	if got := ts.Stats().Marshals; got != 3 {
		t.Fatalf("%d marshals for %d clients of one cluster and its endpoints, want 3", got, len(clients))
	}

	ts.store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.1", "10.0.0.3"))
	for _, a := range clients {
		r := a.Next()
		if got := claAddrs(t, r); r.TypeURL != resource.EndpointType || !slices.Equal(got[reviews], []string{"10.0.0.1", "10.0.0.3"}) {
			t.Fatalf("%s got %s %v", a.Node().GetId(), r.TypeURL, got)
		}
		a.ACK(r)
	}
	if got := ts.Stats().Marshals; got != 3+1 {
		t.Fatalf("%d marshals after one endpoint change, want 3 + 1", got)
	}

	// A zone whose only endpoint is draining: Envoy is sent it, gRPC
	// clients are not (their variant's bytes are unchanged, so they are
	// sent nothing), so the kinds now get a variant each.
	draining := &model.Endpoint{Address: "10.0.0.9", Port: 9080, ServicePortName: "grpc", Health: model.Draining,
		Locality: model.Locality{Region: "r", Zone: "far"}}
	ts.store.Update(service("reviews", "default", 9080),
		append(endpoints(9080, model.Healthy, "10.0.0.1", "10.0.0.3"), draining))
	for _, a := range clients {
		if a.Node().GetUserAgentName() != "envoy" {
			continue
		}
		r := a.Next()
		if got, want := claAddrs(t, r)[reviews], []string{"10.0.0.1", "10.0.0.3", "10.0.0.9"}; !slices.Equal(got, want) {
			t.Fatalf("%s got %v, want %v", a.Node().GetId(), got, want)
		}
	}
	if got := ts.Stats().Marshals; got != 4+2 {
		t.Fatalf("%d marshals after a zone lost its HEALTHY endpoints, want 4 + one per client kind", got)
	}
}
