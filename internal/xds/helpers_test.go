package xds

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/translate/translatetest"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

const wait = 20 * time.Second // deadline for anything awaited in tests

// syncBuffer is a log sink tests can read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testServer is a Server listening on loopback, fed by a model.Store
// through a debouncer, as meshpilot serve wires it.
type testServer struct {
	*Server
	store *model.Store
	addr  string
	logs  *syncBuffer
}

type serverOpt func(*Options)

func startServer(t testing.TB, store *model.Store, opts ...serverOpt) *testServer {
	t.Helper()
	logs := &syncBuffer{}
	o := Options{
		Discovery: store,
		Logger:    slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, f := range opts {
		f(&o)
	}
	s := NewServer(o)
	ctx, cancel := context.WithCancel(context.Background())
	d := push.NewDebouncer(push.Options{DebounceAfter: 5 * time.Millisecond, DebounceMax: 50 * time.Millisecond, LeadingEdge: true}, s.Push)
	store.AppendEventHandler(d.Handle)
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(GRPCServerOptions()...)
	s.Register(g)
	go func() { _ = g.Serve(s.Listener(lis)) }()
	t.Cleanup(func() {
		g.Stop()
		cancel()
		<-done
	})
	return &testServer{Server: s, store: store, addr: lis.Addr().String(), logs: logs}
}

func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func grpcNode(id, ns string) *core.Node {
	return xdstest.GRPCNode(xdstest.NodeOptions{ID: id, Namespace: ns})
}

func envoyNode(id string) *core.Node { return xdstest.EnvoyNode(xdstest.NodeOptions{ID: id}) }

// openADS opens a state-of-the-world stream on cc.
func openADS(t testing.TB, cc *grpc.ClientConn, node *core.Node) *xdstest.TestClient {
	t.Helper()
	return xdstest.Connect(t, cc, xdstest.Options{Node: node, Wait: wait})
}

// openDelta opens a delta stream on cc.
func openDelta(t testing.TB, cc *grpc.ClientConn, node *core.Node) *xdstest.TestClient {
	t.Helper()
	return xdstest.Connect(t, cc, xdstest.Options{Node: node, Delta: true, Wait: wait})
}

// claAddrs lists the addresses of each ClusterLoadAssignment of r, sorted.
func claAddrs(t testing.TB, r *xdstest.Response) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, res := range r.Resources {
		cla, ok := res.Message.(*endpoint.ClusterLoadAssignment)
		if !ok {
			t.Fatalf("%s: not a ClusterLoadAssignment (%v)", res.Name, r.Err)
		}
		out[cla.GetClusterName()] = xdstest.Addresses(cla)
	}
	return out
}

// sortedNames lists the names of r's resources, sorted.
func sortedNames(r *xdstest.Response) []string {
	return slices.Sorted(slices.Values(r.Names()))
}

// resourceNames lists the names of a response that no xdstest client read
// (REST, a per-type service), in its order.
func resourceNames(t testing.TB, r *discovery.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range r.GetResources() {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resourceName(m))
	}
	return out
}

func resourceName(m any) string {
	if n, ok := m.(interface{ GetName() string }); ok {
		return n.GetName()
	}
	if c, ok := m.(interface{ GetClusterName() string }); ok {
		return c.GetClusterName()
	}
	return fmt.Sprintf("%T", m)
}

var (
	service   = translatetest.Service
	endpoints = translatetest.Endpoints
)

type pushRequest = push.Request

func timeNow() time.Time { return time.Now() }
func itoa(i int) string  { return fmt.Sprint(i) }

type atomicBool struct{ atomic.Bool }

// awaitCount polls c until it reaches at least n.
func awaitCount(t testing.TB, c *atomic.Int64, n int64, what string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for c.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %s (count %d, want %d)", what, c.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
