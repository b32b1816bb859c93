package xds

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	router "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpoptions "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Type URLs of the resources meshpilot serves.
const (
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)

// httpProtocolOptionsKey is the typed_extension_protocol_options key (the
// extension's name) under which Envoy reads upstream HTTP options.
const httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// Generator builds xDS resources from the model. Its methods are pure
// functions of the model's current content and the arguments, and are
// safe for concurrent use.
type Generator struct {
	Discovery    model.ServiceDiscovery
	DomainSuffix string
}

func (g *Generator) suffix() string {
	return model.DomainSuffixOrDefault(g.DomainSuffix)
}

var adsSource = &core.ConfigSource{
	ResourceApiVersion:    core.ApiVersion_V3,
	ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}},
}

var routerFilter = func() *hcm.HttpFilter {
	cfg, err := anypb.New(&router.Router{})
	if err != nil {
		panic(err)
	}
	return &hcm.HttpFilter{
		Name:       "envoy.filters.http.router",
		ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: cfg},
	}
}()

// Listener returns the API listener that a client asking for name (see
// resolveListener) gets, or nil when the name designates no service port.
func (g *Generator) Listener(client Client, name string) *listener.Listener {
	svc, port := resolveListener(g.Discovery, g.suffix(), client.Namespace, name)
	if svc == nil {
		return nil
	}
	return buildListener(name, svc.Hostname, port)
}

func buildListener(name string, host model.Hostname, port int32) *listener.Listener {
	rc := model.ClusterName(port, "", host)
	m := &hcm.HttpConnectionManager{
		CodecType:  hcm.HttpConnectionManager_AUTO,
		StatPrefix: rc,
		RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
			ConfigSource:    adsSource,
			RouteConfigName: rc,
		}},
		HttpFilters: []*hcm.HttpFilter{routerFilter},
	}
	a, err := anypb.New(m)
	if err != nil {
		panic(err) // marshalling a well-formed message cannot fail
	}
	return &listener.Listener{
		Name:        name,
		ApiListener: &listener.ApiListener{ApiListener: a},
	}
}

// servicePort finds the service port a cluster-style name designates.
func (g *Generator) servicePort(name string) (*model.Service, int32) {
	host, port, ok := serviceCluster(name)
	if !ok {
		return nil, 0
	}
	svc := g.Discovery.GetService(host)
	if svc == nil {
		return nil, 0
	}
	if _, ok := svc.PortByNumber(port); !ok {
		return nil, 0
	}
	return svc, port
}

// RouteConfiguration returns the route configuration
// "outbound|<port>||<FQDN>": one virtual host whose domains are the forms
// a client may use for the service, routing "/" to the cluster of the same
// name. Nil when the service port does not exist.
func (g *Generator) RouteConfiguration(name string) *route.RouteConfiguration {
	svc, port := g.servicePort(name)
	if svc == nil {
		return nil
	}
	return &route.RouteConfiguration{
		Name: name,
		VirtualHosts: []*route.VirtualHost{{
			Name:    string(svc.Hostname) + ":" + strconv.Itoa(int(port)),
			Domains: model.VirtualHostDomains(svc, g.suffix(), port),
			Routes: []*route.Route{{
				Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
				Action: &route.Route_Route{Route: &route.RouteAction{
					ClusterSpecifier: &route.RouteAction_Cluster{Cluster: name},
				}},
			}},
		}},
		ValidateClusters: wrapperspb.Bool(false),
	}
}

// Cluster returns the cluster "outbound|<port>||<FQDN>": an EDS cluster
// over ADS with round robin, or for a DNS alias (ExternalName) a
// LOGICAL_DNS cluster pointing at the external name. Nil when the service
// port does not exist. gRPC clients ignore the fields only Envoy reads
// (common_lb_config, typed_extension_protocol_options), so every client
// gets the same cluster.
func (g *Generator) Cluster(name string) *cluster.Cluster {
	svc, port := g.servicePort(name)
	if svc == nil {
		return nil
	}
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

func socketAddress(addr string, port uint32) *core.Address {
	return &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
		Protocol:      core.SocketAddress_TCP,
		Address:       addr,
		PortSpecifier: &core.SocketAddress_PortValue{PortValue: port},
	}}}
}

