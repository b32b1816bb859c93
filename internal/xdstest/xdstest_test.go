package xdstest_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/translate"
	"github.com/meshpilot/meshpilot/internal/xds"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

const (
	lds = resourcev3.ListenerType
	cds = resourcev3.ClusterType
	eds = resourcev3.EndpointType

	reviews = "outbound|9080||reviews.default.svc.cluster.local"
	ratings = "outbound|7070||ratings.default.svc.cluster.local"
)

var wait = 20 * time.Second

func service(name string, port int32) *model.Service {
	return &model.Service{Hostname: model.Hostname(name + ".default.svc.cluster.local"), Name: name, Namespace: "default",
		Ports: []model.Port{{Name: "grpc", Port: port, Protocol: model.GRPC}}}
}

func endpoints(port uint32, addrs ...string) []*model.Endpoint {
	var out []*model.Endpoint
	for _, a := range addrs {
		out = append(out, &model.Endpoint{Address: a, Port: port, ServicePortName: "grpc", Health: model.Healthy})
	}
	return out
}

// server is meshpilot's xDS server on loopback over a store, changes
// pushed through a debouncer as meshpilot serve does.
type server struct {
	*xds.Server
	store *model.Store
	addr  string
}

func startServer(t *testing.T) *server {
	t.Helper()
	st := model.NewStore()
	st.Update(service("reviews", 9080), endpoints(9080, "10.0.0.1", "10.0.0.2"))
	st.Update(service("ratings", 7070), endpoints(7070, "10.0.1.1"))
	s := xds.NewServer(xds.Options{Discovery: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	d := push.NewDebouncer(push.Options{DebounceAfter: 5 * time.Millisecond, DebounceMax: 50 * time.Millisecond, LeadingEdge: true}, s.Push)
	st.AppendEventHandler(d.Handle)
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	s.Register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(func() {
		g.Stop()
		cancel()
		<-done
	})
	return &server{Server: s, store: st, addr: lis.Addr().String()}
}

func grpcNode(id string) xdstest.Options {
	return xdstest.Options{Node: xdstest.GRPCNode(xdstest.NodeOptions{ID: id, Namespace: "default"}), Wait: wait}
}

// awaitClient polls the server's view of its one client until ok holds.
func awaitClient(t *testing.T, s *server, what string, ok func(xds.ClientInfo) bool) xds.ClientInfo {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if cs := s.Clients(); len(cs) == 1 && ok(cs[0]) {
			return cs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never saw %s; clients %+v", what, s.Clients())
		}
		time.Sleep(5 * time.Millisecond) // between polls of the server's state
	}
}

// TestStateOfTheWorld: a client holds what it ACKed, not what it was only
// sent; a ClusterLoadAssignment response adds to what is held, a cluster
// response replaces it; unsubscribing drops a name, here and on the
// server.
func TestStateOfTheWorld(t *testing.T) {
	s := startServer(t)
	c := xdstest.Dial(t, s.addr, grpcNode("sotw"))

	c.Subscribe(eds, reviews, ratings)
	r := c.Next()
	if r.TypeURL != eds || !slices.Equal(r.Names(), []string{ratings, reviews}) && !slices.Equal(r.Names(), []string{reviews, ratings}) {
		t.Fatalf("first EDS response: %s %v", r.TypeURL, r.Names())
	}
	if got := c.Names(eds); len(got) != 0 {
		t.Fatalf("holds %v before the ACK", got)
	}
	c.ACK(r)
	if got := c.Names(eds); !slices.Equal(got, []string{ratings, reviews}) || c.Version(eds) != r.Version {
		t.Fatalf("after the ACK: holds %v at %q, want both at %q", got, c.Version(eds), r.Version)
	}

	// Only ratings changes: the response names it alone, and reviews is
	// still held.
	s.store.Update(service("ratings", 7070), endpoints(7070, "10.0.1.1", "10.0.1.2"))
	r = c.Next()
	if !slices.Equal(r.Names(), []string{ratings}) {
		t.Fatalf("after ratings changed: %v", r.Names())
	}
	c.ACK(r)
	if got := c.Names(eds); !slices.Equal(got, []string{ratings, reviews}) {
		t.Fatalf("holds %v, want both", got)
	}
	if got := xdstest.Addresses(c.LoadAssignment(ratings)); !slices.Equal(got, []string{"10.0.1.1", "10.0.1.2"}) {
		t.Fatalf("ratings' addresses %v", got)
	}

	c.Unsubscribe(eds, ratings)
	if got := c.Names(eds); !slices.Equal(got, []string{reviews}) {
		t.Fatalf("holds %v after unsubscribing ratings", got)
	}
	awaitClient(t, s, "the unsubscription", func(ci xds.ClientInfo) bool {
		return ci.Types["EDS"] != nil && slices.Equal(ci.Types["EDS"].Subscribed, []string{reviews})
	})

	// Clusters come whole: one missing from a response is gone.
	c.Subscribe(cds, reviews, ratings)
	r = c.Next()
	c.ACK(r)
	if got := c.Names(cds); !slices.Equal(got, []string{ratings, reviews}) || c.Cluster(reviews).GetName() != reviews {
		t.Fatalf("clusters held: %v", got)
	}
	s.store.Delete("ratings.default.svc.cluster.local")
	for r.TypeURL != cds || slices.Contains(r.Names(), ratings) {
		r = c.Next()
		c.ACK(r)
	}
	if got := c.Names(cds); !slices.Equal(got, []string{reviews}) {
		t.Fatalf("clusters held after ratings went: %v", got)
	}
}

// TestNACK: a NACK reaches the server with its detail and the version
// ACKed before; the client keeps what it held.
func TestNACK(t *testing.T) {
	s := startServer(t)
	c := xdstest.Dial(t, s.addr, grpcNode("nacker"))
	c.Subscribe(eds, reviews)
	r1 := c.Next()
	c.ACK(r1)
	s.store.Update(service("reviews", 9080), endpoints(9080, "10.0.0.9"))
	r2 := c.Next()
	c.NACK(r2, "no thanks")
	ci := awaitClient(t, s, "the NACK", func(ci xds.ClientInfo) bool { return ci.NACKs == 1 })
	e := ci.Types["EDS"]
	if ci.LastNACK != "no thanks" || e.LastNACK.Version != r2.Version || e.LastNACK.Nonce != r2.Nonce || e.LastACK.Version != r1.Version {
		t.Fatalf("the server's view after the NACK: %+v, EDS %+v", ci, e)
	}
	if got := xdstest.Addresses(c.LoadAssignment(reviews)); !slices.Equal(got, []string{"10.0.0.1", "10.0.0.2"}) || c.Version(eds) != r1.Version {
		t.Fatalf("after the NACK the client holds %v at %q, want the first version's", got, c.Version(eds))
	}
}

// TestDelta: on a delta stream resources carry versions, an unsubscribed
// name is dropped, a removal is applied once ACKed.
func TestDelta(t *testing.T) {
	s := startServer(t)
	c := xdstest.Dial(t, s.addr, xdstest.Options{Node: xdstest.EnvoyNode(xdstest.NodeOptions{ID: "delta"}), Delta: true, Wait: wait})
	c.Subscribe(cds, reviews, ratings)
	r := c.Next()
	for _, res := range r.Resources {
		if res.Version == "" || res.Message == nil {
			t.Errorf("%s: version %q, message %v", res.Name, res.Version, res.Message)
		}
	}
	c.ACK(r)
	if got := c.Names(cds); !slices.Equal(got, []string{ratings, reviews}) {
		t.Fatalf("holds %v", got)
	}
	c.Unsubscribe(cds, ratings)
	if got := c.Names(cds); !slices.Equal(got, []string{reviews}) {
		t.Fatalf("holds %v after unsubscribing ratings", got)
	}
	awaitClient(t, s, "the unsubscription", func(ci xds.ClientInfo) bool {
		return ci.Delta && ci.Types["CDS"] != nil && slices.Equal(ci.Types["CDS"].Subscribed, []string{reviews})
	})
	s.store.Delete("reviews.default.svc.cluster.local")
	r = c.Next()
	if len(r.Resources) != 0 || !slices.Equal(r.Removed, []string{reviews}) {
		t.Fatalf("after the delete: resources %v, removed %v", r.Names(), r.Removed)
	}
	if got := c.Names(cds); !slices.Equal(got, []string{reviews}) {
		t.Fatalf("the removal applied before the ACK: holds %v", got)
	}
	c.ACK(r)
	if got := c.Names(cds); len(got) != 0 {
		t.Fatalf("holds %v after the removal", got)
	}
}

// TestAutoACKAndWaitFor: a client that ACKs by itself follows changes,
// and WaitFor sees them.
func TestAutoACKAndWaitFor(t *testing.T) {
	s := startServer(t)
	o := grpcNode("auto")
	o.AutoACK = true
	c := xdstest.Dial(t, s.addr, o)
	c.Subscribe(lds, "reviews:9080")
	c.WaitFor(lds, "reviews:9080")
	if c.Listener("reviews:9080").GetApiListener() == nil {
		t.Fatal("the listener held is not an API listener")
	}
	c.Subscribe(eds, reviews)
	c.WaitFor(eds, reviews)
	v := c.Version(eds)
	s.store.Update(service("reviews", 9080), endpoints(9080, "10.0.0.3"))
	c.WaitForNewVersion(eds, v)
	if got := xdstest.Addresses(c.LoadAssignment(reviews)); !slices.Equal(got, []string{"10.0.0.3"}) {
		t.Fatalf("addresses %v after the change", got)
	}
	// The responses are still there for Next, each ACKed before.
	for _, want := range []string{lds, eds, eds} {
		if r := c.Next(); r.TypeURL != want {
			t.Fatalf("queued %s, want %s", r.TypeURL, want)
		}
	}
	ci := awaitClient(t, s, "every ACK", func(ci xds.ClientInfo) bool {
		return ci.Types["EDS"] != nil && ci.Types["EDS"].Status == xds.Synced && ci.Types["EDS"].LastACK.Version == c.Version(eds)
	})
	if !ci.GRPC || ci.Namespace != "default" {
		t.Fatalf("the server classified the gRPC node as %+v", ci)
	}
}

// fakeTB records a test failure instead of failing.
type fakeTB struct {
	testing.TB // the real test: Helper and Cleanup
	failure    string
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure runs f as a test with tb and returns how it failed.
func failure(tb *fakeTB, f func()) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
	return tb.failure
}

// TestWaitForSaysWhatIsHeld: a WaitFor that times out names the client,
// the type, what it waited for and what the client holds.
func TestWaitForSaysWhatIsHeld(t *testing.T) {
	s := startServer(t)
	tb := &fakeTB{TB: t}
	o := grpcNode("waiter")
	o.AutoACK, o.Wait = true, 200*time.Millisecond
	c := xdstest.Dial(tb, s.addr, o)
	c.Subscribe(cds, reviews, "outbound|1||nosuch.default.svc.cluster.local")
	// The failure must say what the client holds: wait for it first, as
	// long as any test waits. The 200 ms are only for the cluster that
	// never comes, and on a busy machine the first response alone may
	// take longer.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.Await(ctx, func() bool { return slices.Equal(c.Names(cds), []string{reviews}) }); err != nil {
		t.Fatalf("the client never held %s alone: %v; holds %q", reviews, err, c.Names(cds))
	}
	got := failure(tb, func() { c.WaitFor(cds, reviews, "outbound|1||nosuch.default.svc.cluster.local") })
	for _, want := range []string{
		`client "waiter"`, "not within 200ms", "CDS",
		`want exactly ["outbound|1||nosuch.default.svc.cluster.local" "` + reviews + `"]`,
		`holds ["` + reviews + `"]`, `(version "` + c.Version(cds) + `")`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the failure %q does not say %q", got, want)
		}
	}
	if c.Version(cds) == "" {
		t.Error("the client ACKed nothing")
	}

	c.Close()
	got = failure(tb, func() { c.WaitFor(cds) })
	if !strings.Contains(got, "the stream ended") || !strings.Contains(got, "closed") {
		t.Errorf("a wait on a closed client: %q", got)
	}
}

