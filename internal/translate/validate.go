package translate

import (
	"fmt"
	"slices"
	"strings"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbac "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	fault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	rbachttp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tls "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpoptions "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

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
		if ts := r.GetTransportSocket(); ts != nil {
			if err := validateTransportSocket(ts, &tls.UpstreamTlsContext{}); err != nil {
				return fmt.Errorf("cluster %q: %w", r.GetName(), err)
			}
		}
		return validateProtocolOptions(r.GetTypedExtensionProtocolOptions())
	case *route.RouteConfiguration:
		return validateRouteFilterConfigs(r)
	}
	return nil
}

// validateRouteFilterConfigs checks the routes' typed_per_filter_config:
// the only filter meshpilot configures per route is the fault filter,
// which takes an HTTPFault.
func validateRouteFilterConfigs(rc *route.RouteConfiguration) error {
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			for name, a := range r.GetTypedPerFilterConfig() {
				if name != faultFilterName {
					return fmt.Errorf("route %q: typed_per_filter_config for unknown filter %q", r.GetName(), name)
				}
				var f fault.HTTPFault
				if err := a.UnmarshalTo(&f); err != nil {
					return fmt.Errorf("route %q: %s: %w", r.GetName(), name, err)
				}
				if err := f.ValidateAll(); err != nil {
					return fmt.Errorf("route %q: %s: %w", r.GetName(), name, err)
				}
			}
		}
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
	if ts := fc.GetTransportSocket(); ts != nil {
		if err := validateTransportSocket(ts, &tls.DownstreamTlsContext{}); err != nil {
			return err
		}
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
	seen := map[string]bool{}
	for _, f := range fs {
		if f.GetTypedConfig() == nil {
			return nil, fmt.Errorf("%s: http filter %q has no typed_config", where, f.GetName())
		}
		if seen[f.GetName()] {
			return nil, fmt.Errorf("%s: two http filters are called %q", where, f.GetName())
		}
		seen[f.GetName()] = true
		if f.GetTypedConfig().MessageIs(&rbachttp.RBAC{}) {
			if err := validateRBAC(f.GetTypedConfig()); err != nil {
				return nil, fmt.Errorf("%s: http filter %q: %w", where, f.GetName(), err)
			}
		}
	}
	return h, nil
}

// validateRBAC checks an RBAC filter's field rules (ValidateAll does not
// look inside the HttpConnectionManager's Any) and what grpc-go refuses
// of one (gRFC A41): a policy condition, a matcher of a grpc-* header or
// of :scheme, an action other than ALLOW and DENY that it would enforce.
func validateRBAC(a *anypb.Any) error {
	var r rbachttp.RBAC
	if err := a.UnmarshalTo(&r); err != nil {
		return err
	}
	if err := r.ValidateAll(); err != nil {
		return err
	}
	if act := r.GetRules().GetAction(); act != rbac.RBAC_ALLOW && act != rbac.RBAC_DENY {
		return fmt.Errorf("action %v: gRPC enforces ALLOW and DENY only", act)
	}
	for name, p := range r.GetRules().GetPolicies() {
		if p.GetCondition() != nil || p.GetCheckedCondition() != nil {
			return fmt.Errorf("policy %q: gRPC refuses conditions", name)
		}
		var bad []string
		for _, pm := range p.GetPermissions() {
			bad = badPermissionHeaders(pm, bad)
		}
		for _, pr := range p.GetPrincipals() {
			bad = badPrincipalHeaders(pr, bad)
		}
		if len(bad) > 0 {
			return fmt.Errorf("policy %q: gRPC refuses matchers of headers %q", name, bad)
		}
	}
	return nil
}

// grpcRefusedHeader: A41 makes a matcher of this header a validation
// failure.
func grpcRefusedHeader(name string) bool {
	name = strings.ToLower(name)
	return name == ":scheme" || strings.HasPrefix(name, "grpc-")
}

func badPermissionHeaders(p *rbac.Permission, bad []string) []string {
	switch r := p.GetRule().(type) {
	case *rbac.Permission_Header:
		if grpcRefusedHeader(r.Header.GetName()) {
			bad = append(bad, r.Header.GetName())
		}
	case *rbac.Permission_AndRules:
		for _, q := range r.AndRules.GetRules() {
			bad = badPermissionHeaders(q, bad)
		}
	case *rbac.Permission_OrRules:
		for _, q := range r.OrRules.GetRules() {
			bad = badPermissionHeaders(q, bad)
		}
	case *rbac.Permission_NotRule:
		bad = badPermissionHeaders(r.NotRule, bad)
	case *rbac.Permission_UriTemplate:
		bad = append(bad, "(uri_template, which gRPC does not know)")
	}
	return bad
}

func badPrincipalHeaders(p *rbac.Principal, bad []string) []string {
	switch r := p.GetIdentifier().(type) {
	case *rbac.Principal_Header:
		if grpcRefusedHeader(r.Header.GetName()) {
			bad = append(bad, r.Header.GetName())
		}
	case *rbac.Principal_AndIds:
		for _, q := range r.AndIds.GetIds() {
			bad = badPrincipalHeaders(q, bad)
		}
	case *rbac.Principal_OrIds:
		for _, q := range r.OrIds.GetIds() {
			bad = badPrincipalHeaders(q, bad)
		}
	case *rbac.Principal_NotId:
		bad = badPrincipalHeaders(r.NotId, bad)
	}
	return bad
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

// validateTransportSocket checks a TLS transport socket: the only name
// gRPC knows, and the TLS context inside its Any (into which ValidateAll
// does not look) by its field rules.
func validateTransportSocket(ts *core.TransportSocket, ctx interface {
	proto.Message
	validator
}) error {
	if ts.GetName() != tlsTransportSocket {
		return fmt.Errorf("transport socket %q: gRPC knows only %s", ts.GetName(), tlsTransportSocket)
	}
	if err := ts.GetTypedConfig().UnmarshalTo(ctx); err != nil {
		return fmt.Errorf("transport socket: %w", err)
	}
	if err := ctx.ValidateAll(); err != nil {
		return fmt.Errorf("transport socket: %w", err)
	}
	return nil
}
