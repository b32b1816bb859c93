package xds

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultStreamSendTimeout is how long one response may take to be
// written to a stream (Options.StreamSendTimeout). A send waits only
// when HTTP/2 flow control is exhausted, that is when the client has
// not read the responses before it: a client that reads at all takes a
// response of a few MiB in well under a second, even across regions. 30
// s leaves a slow or briefly paused client (a long garbage collection,
// a CPU-starved sidecar) ample room while bounding how long a stuck one
// holds its stream. Istio's PILOT_XDS_SEND_TIMEOUT ends such a stream
// the same way; it was 5 s by default, which large pushes to busy
// proxies outgrew, and is off today, which leaves a stuck stream open
// for ever.
const DefaultStreamSendTimeout = 30 * time.Second

// sendTimeout ends a stream whose response could not be written in
// time. DeadlineExceeded, as Istio ends it: the client reconnects if it
// ever reads again.
type sendTimeout struct {
	typeURL string
	waited  time.Duration
}

func (e *sendTimeout) Error() string { return e.GRPCStatus().Message() }

func (e *sendTimeout) GRPCStatus() *status.Status {
	return status.New(codes.DeadlineExceeded, fmt.Sprintf(
		"meshpilot: a response could not be sent within %v (--stream-send-timeout): the client does not read its stream", e.waited))
}

// streamGuard ends a stream whose response cannot be written within the
// send timeout. A Send stuck on flow control returns only once the
// stream ends, and go-control-plane ends a stream only when the client
// does or the server stops, so the handler runs in a goroutine of its
// own and the gRPC method returns the timeout without waiting for it:
// grpc-go then ends the stream, which fails the stuck Send and the
// handler's Recv, and the handler returns too.
type streamGuard struct {
	srv     *Server
	timeout time.Duration
	// key is go-control-plane's number, known once the stream is
	// admitted (Server.open), for the log.
	key atomic.Pointer[streamKey]

	endCh chan struct{}
	once  sync.Once
	why   *sendTimeout // set before endCh closes

	// ended is set before the method returns, so that the handler
	// starts no Send after that; the one under way then, stuck on flow
	// control, fails as soon as grpc-go ends the stream. go-control-plane
	// sends from the handler's goroutine alone.
	ended atomic.Bool
}

// end ends the stream; the first timeout wins.
func (g *streamGuard) end(why *sendTimeout) {
	g.once.Do(func() {
		g.why = why
		close(g.endCh)
	})
}

// send writes a response, ending the stream if that takes longer than
// the timeout.
func (g *streamGuard) send(typeURL string, send func() error) error {
	if g.ended.Load() {
		return status.Error(codes.Canceled, "meshpilot: the stream has ended")
	}
	t := time.AfterFunc(g.timeout, func() { g.end(&sendTimeout{typeURL: typeURL, waited: g.timeout}) })
	defer t.Stop()
	return send()
}

// serve runs the handler until it returns or the stream is ended.
func (g *streamGuard) serve(handler func() error) error {
	done := make(chan error, 1)
	go func() { done <- handler() }()
	select {
	case err := <-done:
		return err
	case <-g.endCh:
		g.ended.Store(true)
		g.srv.sendTimedOut(g.key.Load(), g.why)
		return g.why
	}
}

type streamGuardKey struct{}

// guardStream serves a stream through a guard: the handler gets the
// stream with its Send timed and its context carrying the guard, which
// Server.open finds there.
func guardStream[Req, Resp any](s *Server, st grpc.BidiStreamingServer[Req, Resp],
	handler func(grpc.BidiStreamingServer[Req, Resp]) error) error {
	g := &streamGuard{srv: s, timeout: s.sendTimeout, endCh: make(chan struct{})}
	w := &guardedStream[Req, Resp]{BidiStreamingServer: st, g: g, ctx: context.WithValue(st.Context(), streamGuardKey{}, g)}
	return g.serve(func() error { return handler(w) })
}

