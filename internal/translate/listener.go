package translate

import (
	"strings"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	fault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	router "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// listenerGenerator builds the API listeners of proxyless gRPC clients:
// the name a client asks for, "<host>:<port>", where host is the FQDN or
// "<name>", "<name>.<namespace>", "<name>.<namespace>.svc" relative to
// the client's namespace (see model.HostnameCandidates). The reply carries
// exactly the requested name.
type listenerGenerator struct{ GeneratorOptions }

func (*listenerGenerator) Type() ResourceType {
	return ResourceType{URL: resource.ListenerType, Short: "LDS", FullState: true}
}

// AllNames: none, and listeners have no wildcard: meshpilot generates API
// listeners for gRPC clients, which name what they want, so Envoy's
// wildcard LDS gets an empty set.
func (*listenerGenerator) AllNames() []string { return nil }

// Generate resolves the name against each candidate hostname in turn: the
// first that is a service decides, so the result depends on every
// candidate up to it (one appearing earlier would change the answer), and
// on the client's namespace when the name is a bare service name.
//
// A gRPC server's inbound listener has a name of its own form (see
// listener_inbound.go).
func (g *listenerGenerator) Generate(c *Client, name string) Result {
	if strings.HasPrefix(name, model.InboundListenerPrefix) {
		return g.inbound(c, name)
	}
	host, port, ok := model.SplitHostPort(name)
	if !ok {
		return Result{}
	}
	var r Result
	if !strings.Contains(host, ".") {
		r.Vary = VaryNamespace
	}
	for _, h := range model.HostnameCandidates(host, c.Namespace, g.suffix()) {
		r.Deps = append(r.Deps, model.ServiceKey(h))
		// A candidate the client may not see is skipped as if absent:
		// the name may then mean a service a later candidate names.
		svc, v := visibleService(g.Discovery, c, h)
		r.Vary |= v
		if svc == nil {
			continue
		}
		if _, ok := svc.PortByNumber(port); ok {
			r.Resource = buildListener(name, svc.Hostname, port)
		}
		break
	}
	return r
}

// buildListener is an API listener whose HttpConnectionManager takes the
// route configuration of the service port over ADS and ends with the
// router filter, as grpc-go requires, after the fault filter.
func buildListener(name string, host model.Hostname, port int32) *listener.Listener {
	rc := model.ClusterName(port, "", host)
	m := &hcm.HttpConnectionManager{
		CodecType:  hcm.HttpConnectionManager_AUTO,
		StatPrefix: rc,
		RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
			ConfigSource:    adsSource,
			RouteConfigName: rc,
		}},
		HttpFilters: []*hcm.HttpFilter{faultFilter, routerFilter},
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

// faultFilter applies the fault injection of a route's VirtualService
// (typed_per_filter_config); empty, it injects nothing. It comes before
// the router, as in istiod's listeners for gRPC clients.
var faultFilter = &hcm.HttpFilter{
	Name:       faultFilterName,
	ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: mustAny(&fault.HTTPFault{})},
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
