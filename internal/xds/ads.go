package xds

import (
	"context"
	"strconv"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// This file registers the discovery services: ADS (state of the world
// and delta) and the per-type services, each stream served by the
// Server's own stream loop (stream.go), and their unary fetches by the
// REST logic (rest.go).

// streamKey names a stream: state-of-the-world and delta streams are
// numbered separately, from 1.
type streamKey struct {
	id    int64
	delta bool
}

var errNotReady = status.Error(codes.Unavailable, "meshpilot: the service model is not synced yet")

// services implements the generated discovery service interfaces. The
// empty type URL is ADS's: every request names its type.
type services struct{ s *Server }

func (v services) StreamAggregatedResources(st grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	return v.s.serve(st, false, "")
}

func (v services) DeltaAggregatedResources(st grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]) error {
	return v.s.serve(st, true, "")
}

func (v services) StreamListeners(st grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	return v.s.serve(st, false, resource.ListenerType)
}

func (v services) DeltaListeners(st grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]) error {
	return v.s.serve(st, true, resource.ListenerType)
}

func (v services) FetchListeners(ctx context.Context, req *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return v.s.fetchAs(ctx, req, resource.ListenerType)
}

func (v services) StreamRoutes(st grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	return v.s.serve(st, false, resource.RouteType)
}

func (v services) DeltaRoutes(st grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]) error {
	return v.s.serve(st, true, resource.RouteType)
}

func (v services) FetchRoutes(ctx context.Context, req *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return v.s.fetchAs(ctx, req, resource.RouteType)
}

func (v services) StreamClusters(st grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	return v.s.serve(st, false, resource.ClusterType)
}

func (v services) DeltaClusters(st grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]) error {
	return v.s.serve(st, true, resource.ClusterType)
}

func (v services) FetchClusters(ctx context.Context, req *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return v.s.fetchAs(ctx, req, resource.ClusterType)
}

func (v services) StreamEndpoints(st grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	return v.s.serve(st, false, resource.EndpointType)
}

func (v services) DeltaEndpoints(st grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]) error {
	return v.s.serve(st, true, resource.EndpointType)
}

func (v services) FetchEndpoints(ctx context.Context, req *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return v.s.fetchAs(ctx, req, resource.EndpointType)
}

var (
	_ discovery.AggregatedDiscoveryServiceServer     = services{}
	_ listenerservice.ListenerDiscoveryServiceServer = services{}
	_ routeservice.RouteDiscoveryServiceServer       = services{}
	_ clusterservice.ClusterDiscoveryServiceServer   = services{}
	_ endpointservice.EndpointDiscoveryServiceServer = services{}
)

// Register adds ADS (state of the world and delta) and the per-type
// discovery services to g, each stream's sends timed (sendtimeout.go).
// Serve g on Listener's wrapper for Shed to reach the clients.
func (s *Server) Register(g *grpc.Server) {
	v := services{s}
	discovery.RegisterAggregatedDiscoveryServiceServer(g, v)
	listenerservice.RegisterListenerDiscoveryServiceServer(g, v)
	routeservice.RegisterRouteDiscoveryServiceServer(g, v)
	clusterservice.RegisterClusterDiscoveryServiceServer(g, v)
	endpointservice.RegisterEndpointDiscoveryServiceServer(g, v)
}

// serve runs one stream: admitted (open), then its loop (stream.go).
func (s *Server) serve(gs grpc.ServerStream, delta bool, defaultType string) error {
	k := streamKey{delta: delta}
	if delta {
		k.id = s.deltaStreams.Add(1)
	} else {
		k.id = s.sotwStreams.Add(1)
	}
	g := s.guard(gs)
	st := newStream(s.env, k, g, defaultType)
	if err := s.open(g.ctx, st); err != nil {
		return err
	}
	g.key.Store(&k)
	return st.run(delta)
}

// open admits a new stream, or refuses it with a status the client gets
// at once: Unavailable until the model is ready (and while draining),
// ResourceExhausted beyond Options.MaxClients. The cap counts what
// ClientCounts counts: ADS streams of both kinds and per-type streams.
// REST-JSON requests are not streams, hold nothing between requests and
// are not counted.
func (s *Server) open(ctx context.Context, st *xdsStream) error {
	if !s.ready() {
		s.refused.notReady.Add(1)
		return errNotReady
	}
	if err := s.admitRate(ctx); err != nil {
		return err
	}
	if !s.streams.add(st, s.opts.MaxClients) {
		return s.refused.overCap(s.opts.MaxClients)
	}
	s.shed.add(ctx, st.key)
	if s.opts.RequireIdentity {
		s.identities.open(st.key, peerIdentityOf(ctx))
	}
	return nil
}

func (s *Server) closed(k streamKey) {
	s.identities.close(k)
	s.shed.remove(k)
	s.streams.remove(k)
}

// refuseStream is refuse for a stream's request; node is the request's
// when it is the stream's first.
func (s *Server) refuseStream(st *xdsStream, node *core.Node, typeURL string, err *limitError) error {
	nodeID := node.GetId()
	if node == nil {
		nodeID = st.nodeIDOf()
	}
	return s.refuse(st.key.name(), nodeID, typeURL, err)
}

// nacked counts a NACK and logs it, once per client and interval
// (clientLog): a client that rejects what it is sent rejects it again at
// every push and reconnect, and its text is its own.
func (s *Server) nacked(nodeID string, k streamKey, label string, grpcClient bool, n *NACK) {
	s.nacks.Add(1)
	if s.opts.Observer != nil {
		s.opts.Observer.NACKed(label, grpcClient)
	}
	id := logID(nodeID)
	if ok, unlogged := s.nackLog.event(id, n.Time); ok {
		s.log.Warn("xds: client rejected configuration", "client", id, "stream", k.name(),
			"type", label, "version", n.Version, "nonce", n.Nonce, "error", n.Error,
			"unlogged_since_last_line", unlogged, "next_line_for_this_client_after", s.nackLog.every)
	}
}

// name names the stream in logs as /debug/syncz numbers it.
func (k streamKey) name() string {
	if k.delta {
		return "delta/" + strconv.FormatInt(k.id, 10)
	}
	return "sotw/" + strconv.FormatInt(k.id, 10)
}
