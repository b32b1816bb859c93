package translate

import (
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	httpoptions "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// httpProtocolOptionsKey is the typed_extension_protocol_options key (the
// extension's name) under which Envoy reads upstream HTTP options.
const httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// clusterGenerator builds the cluster "outbound|<port>|<subset>|<FQDN>":
// an EDS cluster over ADS with round robin, or for a DNS alias
// (ExternalName; a DNS ServiceEntry, whose external name is its host) a
// LOGICAL_DNS cluster pointing at the external name, or, when it has
// none, at its endpoints (resolveEndpointNames),
// with the traffic policy of the DestinationRule the client follows
// (applyTrafficPolicy). A subset cluster exists when that rule defines
// the subset. Envoy and gRPC clients get different clusters: Envoy gets
// istiod's connection pool defaults (applyConnectionPool), which grpc-go
// would read as no limit on requests.
type clusterGenerator struct{ GeneratorOptions }

func (*clusterGenerator) Type() ResourceType {
	return ResourceType{URL: resource.ClusterType, Short: "CDS", FullState: true, Wildcard: true}
}

func (g *clusterGenerator) AllNames() []string { return clusterNames(g.Discovery, false) }

func (g *clusterGenerator) Generate(c *Client, name string) Result {
	svc, key, deps, seen := clusterTarget(g.Discovery, c, name, model.KindService)
	if svc == nil {
		return Result{Deps: deps, Vary: seen}
	}
	rule, deps, vary := g.ruleFor(c, svc, deps)
	vary |= seen
	policy, ok := rule.PolicyFor(key.Port, key.Subset)
	if !ok {
		return Result{Deps: deps, Vary: vary}
	}
	cl := buildCluster(name, svc, key.Port)
	if svc.Resolution == model.DNSAlias && svc.ExternalName == "" {
		// A DNS ServiceEntry with endpoints: the cluster carries them
		// (cluster_dns.go), and differs by client kind.
		deps = append(deps, model.EndpointsKey(svc.Hostname))
		var selector model.Labels
		if s := rule.Subset(key.Subset); s != nil {
			selector = s.Labels
		}
		if !resolveEndpointNames(cl, model.EndpointsOf(g.Discovery, svc, key.Port, selector), c.GRPC) {
			return Result{Deps: deps, Vary: vary}
		}
		vary |= VaryKind
	}
	p, _ := svc.PortByNumber(key.Port)
	vary |= applyTrafficPolicy(cl, policy, p.Protocol, c)
	deps, tlsVary := g.applyTLS(cl, policy.TLS, c, svc, key, deps)
	return Result{Deps: deps, Resource: cl, Vary: vary | tlsVary}
}

func buildCluster(name string, svc *model.Service, port int32) *cluster.Cluster {
	c := &cluster.Cluster{
		Name:     name,
		LbPolicy: cluster.Cluster_ROUND_ROBIN,
	}
	if p, _ := svc.PortByNumber(port); speaksHTTP2(p.Protocol) {
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{httpProtocolOptionsKey: http2Options}
	}
	if svc.Resolution == model.DNSAlias {
		c.ClusterDiscoveryType = &cluster.Cluster_Type{Type: cluster.Cluster_LOGICAL_DNS}
		c.DnsLookupFamily = cluster.Cluster_V4_PREFERRED
		c.LoadAssignment = &endpoint.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpoint.LocalityLbEndpoints{{
				Locality: &core.Locality{},
				LbEndpoints: []*endpoint.LbEndpoint{{
					HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
						Address: socketAddress(svc.ExternalName, uint32(port)),
					}},
				}},
			}},
		}
		return c
	}
	c.ClusterDiscoveryType = &cluster.Cluster_Type{Type: cluster.Cluster_EDS}
	c.EdsClusterConfig = &cluster.Cluster_EdsClusterConfig{EdsConfig: adsSource, ServiceName: name}
	// The endpoints carry their health, DRAINING and UNHEALTHY included.
	// Envoy's default panic threshold (50%) would make it balance over all
	// of them, not-ready pods included, once half are not HEALTHY; 0 never
	// does, as Istio sets when it sends unhealthy endpoints.
	c.CommonLbConfig = &cluster.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}}
	return c
}

// speaksHTTP2 says whether a port's upstream protocol is HTTP/2, as
// Istio's Protocol.IsHTTP2 does: gRPC (gRPC-Web too: Envoy's grpc_web
// filter turns it into gRPC) and HTTP2, which the registries give to
// appProtocol kubernetes.io/h2c.
func speaksHTTP2(p model.Protocol) bool {
	switch p {
	case model.GRPC, model.GRPCWeb, model.HTTP2:
		return true
	}
	return false
}

// http2Options makes Envoy speak HTTP/2 (h2c) to the endpoints: without
// it Envoy uses HTTP/1.1 upstream whatever the client spoke, which gRPC
// servers refuse. Istio's cluster builder sets the same.
var http2Options = func() *anypb.Any {
	a, err := anypb.New(&httpoptions.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpoptions.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpoptions.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpoptions.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
					Http2ProtocolOptions: &core.Http2ProtocolOptions{},
				},
			},
		},
	})
	if err != nil {
		panic(err)
	}
	return a
}()

var adsSource = &core.ConfigSource{
	ResourceApiVersion:    core.ApiVersion_V3,
	ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}},
}

func socketAddress(addr string, port uint32) *core.Address {
	return &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
		Protocol:      core.SocketAddress_TCP,
		Address:       addr,
		PortSpecifier: &core.SocketAddress_PortValue{PortValue: port},
	}}}
}