// TestNodes: the server classifies the helpers' nodes as the clients
// they stand for.
func TestNodes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		node          *core.Node
		grpc          bool
		namespace, id string
	}{
		{"gRPC", xdstest.GRPCNode(xdstest.NodeOptions{ID: "g", Namespace: "ns1"}), true, "ns1", "g"},
		{"gRPC, namespace from a sidecar id", xdstest.GRPCNode(xdstest.NodeOptions{ID: xdstest.SidecarID("10.0.0.1", "pod", "ns2")}),
			true, "ns2", "sidecar~10.0.0.1~pod.ns2~ns2.svc.cluster.local"},
		{"Envoy", xdstest.EnvoyNode(xdstest.NodeOptions{ID: "e", Namespace: "ns3"}), false, "ns3", "e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := translate.ClientFromNode(tc.node)
			if c.GRPC != tc.grpc || c.Namespace != tc.namespace || c.ID != tc.id {
				t.Fatalf("read as %+v, want gRPC %v, namespace %q, id %q", c, tc.grpc, tc.namespace, tc.id)
			}
		})
	}
}

// TestSendOnAnEndedStream: a server that refuses a stream may end it
// before the client's request is out; gRPC then returns io.EOF from Send.
// That is not a test failure: the stream's status, which the test
// asserts, comes from ExpectEnd.
func TestSendOnAnEndedStream(t *testing.T) {
	s := xds.NewServer(xds.Options{Discovery: model.NewStore(), Ready: func() bool { return false },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	s.Register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)

	tb := &fakeTB{TB: t}
	c := xdstest.Dial(tb, lis.Addr().String(), grpcNode("refused"))
	var end error
	got := failure(tb, func() {
		c.Subscribe(cds, reviews)
		end = c.ExpectEnd(wait)
		c.Subscribe(eds, reviews) // the stream has ended: Send returns io.EOF
	})
	if got != "" {
		t.Fatalf("a send on a refused stream failed the test: %s", got)
	}
	if status.Code(end) != codes.Unavailable {
		t.Fatalf("the refused stream ended with %v, want Unavailable", end)
	}
}