// ClusterLoadAssignment returns the endpoints of "outbound|<port>||<FQDN>"
// for a client: one LocalityLbEndpoints per region/zone/subzone (in a
// stable order), each endpoint with its health. An address:port appears
// once (grpc-go rejects duplicates). Nil when the service port does not
// exist or the service is a DNS alias (its cluster carries its address
// itself).
//
// A locality's load_balancing_weight is its number of HEALTHY endpoints:
// grpc-go (and gRPC's other xDS clients) pick a locality by weight alone,
// then skip its endpoints that are not HEALTHY, so a weight that counted
// DRAINING or UNHEALTHY endpoints would send the locality's few ready
// endpoints the traffic of those going away. A locality with no HEALTHY
// endpoint must attract nothing, and the two kinds of client get it in
// the shape each handles best (see localityWithoutHealthy).
func (g *Generator) ClusterLoadAssignment(client Client, name string) *endpoint.ClusterLoadAssignment {
	svc, port := g.servicePort(name)
	if svc == nil || svc.Resolution == model.DNSAlias {
		return nil
	}
	eps := g.Discovery.Endpoints(svc.Hostname, port, nil)
	cla := &endpoint.ClusterLoadAssignment{ClusterName: name}
	byLocality := map[model.Locality]*localityGroup{}
	var order []*localityGroup
	seen := make(map[addrPort]struct{}, len(eps))
	for _, ep := range eps {
		key := addrPort{ep.Address, ep.Port}
		if _, dup := seen[key]; dup {
			continue
		}
		seen[key] = struct{}{}
		grp := byLocality[ep.Locality]
		if grp == nil {
			grp = &localityGroup{sortKey: ep.Locality.String(), lle: &endpoint.LocalityLbEndpoints{Locality: &core.Locality{
				Region: ep.Locality.Region, Zone: ep.Locality.Zone, SubZone: ep.Locality.Subzone,
			}}}
			byLocality[ep.Locality] = grp
			order = append(order, grp)
		}
		grp.lle.LbEndpoints = append(grp.lle.LbEndpoints, &endpoint.LbEndpoint{
			HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
				Address: socketAddress(ep.Address, ep.Port),
			}},
			HealthStatus: healthStatus(ep.Health),
		})
		if ep.Health == model.Healthy {
			grp.healthy++
		}
	}
	slices.SortFunc(order, func(a, b *localityGroup) int { return strings.Compare(a.sortKey, b.sortKey) })
	for _, grp := range order {
		if grp.healthy > 0 {
			grp.lle.LoadBalancingWeight = wrapperspb.UInt32(grp.healthy)
		} else if !localityWithoutHealthy(client) {
			continue
		}
		cla.Endpoints = append(cla.Endpoints, grp.lle)
	}
	return cla
}

// addrPort is what makes two endpoints one for a client: grpc-go rejects
// an address:port listed twice.
type addrPort struct {
	addr string
	port uint32
}

// localityGroup gathers the endpoints of one locality while a
// ClusterLoadAssignment is built.
type localityGroup struct {
	lle     *endpoint.LocalityLbEndpoints
	healthy uint32 // its HEALTHY endpoints: the locality's weight
	sortKey string // "region/zone/subzone", computed once for sorting
}

// localityWithoutHealthy says whether a client is sent a locality that
// has no HEALTHY endpoint (with no load_balancing_weight).
//
// gRPC clients are not: grpc-go drops a locality whose weight is 0 or
// unset (logging a warning on every update) and never sends to an
// endpoint that is not HEALTHY, so leaving the locality out changes
// nothing for it, and does not depend on how each gRPC implementation
// treats a weight of 0.
//
// Envoy is: it balances over hosts, not localities (meshpilot's clusters
// do not enable locality-weighted balancing), takes no new requests to
// DRAINING or UNHEALTHY hosts (the clusters' healthy panic threshold is
// 0), and seeing a host as DRAINING lets it drain that host's connections
// rather than drop them. Its validation accepts an unset weight but not 0
// (load_balancing_weight must be at least 1 when set).
func localityWithoutHealthy(c Client) bool { return !c.GRPC }
func healthStatus(h model.Health) core.HealthStatus {
	switch h {
	case model.Healthy:
		return core.HealthStatus_HEALTHY
	case model.Draining:
		return core.HealthStatus_DRAINING
	default:
		return core.HealthStatus_UNHEALTHY
	}
}

// ClusterNames lists every cluster name of every service, in order: what
// a wildcard CDS subscription gets.
func (g *Generator) ClusterNames() []string {
	var out []string
	for _, svc := range g.Discovery.Services() {
		for _, p := range svc.PortsByNumber() {
			out = append(out, model.ClusterName(p.Port, "", svc.Hostname))
		}
	}
	return out
}

// EndpointNames lists every ClusterLoadAssignment name: what a wildcard
// EDS subscription gets (DNS aliases have none).
func (g *Generator) EndpointNames() []string {
	var out []string
	for _, svc := range g.Discovery.Services() {
		if svc.Resolution == model.DNSAlias {
			continue
		}
		for _, p := range svc.PortsByNumber() {
			out = append(out, model.ClusterName(p.Port, "", svc.Hostname))
		}
	}
	return out
}

// Generate returns the resource of a type with that name for a client, or
// nil when there is none.
func (g *Generator) Generate(typeURL string, client Client, name string) proto.Message {
	var m proto.Message
	switch typeURL {
	case ListenerType:
		if l := g.Listener(client, name); l != nil {
			m = l
		}
	case RouteType:
		if r := g.RouteConfiguration(name); r != nil {
			m = r
		}
	case ClusterType:
		if c := g.Cluster(name); c != nil {
			m = c
		}
	case EndpointType:
		if c := g.ClusterLoadAssignment(client, name); c != nil {
			m = c
		}
	}
	return m
}