// guardedStream is a stream whose Send goes through its guard.
type guardedStream[Req, Resp any] struct {
	grpc.BidiStreamingServer[Req, Resp]
	g   *streamGuard
	ctx context.Context
}

func (w *guardedStream[Req, Resp]) Context() context.Context { return w.ctx }

func (w *guardedStream[Req, Resp]) Send(r *Resp) error {
	typeURL := ""
	if t, ok := any(r).(interface{ GetTypeUrl() string }); ok {
		typeURL = t.GetTypeUrl()
	}
	return w.g.send(typeURL, func() error { return w.BidiStreamingServer.Send(r) })
}

// sendTimedOut logs and counts a stream ended by the send timeout.
func (s *Server) sendTimedOut(k *streamKey, e *sendTimeout) {
	s.sendTimeouts.Add(1)
	client, stream := "", ""
	if k != nil {
		client = logID(s.tracker.nodeID(*k))
		stream = k.name()
	}
	s.log.Warn("xds: closing a stream whose client does not read: a response could not be sent within --stream-send-timeout",
		"client", client, "stream", stream, "type", s.tracker.shortType(e.typeURL), "waited", e.waited)
}

// SendTimeouts returns how many streams were ended because a response
// could not be sent within the send timeout.
func (s *Server) SendTimeouts() uint64 { return s.sendTimeouts.Load() }

// The gRPC services, each stream served through a guard: ADS and the
// per-type streams of Envoy without ADS alike.

type adsServer struct {
	discovery.AggregatedDiscoveryServiceServer
	s *Server
}

func (a adsServer) StreamAggregatedResources(st discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	return guardStream(a.s, st, a.AggregatedDiscoveryServiceServer.StreamAggregatedResources)
}

func (a adsServer) DeltaAggregatedResources(st discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	return guardStream(a.s, st, a.AggregatedDiscoveryServiceServer.DeltaAggregatedResources)
}

type ldsServer struct {
	listenerservice.ListenerDiscoveryServiceServer
	s *Server
}

func (l ldsServer) StreamListeners(st listenerservice.ListenerDiscoveryService_StreamListenersServer) error {
	return guardStream(l.s, st, l.ListenerDiscoveryServiceServer.StreamListeners)
}

func (l ldsServer) DeltaListeners(st listenerservice.ListenerDiscoveryService_DeltaListenersServer) error {
	return guardStream(l.s, st, l.ListenerDiscoveryServiceServer.DeltaListeners)
}

type rdsServer struct {
	routeservice.RouteDiscoveryServiceServer
	s *Server
}

func (r rdsServer) StreamRoutes(st routeservice.RouteDiscoveryService_StreamRoutesServer) error {
	return guardStream(r.s, st, r.RouteDiscoveryServiceServer.StreamRoutes)
}

func (r rdsServer) DeltaRoutes(st routeservice.RouteDiscoveryService_DeltaRoutesServer) error {
	return guardStream(r.s, st, r.RouteDiscoveryServiceServer.DeltaRoutes)
}

type cdsServer struct {
	clusterservice.ClusterDiscoveryServiceServer
	s *Server
}

func (c cdsServer) StreamClusters(st clusterservice.ClusterDiscoveryService_StreamClustersServer) error {
	return guardStream(c.s, st, c.ClusterDiscoveryServiceServer.StreamClusters)
}

func (c cdsServer) DeltaClusters(st clusterservice.ClusterDiscoveryService_DeltaClustersServer) error {
	return guardStream(c.s, st, c.ClusterDiscoveryServiceServer.DeltaClusters)
}

type edsServer struct {
	endpointservice.EndpointDiscoveryServiceServer
	s *Server
}

func (e edsServer) StreamEndpoints(st endpointservice.EndpointDiscoveryService_StreamEndpointsServer) error {
	return guardStream(e.s, st, e.EndpointDiscoveryServiceServer.StreamEndpoints)
}

func (e edsServer) DeltaEndpoints(st endpointservice.EndpointDiscoveryService_DeltaEndpointsServer) error {
	return guardStream(e.s, st, e.EndpointDiscoveryServiceServer.DeltaEndpoints)
}
