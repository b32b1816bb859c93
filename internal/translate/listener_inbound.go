package translate

import (
	"slices"
	"strconv"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshpilot/meshpilot/internal/model"
)

// A gRPC xDS server (gRFC A36) asks for the listener named by its
// bootstrap's server_listener_resource_name_template, which meshpilot's
// bootstrap sets to Istio's "xds.istio.io/grpc/lds/inbound/%s"; grpc-go
// fills in the address it listens on, as net.Listener.Addr prints it:
// "10.0.0.7:8080", "0.0.0.0:8080", "[::]:8080". Until the server has the
// listener it accepts connections and closes them at once (NOT_SERVING).
//
// What grpc-go v1.85 requires of the listener
// (internal/xds/xdsclient/xdsresource/unmarshal_lds.go, filter_chain.go,
// internal/xds/server/listener_wrapper.go); a failed check NACKs unless
// said otherwise:
//   - no api_listener (one makes it a client listener: NOT_SERVING), no
//     listener_filters, use_original_dst unset or false;
//   - address a socket_address whose address equals the host the server
//     listens on, as SplitHostPort prints it ("::" for "[::]"), and whose
//     port equals its port or is 0; otherwise the listener is ACKed and
//     the server stays NOT_SERVING;
//   - at least one usable filter chain or a default_filter_chain. Chains
//     matching on destination_port, server_names, application_protocols
//     or a transport_protocol other than "raw_buffer" are dropped
//     silently; two chains with the same match NACK;
//   - in a chain, network filters with unique non-empty names and a
//     typed_config; the first HttpConnectionManager is used, and only it
//     may come (filters after it are checked, not run); a transport_socket,
//     when present, is "envoy.transport_sockets.tls" with a
//     DownstreamTlsContext;
//   - in the HttpConnectionManager, http_filters that grpc-go knows for
//     servers, ending with the router (terminal) filter, xff_num_trusted_hops
//     0, and either RDS over ADS or an inline route_config, checked as a
//     client's route configuration;
//   - at RPC time, a route whose action is not non_forwarding_action fails
//     the RPCs it matches with UNAVAILABLE, as does matching no route.
//
// istiod (pilot/pkg/networking/grpcgen/lds.go, buildInboundListeners)
// answers every address form the same way: the port alone is looked up
// among the workload's service ports (the target ports of the services
// that select it), the listener's address is the name's, and a port that
// no service of the workload serves gets no listener (a warning in its
// log), so such a server never becomes SERVING. The listener has one
// filter chain without match criteria, "inbound-plaintext" (or
// "inbound-mtls" with a DownstreamTlsContext under STRICT mTLS; PERMISSIVE
// is served as plaintext, since grpc-go cannot match TLS against plain
// connections), holding an HttpConnectionManager with an inline route
// configuration "inbound": one virtual host for "*" whose route "/" has
// non_forwarding_action, and the router filter last. Inline, not RDS: a
// server then needs nothing more than its listener to serve
// (grpc/grpc-go#4924).

// inbound is the listener generator's answer to a gRPC server. One name
// ("xds.istio.io/grpc/lds/inbound/[::]:8080") is asked for by every server
// listening on that port, so the answer varies by the client's namespace
// and addresses. It depends on the endpoints of every service of the
// namespace, and on the namespace's set of services: any of them may come
// to hold the server's address on the port, or stop holding it; once
// served, on the security policies that could select the workload
// (inboundSecurity).
func (g *listenerGenerator) inbound(c *Client, name string) Result {
	host, port, ok := model.ParseInboundListenerName(name)
	if !ok || c.Namespace == "" || len(c.IPs) == 0 {
		return Result{} // no change of the model would give it a listener
	}
	t := findInboundTargets(g.Discovery, c, port)
	r := Result{Vary: VaryNamespace | VaryAddresses}
	r.Deps = make([]model.ConfigKey, 0, len(t.Considered)+1)
	r.Deps = append(r.Deps, model.NamespaceKey(c.Namespace))
	for _, h := range t.Considered {
		r.Deps = append(r.Deps, model.EndpointsKey(h))
	}
	if len(t.Serving) > 0 {
		var sec inboundSecurity
		sec, r.Deps = g.inboundSecurity(c.Namespace, t, port, r.Deps)
		r.Resource = buildInboundListener(name, host, port, sec)
	}
	return r
}

// inboundTargets is what the model says about a gRPC server's port: the
// services whose endpoints put the client's workload behind that port,
// and every service that was looked at to find them.
type inboundTargets struct {
	// Serving lists, by hostname, the services with an endpoint at one of
	// the client's addresses on the port. Empty: istiod serves no listener.
	Serving []model.Hostname
	// Considered lists the services of the client's namespace, whose
	// endpoints were searched: one of them gaining or losing the workload
	// changes the answer.
	Considered []model.Hostname
	// MutualTLS: the workload is labelled for mutual TLS (inboundMTLS).
	MutualTLS bool
	// Labels are the workload's, those of its first serving endpoint (a
	// Pod's endpoints all carry its labels): the security policies that
	// select it are chosen by them.
	Labels map[string]string
	// ServiceNames are the names of the Serving services, which an
	// AuthorizationPolicy's targetRefs name.
	ServiceNames []string
}

// tlsModeLabel is the label Istio's injection puts on workloads that
// take part in the mesh's mutual TLS.
const tlsModeLabel = "security.istio.io/tlsMode"

