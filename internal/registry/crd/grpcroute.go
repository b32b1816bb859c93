package crd

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshpilot/meshpilot/internal/gwstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// ConvertGRPCRoute turns a GRPCRoute into the rules it gives the traffic
// to each Service it is attached to, as istiod converts it for the mesh:
// a method match becomes a match of the path "/<service>/<method>"
// (exact, the service's prefix "/<service>/", or a regular expression),
// header matches exact or regular expressions, backendRefs weighted
// destinations, and the filters RequestHeaderModifier,
// ResponseHeaderModifier (Envoy only) and RequestMirror (Envoy only).
func ConvertGRPCRoute(obj *gatewayv1.GRPCRoute, o GatewayConvertOptions) *GatewayRoute {
	c := &gwConverter{opts: o, kind: gwstatus.KindGRPCRoute, ns: obj.Namespace, name: obj.Name}
	parents := c.parents(obj.Spec.ParentRefs)
	if len(obj.Spec.Hostnames) > 0 {
		c.ignoreBoth("spec.hostnames", whyGWHostnames)
	}
	var rules []model.HTTPRoute
	for i, r := range obj.Spec.Rules {
		rules = append(rules, c.grpcRule(fmt.Sprintf("spec.rules[%d]", i), i, r)...)
	}
	return c.finish(obj, parents, rules)
}

func (c *gwConverter) grpcRule(path string, i int, r gatewayv1.GRPCRouteRule) []model.HTTPRoute {
	base := model.HTTPRoute{Name: c.ruleName(r.Name, i)}
	if r.SessionPersistence != nil {
		c.ignoreBoth(path+".sessionPersistence", whyGWSession)
	}
	unsupported := false
	for j, f := range r.Filters {
		fp := fmt.Sprintf("%s.filters[%d]", path, j)
		switch f.Type {
		case gatewayv1.GRPCRouteFilterRequestHeaderModifier:
			c.status.IgnoreGRPC(fp, whyNoHeaderOps)
			headerOps(f.RequestHeaderModifier, true, &base.Headers)
		case gatewayv1.GRPCRouteFilterResponseHeaderModifier:
			c.status.IgnoreGRPC(fp, whyNoHeaderOps)
			headerOps(f.ResponseHeaderModifier, false, &base.Headers)
		case gatewayv1.GRPCRouteFilterRequestMirror:
			if f.RequestMirror != nil {
				if m, ok := c.mirror(fp+".requestMirror", f.RequestMirror); ok {
					base.Mirror = append(base.Mirror, m)
				}
			}
		default:
			why := fmt.Sprintf("%s: filter type %q is not supported: the rule answers 500, the other rules apply", fp, f.Type)
			c.ignoreBoth(fp, why)
			c.notAccepted(gatewayv1.RouteReasonUnsupportedValue, why)
			unsupported = true
		}
	}
	var backends []gwBackend
	for j, b := range r.BackendRefs {
		gb := gwBackend{ref: b.BackendRef}
		for k, f := range b.Filters {
			switch f.Type {
			case gatewayv1.GRPCRouteFilterRequestHeaderModifier:
				headerOps(f.RequestHeaderModifier, true, &gb.headers)
			case gatewayv1.GRPCRouteFilterResponseHeaderModifier:
				headerOps(f.ResponseHeaderModifier, false, &gb.headers)
			default:
				c.ignoreBoth(fmt.Sprintf("%s.backendRefs[%d].filters[%d]", path, j, k), fmt.Sprintf("filter type %q on a backend is not supported: not applied", f.Type))
			}
		}
		backends = append(backends, gb)
	}
	c.answer(path, &base, backends, unsupported)
	if len(r.Matches) == 0 {
		return []model.HTTPRoute{base}
	}
	var out []model.HTTPRoute
	for j, m := range r.Matches {
		mp := fmt.Sprintf("%s.matches[%d]", path, j)
		route := base
		var match model.HTTPMatch
		if m.Method != nil {
			match.URI = c.grpcMethod(mp+".method", m.Method)
		}
		for k, h := range m.Headers {
			regex := h.Type != nil && *h.Type == gatewayv1.GRPCHeaderMatchRegularExpression
			if hm, ok := c.headerMatch(fmt.Sprintf("%s.headers[%d]", mp, k), string(h.Name), h.Value, regex); ok {
				match.Headers = append(match.Headers, hm)
			}
		}
		sortHeaderMatches(match.Headers)
		route.Match = []model.HTTPMatch{match}
		out = append(out, route)
	}
	return out
}

// grpcMethod converts a method match into a path match as istiod's
// createGRPCURIMatch does.
func (c *gwConverter) grpcMethod(path string, m *gatewayv1.GRPCMethodMatch) *model.StringMatch {
	svc, method := "", ""
	if m.Service != nil {
		svc = *m.Service
	}
	if m.Method != nil {
		method = *m.Method
	}
	regex := m.Type != nil && *m.Type == gatewayv1.GRPCMethodMatchRegularExpression
	var out model.StringMatch
	switch {
	case svc == "" && method == "":
		return nil
	case method == "" && !regex:
		out = model.StringMatch{Kind: model.MatchPrefix, Value: "/" + svc + "/"}
	case method == "":
		out = model.StringMatch{Kind: model.MatchRegex, Value: "/" + svc + "/.+"}
	case svc == "":
		out = model.StringMatch{Kind: model.MatchRegex, Value: "/[^/]+/" + method}
	case !regex:
		out = model.StringMatch{Kind: model.MatchExact, Value: "/" + svc + "/" + method}
	default:
		out = model.StringMatch{Kind: model.MatchRegex, Value: "/" + svc + "/" + method}
	}
	if out.Kind == model.MatchRegex {
		if _, err := regexp.Compile(out.Value); err != nil {
			c.status.RefuseAt(path, "not an RE2 regular expression: "+err.Error())
			return nil
		}
	}
	return &out
}

// sortHeaderMatches orders matches by name, as the route generator's
// output is compared.
func sortHeaderMatches(h []model.HeaderMatch) {
	slices.SortStableFunc(h, func(a, b model.HeaderMatch) int { return cmp.Compare(a.Name, b.Name) })
}
