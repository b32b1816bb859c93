package xds

import (
	"context"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
)

// memStream is a state-of-the-world ADS stream of the server without
// gRPC: requests go straight to the stream loop's request handling, and
// what the stream's sender sends arrives on sent.
type memStream struct {
	*xdsStream
	sent chan *discovery.DiscoveryResponse
}

// memServerStream is the grpc.ServerStream the sender writes to. A send
// takes a token from gate first, when there is one.
type memServerStream struct {
	grpc.ServerStream
	sent chan *discovery.DiscoveryResponse
	gate chan struct{}
}

func (m memServerStream) Context() context.Context { return context.Background() }

func (m memServerStream) SendMsg(v any) error {
	if m.gate != nil {
		<-m.gate
	}
	m.sent <- v.(*discovery.DiscoveryResponse)
	return nil
}

// openMemStream opens a state-of-the-world ADS stream on s; closing it
// is the caller's (close).
func openMemStream(tb testing.TB, s *Server) *memStream {
	tb.Helper()
	return openGatedMemStream(tb, s, nil)
}

// openGatedMemStream is openMemStream whose sends each take a token
// from gate.
func openGatedMemStream(tb testing.TB, s *Server, gate chan struct{}) *memStream {
	tb.Helper()
	sent := make(chan *discovery.DiscoveryResponse, 8)
	k := streamKey{id: s.sotwStreams.Add(1)}
	g := s.guard(memServerStream{sent: sent, gate: gate})
	st := newStream(s.env, k, g, "")
	if err := s.open(g.ctx, st); err != nil {
		tb.Fatal(err)
	}
	g.key.Store(&k)
	return &memStream{xdsStream: st, sent: sent}
}

// request sends a request and fails the test if the stream refuses it.
func (m *memStream) request(tb testing.TB, req *discovery.DiscoveryRequest) {
	tb.Helper()
	if err := m.handle(func() error { return m.sotwRequest(req) }); err != nil {
		tb.Fatal(err)
	}
}

// ack acknowledges a response.
func (m *memStream) ack(tb testing.TB, r *discovery.DiscoveryResponse, names []string) {
	tb.Helper()
	m.request(tb, &discovery.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResourceNames: names, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()})
}

// held is every resource the stream's client holds once it has ACKed
// what it was sent, as the client state keeps them.
func (m *memStream) held() []*entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*entry
	for _, ts := range m.types {
		out = append(out, ts.held...)
	}
	return out
}
