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
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
	return v.s.serve(st, false, ListenerType)
}

func (v services) DeltaListeners(st grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]) error {
	return v.s.serve(st, true, ListenerType)
}

func (v services) FetchListeners(ctx context.Context, req *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return v.s.fetchAs(ctx, req, ListenerType)
}

func (v services) StreamRoutes(st grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	return v.s.serve(st, false, RouteType)
}

func (v services) DeltaRoutes(st grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]) error {
	return v.s.serve(st, true, RouteType)
}

func (v services) FetchRoutes(ctx context.Context, req *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return v.s.fetchAs(ctx, req, RouteType)
}

func (v services) StreamClusters(st grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	return v.s.serve(st, false, ClusterType)
}

func (v services) DeltaClusters(st grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]) error {
	return v.s.serve(st, true, ClusterType)
}

func (v services) FetchClusters(ctx context.Context, req *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return v.s.fetchAs(ctx, req, ClusterType)
}

func (v services) StreamEndpoints(st grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	return v.s.serve(st, false, EndpointType)
}

func (v services) DeltaEndpoints(st grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]) error {
	return v.s.serve(st, true, EndpointType)
}

func (v services) FetchEndpoints(ctx context.Context, req *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return v.s.fetchAs(ctx, req, EndpointType)
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

// open admits a new stream, or refuses it with a status the client gets
// at once: Unavailable until the model is ready (and while draining),
// ResourceExhausted beyond Options.MaxClients. The cap counts what
// ClientCounts counts: ADS streams of both kinds and per-type streams.
// REST-JSON requests are not streams, hold nothing between requests and
// are not counted.
func (s *Server) open(ctx context.Context, k streamKey) error {
	if !s.ready() {
		s.refused.notReady.Add(1)
		return errNotReady
	}
	if err := s.admitRate(ctx); err != nil {
		return err
	}
	if !s.tracker.open(k.id, k.delta, s.opts.MaxClients) {
		return s.refused.overCap(s.opts.MaxClients)
	}
	s.shed.add(ctx, k)
	if s.opts.RequireIdentity {
		s.identities.open(k, peerIdentityOf(ctx))
	}
	return nil
}

func (s *Server) closed(k streamKey) {
	s.identities.close(k)
	s.shed.remove(k)
	s.tracker.close(k.id, k.delta)
}

// clientRequest is one request on a stream, as the tracker records it.
// For delta streams names and unsubscribe are the request's subscribe
// and unsubscribe lists; version is empty.
type clientRequest struct {
	stream             int64
	delta              bool
	node               *core.Node
	typeURL            string
	names, unsubscribe []string
	version, nonce     string
	nack               *statuspb.Status
}

// request refuses a request beyond the limits (limits.go), or of a node
// its client is not entitled to be (identity.go), which ends the stream;
// it records who is on a stream and what it asks for, and
// logs and counts NACKs. subscribed is the type's subscribed names as
// the client state keeps them (requestResult.names).
func (s *Server) request(req clientRequest) (subscribed []string, err error) {
	k := streamKey{req.stream, req.delta}
	if err := s.limits.check(req.names, req.unsubscribe, req.node); err != nil {
		nodeID := req.node.GetId()
		if req.node == nil {
			nodeID = s.tracker.nodeID(k)
		}
		return nil, s.refuse(k.name(), nodeID, req.typeURL, err)
	}
	if err := s.authorizeStream(k, k.name(), req.node); err != nil {
		return nil, err
	}
	r := s.tracker.request(req)
	if req.delta {
		if err := s.limits.checkSubscribed(r.subscribed); err != nil {
			return nil, s.refuse(k.name(), r.nodeID, req.typeURL, err)
		}
	}
	if r.nack {
		s.nacks.Add(1)
		s.log.Warn("xds: client rejected configuration", "client", r.nodeID, "stream", req.stream,
			"type", s.tracker.shortType(req.typeURL), "version", req.version, "nonce", req.nonce,
			"error", req.nack.GetMessage())
	}
	return r.names, nil
}

// name names the stream in logs as /debug/syncz numbers it.
func (k streamKey) name() string {
	if k.delta {
		return "delta/" + strconv.FormatInt(k.id, 10)
	}
	return "sotw/" + strconv.FormatInt(k.id, 10)
}
