package translate

import (
	"math"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpoptions "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
)

// envoyConnectTimeout is the default of MeshConfig's connectTimeout in
// Istio, which istiod gives every Envoy cluster: Envoy's own default
// (5 s) gives up on a slow connection sooner than istiod's sidecars do.
const envoyConnectTimeout = 10 * time.Second

// applyConnectionPool sets an Envoy cluster's connection pool as istiod's
// cluster builder does (applyConnectionPool), with or without a rule:
// every circuit breaker threshold at the maximum unless connectionPool
// sets it (Envoy's defaults, 1024 connections, pending and active
// requests and 3 parallel retries, make a busy sidecar answer 503 while
// endpoints come and go), connect_timeout, TCP keepalive, and the
// upstream HTTP options: idle timeout (http's, else tcp's), requests
// per connection, maximum connection duration, HTTP/2 for an HTTP port
// whose h2UpgradePolicy is UPGRADE, its concurrent streams and PINGs
// (http2KeepAlive), or the downstream protocol (useClientProtocol).
//
// gRPC clients do not get this: grpc-go reads only max_requests and
// would take the maximum for no limit, where istiod leaves it at
// grpc-go's default of 1024 (applyTrafficPolicy gives them
// http2MaxRequests alone).
func applyConnectionPool(c *cluster.Cluster, cp *model.ConnectionPool, protocol model.Protocol) {
	if cp == nil {
		cp = &model.ConnectionPool{}
	}
	limit := func(v int32) *wrapperspb.UInt32Value {
		if v > 0 {
			return wrapperspb.UInt32(uint32(v))
		}
		return wrapperspb.UInt32(math.MaxUint32)
	}
	c.CircuitBreakers = &cluster.CircuitBreakers{Thresholds: []*cluster.CircuitBreakers_Thresholds{{
		MaxConnections:     limit(cp.MaxConnections),
		MaxPendingRequests: limit(cp.MaxPendingRequests),
		MaxRequests:        limit(cp.MaxRequests),
		MaxRetries:         limit(cp.MaxRetries),
	}}}
	c.ConnectTimeout = durationpb.New(envoyConnectTimeout)
	if cp.ConnectTimeout > 0 {
		c.ConnectTimeout = durationpb.New(cp.ConnectTimeout)
	}
	if k := cp.TCPKeepalive; k != nil {
		// An empty keepalive still turns SO_KEEPALIVE on, with the
		// system's timings.
		ka := &core.TcpKeepalive{}
		if k.Probes > 0 {
			ka.KeepaliveProbes = wrapperspb.UInt32(k.Probes)
		}
		if k.Time > 0 {
			ka.KeepaliveTime = wrapperspb.UInt32(uint32(k.Time / time.Second))
		}
		if k.Interval > 0 {
			ka.KeepaliveInterval = wrapperspb.UInt32(uint32(k.Interval / time.Second))
		}
		c.UpstreamConnectionOptions = &cluster.UpstreamConnectionOptions{TcpKeepalive: ka}
	}
	opts := httpOptionsFor(cp, protocol)
	if opts == nil {
		return
	}
	a, err := anypb.New(opts)
	if err != nil {
		panic(err) // marshalling a well-formed message cannot fail
	}
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{httpProtocolOptionsKey: a}
}

// httpOptionsFor builds the upstream HTTP options of a cluster of a port
// of the given protocol under a connection pool; nil when it needs none.
func httpOptionsFor(cp *model.ConnectionPool, protocol model.Protocol) *httpoptions.HttpProtocolOptions {
	var h2 *core.Http2ProtocolOptions
	switch {
	case cp.UseClientProtocol:
	case speaksHTTP2(protocol), cp.H2Upgrade == model.H2Upgrade:
		// UPGRADE says the port speaks HTTP, whatever its protocol, as
		// istiod reads it (shouldH2Upgrade); the mesh's default is not
		// to upgrade.
		h2 = &core.Http2ProtocolOptions{}
	}
	idle := cp.HTTPIdleTimeout
	if idle == 0 {
		idle = cp.TCPIdleTimeout
	}
	var common *core.HttpProtocolOptions
	if idle > 0 || cp.MaxRequestsPerConnection > 0 || cp.MaxConnectionDuration > 0 {
		common = &core.HttpProtocolOptions{}
		if idle > 0 {
			common.IdleTimeout = durationpb.New(idle)
		}
		if cp.MaxRequestsPerConnection > 0 {
			common.MaxRequestsPerConnection = wrapperspb.UInt32(uint32(cp.MaxRequestsPerConnection))
		}
		if cp.MaxConnectionDuration > 0 {
			common.MaxConnectionDuration = durationpb.New(cp.MaxConnectionDuration)
		}
	}
	if h2 != nil && cp.MaxConcurrentStreams > 0 {
		h2.MaxConcurrentStreams = wrapperspb.UInt32(uint32(cp.MaxConcurrentStreams))
	}
	if k := cp.HTTP2KeepAlive; h2 != nil && k != nil {
		ka := &core.KeepaliveSettings{}
		if k.Interval > 0 {
			ka.Interval = durationpb.New(k.Interval)
		}
		if k.Timeout > 0 {
			ka.Timeout = durationpb.New(k.Timeout)
		}
		h2.ConnectionKeepalive = ka
	}
	out := &httpoptions.HttpProtocolOptions{CommonHttpProtocolOptions: common}
	switch {
	case cp.UseClientProtocol:
		out.UpstreamProtocolOptions = &httpoptions.HttpProtocolOptions_UseDownstreamProtocolConfig{
			UseDownstreamProtocolConfig: &httpoptions.HttpProtocolOptions_UseDownstreamHttpConfig{
				HttpProtocolOptions:  &core.Http1ProtocolOptions{},
				Http2ProtocolOptions: &core.Http2ProtocolOptions{},
			},
		}
	case h2 != nil:
		out.UpstreamProtocolOptions = &httpoptions.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpoptions.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpoptions.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: h2},
			},
		}
	case common == nil:
		return nil
	default:
		// Envoy requires an upstream protocol: HTTP/1.1, as istiod
		// fills it in.
		out.UpstreamProtocolOptions = &httpoptions.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpoptions.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpoptions.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &core.Http1ProtocolOptions{}},
			},
		}
	}
	return out
}
