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
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// This file wires the Server into go-control-plane's gRPC server, which
// speaks the protocol (streams, nonces, subscriptions): the Server is its
// cache (CreateWatch, CreateDeltaWatch, Fetch), and its callbacks feed the
// client tracker.

var _ cache.Cache = (*Server)(nil)

// streamKey names a stream: go-control-plane numbers state-of-the-world
// and delta streams separately.
type streamKey struct {
	id    int64
	delta bool
}

var errNotReady = status.Error(codes.Unavailable, "meshpilot: the service model is not synced yet")

func (s *Server) newProtocolServer() serverv3.Server {
	return serverv3.NewServer(context.Background(), s, serverv3.CallbackFuncs{
		StreamOpenFunc:        func(ctx context.Context, id int64, _ string) error { return s.open(ctx, id, false) },
		DeltaStreamOpenFunc:   func(ctx context.Context, id int64, _ string) error { return s.open(ctx, id, true) },
		StreamClosedFunc:      func(id int64, _ *core.Node) { s.closed(id, false) },
		DeltaStreamClosedFunc: func(id int64, _ *core.Node) { s.closed(id, true) },
		StreamRequestFunc: func(id int64, req *discovery.DiscoveryRequest) error {
			return s.request(clientRequest{
				stream: id, node: req.GetNode(), typeURL: req.GetTypeUrl(), names: req.GetResourceNames(),
				version: req.GetVersionInfo(), nonce: req.GetResponseNonce(), nack: req.GetErrorDetail(),
			})
		},
		StreamDeltaRequestFunc: func(id int64, req *discovery.DeltaDiscoveryRequest) error {
			return s.request(clientRequest{
				stream: id, delta: true, node: req.GetNode(), typeURL: req.GetTypeUrl(),
				names: req.GetResourceNamesSubscribe(), unsubscribe: req.GetResourceNamesUnsubscribe(),
				nonce: req.GetResponseNonce(), nack: req.GetErrorDetail(),
			})
		},
		StreamResponseFunc: func(ctx context.Context, id int64, _ *discovery.DiscoveryRequest, out *discovery.DiscoveryResponse) {
			s.tracker.sotwSent(ctx, id, out)
		},
		StreamDeltaResponseFunc: func(id int64, _ *discovery.DeltaDiscoveryRequest, out *discovery.DeltaDiscoveryResponse) {
			s.tracker.deltaSentFunc(id, out)
		},
		FetchRequestFunc: func(ctx context.Context, req *discovery.DiscoveryRequest) error {
			if !s.ready() {
				return errNotReady
			}
			if err := s.limits.check(req.GetResourceNames(), nil, req.GetNode()); err != nil {
				return s.refuse("rest", req.GetNode().GetId(), req.GetTypeUrl(), err)
			}
			return s.authorizeFetch(ctx, req.GetNode())
		},
	})
}

// Register adds ADS (state of the world and delta) and the per-type
// discovery services to g, each stream's sends timed (sendtimeout.go).
// Serve g on Listener's wrapper for Shed to reach the clients.
func (s *Server) Register(g *grpc.Server) {
	for _, sd := range []*grpc.ServiceDesc{
		&discovery.AggregatedDiscoveryService_ServiceDesc,
		&listenerservice.ListenerDiscoveryService_ServiceDesc,
		&routeservice.RouteDiscoveryService_ServiceDesc,
		&clusterservice.ClusterDiscoveryService_ServiceDesc,
		&endpointservice.EndpointDiscoveryService_ServiceDesc,
	} {
		g.RegisterService(s.guardStreams(sd), s.xds)
	}
}

// open admits a new stream, or refuses it with a status the client gets
// at once: Unavailable until the model is ready (and while draining),
// ResourceExhausted beyond Options.MaxClients. The cap counts what
// ClientCounts counts: ADS streams of both kinds and per-type streams.
// REST-JSON requests are not streams, hold nothing between requests and
// are not counted.
func (s *Server) open(ctx context.Context, id int64, delta bool) error {
	if !s.ready() {
		s.refused.notReady.Add(1)
		return errNotReady
	}
	if !s.tracker.open(id, delta, s.opts.MaxClients) {
		return s.refused.overCap(s.opts.MaxClients)
	}
	k := streamKey{id, delta}
	s.shed.add(ctx, k)
	if g, ok := ctx.Value(guardedStreamKey{}).(*guardedStream); ok {
		g.key.Store(&k)
	}
	if s.opts.RequireIdentity {
		s.identities.open(k, peerIdentityOf(ctx))
	}
	return nil
}

func (s *Server) closed(id int64, delta bool) {
	s.identities.close(streamKey{id, delta})
	s.shed.remove(streamKey{id, delta})
	s.tracker.close(id, delta)
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
// logs and counts NACKs.
func (s *Server) request(req clientRequest) error {
	k := streamKey{req.stream, req.delta}
	if err := s.limits.check(req.names, req.unsubscribe, req.node); err != nil {
		nodeID := req.node.GetId()
		if req.node == nil {
			nodeID = s.tracker.nodeID(k)
		}
		return s.refuse(k.name(), nodeID, req.typeURL, err)
	}
	if err := s.authorizeStream(k, k.name(), req.node); err != nil {
		return err
	}
	r := s.tracker.request(req)
	if req.delta {
		if err := s.limits.checkSubscribed(r.subscribed); err != nil {
			return s.refuse(k.name(), r.nodeID, req.typeURL, err)
		}
	}
	if r.nack {
		s.nacks.Add(1)
		s.log.Warn("xds: client rejected configuration", "client", r.nodeID, "stream", req.stream,
			"type", s.tracker.shortType(req.typeURL), "version", req.version, "nonce", req.nonce,
			"error", req.nack.GetMessage())
	}
	return nil
}

// name names the stream in logs as /debug/syncz numbers it.
func (k streamKey) name() string {
	if k.delta {
		return "delta/" + strconv.FormatInt(k.id, 10)
	}
	return "sotw/" + strconv.FormatInt(k.id, 10)
}
