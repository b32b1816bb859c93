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
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
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
		Discovery: storeDiscovery{store},
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
	g := grpc.NewServer()
	s.Register(g)
	go func() { _ = g.Serve(lis) }()
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
	md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": ns, "GENERATOR": "grpc"})
	return &core.Node{Id: id, Metadata: md}
}

func envoyNode(id string) *core.Node { return &core.Node{Id: id, UserAgentName: "envoy"} }

// responses reads a stream's messages into a channel, so that a test can
// wait for the next one with a deadline.
type responses[T any] struct {
	recv chan T
	errc chan error
}

func readResponses[T any](recv func() (T, error)) *responses[T] {
	r := &responses[T]{recv: make(chan T, 100), errc: make(chan error, 1)}
	go func() {
		for {
			m, err := recv()
			if err != nil {
				r.errc <- err
				return
			}
			r.recv <- m
		}
	}()
	return r
}

// next returns the next message, failing the test after the deadline.
func (r *responses[T]) next(t testing.TB) T {
	t.Helper()
	select {
	case m := <-r.recv:
		return m
	case err := <-r.errc:
		t.Fatalf("stream ended: %v", err)
	case <-time.After(wait):
		t.Fatalf("no response within %v", wait)
	}
	var zero T
	return zero
}

// adsStream is a raw state-of-the-world ADS client.
type adsStream struct {
	t      testing.TB
	stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	in     *responses[*discovery.DiscoveryResponse] // nil until read
	node   *core.Node
	cancel context.CancelFunc
}

// openADS opens a stream; read=false leaves responses unread (a slow
// client) until read is called.
func openADS(t testing.TB, cc *grpc.ClientConn, node *core.Node, read bool) *adsStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	a := &adsStream{t: t, stream: st, node: node, cancel: cancel}
	t.Cleanup(cancel)
	if read {
		a.read()
	}
	return a
}

// read starts reading the stream's responses.
func (a *adsStream) read() { a.in = readResponses(a.stream.Recv) }

func (a *adsStream) send(typeURL string, names []string, version, nonce string, nack error) {
	a.t.Helper()
	req := &discovery.DiscoveryRequest{Node: a.node, TypeUrl: typeURL, ResourceNames: names, VersionInfo: version, ResponseNonce: nonce}
	if nack != nil {
		req.ErrorDetail = &statusProto{Code: 3, Message: nack.Error()}
	}
	if err := a.stream.Send(req); err != nil {
		a.t.Fatalf("send: %v", err)
	}
}

// next returns the next response, failing the test after the deadline.
func (a *adsStream) next() *discovery.DiscoveryResponse {
	a.t.Helper()
	return a.in.next(a.t)
}

// ack acknowledges r, subscribing to names.
func (a *adsStream) ack(r *discovery.DiscoveryResponse, names []string) {
	a.t.Helper()
	a.send(r.GetTypeUrl(), names, r.GetVersionInfo(), r.GetNonce(), nil)
}

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

// service makes a service in namespace ns with one gRPC port.
func service(name, ns string, port int32) *model.Service {
	return &model.Service{
		Hostname:  model.ServiceHostname(name, ns, ""),
		Name:      name,
		Namespace: ns,
		Ports:     []model.Port{{Name: "grpc", Port: port, Protocol: model.GRPC}},
	}
}

func endpoints(port uint32, health model.Health, addrs ...string) []*model.Endpoint {
	var out []*model.Endpoint
	for _, a := range addrs {
		out = append(out, &model.Endpoint{Address: a, Port: port, ServicePortName: "grpc", Health: health})
	}
	return out
}

type statusProto = statuspb.Status

type pushRequest = push.Request

func timeNow() time.Time                         { return time.Now() }
func timeAfter(d time.Duration) <-chan time.Time { return time.After(d) }
func itoa(i int) string                          { return fmt.Sprint(i) }

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

// deltaStream is a raw delta ADS client.
type deltaStream struct {
	t      testing.TB
	stream discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	in     *responses[*discovery.DeltaDiscoveryResponse]
	node   *core.Node
}

func openDelta(t testing.TB, cc *grpc.ClientConn, node *core.Node) *deltaStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &deltaStream{t: t, stream: st, in: readResponses(st.Recv), node: node}
}

// send sends a request of typeURL; the node goes with every request.
func (d *deltaStream) send(typeURL string, subscribe, unsubscribe []string, nonce string) {
	d.t.Helper()
	req := &discovery.DeltaDiscoveryRequest{Node: d.node, TypeUrl: typeURL, ResourceNamesSubscribe: subscribe,
		ResourceNamesUnsubscribe: unsubscribe, ResponseNonce: nonce}
	if err := d.stream.Send(req); err != nil {
		d.t.Fatalf("send: %v", err)
	}
}

// ack acknowledges r.
func (d *deltaStream) ack(r *discovery.DeltaDiscoveryResponse) {
	d.t.Helper()
	d.send(r.GetTypeUrl(), nil, nil, r.GetNonce())
}

// next returns the next response, failing the test after the deadline.
func (d *deltaStream) next() *discovery.DeltaDiscoveryResponse {
	d.t.Helper()
	return d.in.next(d.t)
}

// deltaNames lists the names of the resources of a delta response, sorted.
func deltaNames(r *discovery.DeltaDiscoveryResponse) []string {
	var out []string
	for _, res := range r.GetResources() {
		out = append(out, res.GetName())
	}
	slices.Sort(out)
	return out
}