// validator is what the envoy protos' generated validation offers.
type validator interface{ ValidateAll() error }

// Validate runs the envoy protos' field rules on a generated resource and
// on the messages inside its Any fields, which ValidateAll does not look
// into: a listener's HttpConnectionManagers, a cluster's upstream HTTP
// protocol options. A listener is also held to what grpc-go requires of
// it beyond Envoy's rules (see listener_inbound.go).
func Validate(m proto.Message) error {
	v, ok := m.(validator)
	if !ok {
		return fmt.Errorf("%T has no validation", m)
	}
	if err := v.ValidateAll(); err != nil {
		return err
	}
	switch r := m.(type) {
	case *listener.Listener:
		if r.GetApiListener() != nil {
			_, err := validateHCM("api_listener", r.GetApiListener().GetApiListener())
			return err
		}
		return validateServerListener(r)
	case *cluster.Cluster:
		return validateProtocolOptions(r.GetTypedExtensionProtocolOptions())
	}
	return nil
}

// validateServerListener checks a gRPC server's listener as grpc-go does
// before it ACKs one.
func validateServerListener(l *listener.Listener) error {
	if l.GetAddress().GetSocketAddress() == nil {
		return fmt.Errorf("listener %q: no socket address", l.GetName())
	}
	if len(l.GetListenerFilters()) > 0 || l.GetUseOriginalDst().GetValue() {
		return fmt.Errorf("listener %q: gRPC servers take neither listener_filters nor use_original_dst", l.GetName())
	}
	chains := l.GetFilterChains()
	if l.GetDefaultFilterChain() != nil {
		chains = append(slices.Clip(chains), l.GetDefaultFilterChain())
	}
	if len(chains) == 0 {
		return fmt.Errorf("listener %q: no filter chain", l.GetName())
	}
	for _, fc := range chains {
		if err := validateFilterChain(fc); err != nil {
			return fmt.Errorf("listener %q: filter chain %q: %w", l.GetName(), fc.GetName(), err)
		}
	}
	return nil
}

func validateFilterChain(fc *listener.FilterChain) error {
	if ts := fc.GetTransportSocket(); ts != nil && ts.GetName() != "envoy.transport_sockets.tls" {
		return fmt.Errorf("transport socket %q: gRPC servers know only envoy.transport_sockets.tls", ts.GetName())
	}
	if len(fc.GetFilters()) == 0 {
		return fmt.Errorf("no network filter")
	}
	seen := map[string]bool{}
	for _, f := range fc.GetFilters() {
		if f.GetName() == "" || seen[f.GetName()] {
			return fmt.Errorf("network filter names must be unique and not empty: %q", f.GetName())
		}
		seen[f.GetName()] = true
		h, err := validateHCM("network filter "+f.GetName(), f.GetTypedConfig())
		if err != nil {
			return err
		}
		// A server fails the RPCs a forwarding route matches (UNAVAILABLE).
		for _, vh := range h.GetRouteConfig().GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				if r.GetNonForwardingAction() == nil {
					return fmt.Errorf("network filter %s: route %q of virtual host %q: a server's routes must have non_forwarding_action", f.GetName(), r.GetName(), vh.GetName())
				}
			}
		}
	}
	return nil
}

// validateHCM checks an HttpConnectionManager held in an Any: its field
// rules, and the router filter last, each filter with a typed_config, as
// gRPC clients and servers require.
func validateHCM(where string, a *anypb.Any) (*hcm.HttpConnectionManager, error) {
	h := &hcm.HttpConnectionManager{}
	if err := a.UnmarshalTo(h); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := h.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	fs := h.GetHttpFilters()
	if len(fs) == 0 || fs[len(fs)-1].GetName() != routerFilter.GetName() {
		return nil, fmt.Errorf("%s: http_filters must end with the router", where)
	}
	for _, f := range fs {
		if f.GetTypedConfig() == nil {
			return nil, fmt.Errorf("%s: http filter %q has no typed_config", where, f.GetName())
		}
	}
	return h, nil
}

// validateProtocolOptions checks a cluster's typed_extension_protocol_options:
// Envoy picks the message type by the key (the extension's name), so the
// only key meshpilot writes must hold that type.
func validateProtocolOptions(opts map[string]*anypb.Any) error {
	for key, a := range opts {
		if key != httpProtocolOptionsKey {
			return fmt.Errorf("typed_extension_protocol_options: unknown extension %q", key)
		}
		var o httpoptions.HttpProtocolOptions
		if err := a.UnmarshalTo(&o); err != nil {
			return fmt.Errorf("typed_extension_protocol_options[%q]: %w", key, err)
		}
		if err := o.ValidateAll(); err != nil {
			return fmt.Errorf("typed_extension_protocol_options[%q]: %w", key, err)
		}
	}
	return nil
}