// inboundMTLS says whether a gRPC server's workload is labelled for
// mutual TLS (its endpoints' labels), which raises PERMISSIVE, the mode
// without any PeerAuthentication, to STRICT (grpcServerMTLS). Without a
// policy this label alone decides, as in istiod, so a server opts in by
// its own label and none is asked for certificates it was not given.
func inboundMTLS(ep *model.Endpoint) bool {
	return ep.Labels[tlsModeLabel] == "istio"
}

// findInboundTargets finds the services that serve port on the client's
// workload, as istiod's proxy service targets do: services of the
// client's namespace (a Kubernetes Service selects Pods of its own
// namespace only), whose endpoints hold one of the client's addresses on
// that port, whatever their health (a server not ready yet must still
// start serving to become ready). The port is the workload's, the
// endpoint's, not the service's: a server listens on the target port.
//
// It reads every service of the model to find the namespace's: the model
// has no index by namespace or by endpoint address. The result is cached
// until one of its keys changes, so this is paid once per server and
// change of its namespace.
func findInboundTargets(d model.ServiceDiscovery, c *Client, port int32) inboundTargets {
	var t inboundTargets
	for _, def := range d.Services() {
		// A host several namespaces define: this namespace's definition.
		svc := def
		if len(def.Others) > 0 {
			i := slices.IndexFunc(def.Others, func(o *model.Service) bool { return o.Namespace == c.Namespace })
			if def.Namespace != c.Namespace && i >= 0 {
				svc = def.Others[i]
			}
		}
		if svc.Namespace != c.Namespace || svc.Resolution == model.DNSAlias {
			continue
		}
		t.Considered = append(t.Considered, svc.Hostname)
		if ep := servingEndpoint(d, svc, c.IPs, uint32(port)); ep != nil {
			if len(t.Serving) == 0 {
				t.Labels = ep.Labels
			}
			t.Serving = append(t.Serving, svc.Hostname)
			t.ServiceNames = append(t.ServiceNames, svc.Name)
			t.MutualTLS = t.MutualTLS || inboundMTLS(ep)
		}
	}
	return t
}

// servingEndpoint returns the service's endpoint at one of ips on port,
// or nil.
func servingEndpoint(d model.ServiceDiscovery, svc *model.Service, ips []string, port uint32) *model.Endpoint {
	for _, p := range svc.PortsByNumber() {
		for _, ep := range model.EndpointsOf(d, svc, p.Port, nil) {
			if ep.Port == port && slices.Contains(ips, ep.Address) {
				return ep
			}
		}
	}
	return nil
}

// buildInboundListener builds the listener of a gRPC server listening on
// host:port, as istiod does: the name's address, one filter chain,
// plaintext or, under mutual TLS (grpcServerMTLS), "inbound-mtls" with a
// DownstreamTlsContext that requires a client certificate, its
// certificates from the bootstrap's "default" provider instance
// (serverTLSContext), as istiod's buildInboundFilterChains does; the
// RBAC filters of sec before the router.
func buildInboundListener(name, host string, port int32, sec inboundSecurity) *listener.Listener {
	chain := inboundFilterChain("plaintext", inboundStatPrefix(host, port), sec.Filters)
	if sec.MutualTLS {
		chain = inboundFilterChain("mtls", inboundStatPrefix(host, port), sec.Filters)
		chain.TransportSocket = transportSocket(serverTLSContext())
	}
	return &listener.Listener{
		Name:         name,
		Address:      socketAddress(host, uint32(port)),
		FilterChains: []*listener.FilterChain{chain},
	}
}

// inboundStatPrefix names a server's statistics as Istio names an inbound
// listener's: "inbound_<address>_<port>". grpc-go ignores it; Envoy's
// validation requires one.
func inboundStatPrefix(host string, port int32) string {
	return "inbound_" + host + "_" + strconv.Itoa(int(port))
}

// inboundFilterChain is a chain without match criteria, called
// "inbound-<kind>" as istiod calls it, that runs the authorization
// filters and routes every RPC to the server itself.
func inboundFilterChain(kind, statPrefix string, authz []*hcm.HttpFilter) *listener.FilterChain {
	m := &hcm.HttpConnectionManager{
		CodecType:  hcm.HttpConnectionManager_AUTO,
		StatPrefix: statPrefix,
		RouteSpecifier: &hcm.HttpConnectionManager_RouteConfig{RouteConfig: &route.RouteConfiguration{
			Name: "inbound",
			VirtualHosts: []*route.VirtualHost{{
				Name:    "inbound",
				Domains: []string{"*"},
				Routes: []*route.Route{{
					Match:  &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
					Action: &route.Route_NonForwardingAction{NonForwardingAction: &route.NonForwardingAction{}},
				}},
			}},
		}},
		// Authorization (gRPC's RBAC filters) goes before the router.
		HttpFilters: append(slices.Clip(authz), routerFilter),
	}
	a, err := anypb.New(m)
	if err != nil {
		panic(err) // marshalling a well-formed message cannot fail
	}
	return &listener.FilterChain{
		Name: "inbound-" + kind,
		Filters: []*listener.Filter{{
			Name:       "inbound-hcm-" + kind,
			ConfigType: &listener.Filter_TypedConfig{TypedConfig: a},
		}},
	}
}
