package crd

import (
	"fmt"
	"strconv"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshpilot/meshpilot/internal/gwstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// whyGWHostnames is reported on a route's hostnames: a Service parent
// routes its own hostname.
const whyGWHostnames = "a route attached to a Service routes the Service's hostname: hostnames are not read (as in istiod)"

// ConvertHTTPRoute turns an HTTPRoute into the rules it gives the
// traffic to each Service it is attached to, as istiod converts it for
// the mesh: one rule per match (path exact, prefix of whole segments,
// regular expression; headers, query parameters, method), backendRefs
// as weighted destinations, timeouts, retry, and the filters
// RequestHeaderModifier, ResponseHeaderModifier, RequestRedirect,
// URLRewrite and RequestMirror. gRPC clients get the rules as istiod
// serves them, and each field grpc-go does not honour is reported with
// what it does instead, as for a VirtualService; the rest of the route
// applies. Status.Refused is set (and the route's last good version
// stays in force) only for what the API server's validation refuses and
// a folder may hold: a regular expression that is not RE2, a duration
// that is not one.
func ConvertHTTPRoute(obj *gatewayv1.HTTPRoute, o GatewayConvertOptions) *GatewayRoute {
	c := &gwConverter{opts: o, kind: gwstatus.KindHTTPRoute, ns: obj.Namespace, name: obj.Name}
	parents := c.parents(obj.Spec.ParentRefs)
	if len(obj.Spec.Hostnames) > 0 {
		c.ignoreBoth("spec.hostnames", whyGWHostnames)
	}
	var rules []model.HTTPRoute
	specRules := obj.Spec.Rules
	if len(specRules) == 0 {
		// The CRD's default, which a folder's route does not get: one
		// rule of every path, without a backend.
		specRules = []gatewayv1.HTTPRouteRule{{}}
	}
	for i, r := range specRules {
		rules = append(rules, c.httpRule(fmt.Sprintf("spec.rules[%d]", i), i, r)...)
	}
	return c.finish(obj, parents, rules)
}

// httpRule converts one rule into one route per match.
func (c *gwConverter) httpRule(path string, i int, r gatewayv1.HTTPRouteRule) []model.HTTPRoute {
	base := model.HTTPRoute{Name: c.ruleName(r.Name, i)}
	if r.SessionPersistence != nil {
		c.ignoreBoth(path+".sessionPersistence", whyGWSession)
	}
	unsupported := false
	for j, f := range r.Filters {
		fp := fmt.Sprintf("%s.filters[%d]", path, j)
		switch f.Type {
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
			c.status.IgnoreGRPC(fp, whyNoHeaderOps)
			headerOps(f.RequestHeaderModifier, true, &base.Headers)
		case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
			c.status.IgnoreGRPC(fp, whyNoHeaderOps)
			headerOps(f.ResponseHeaderModifier, false, &base.Headers)
		case gatewayv1.HTTPRouteFilterRequestRedirect:
			base.Redirect = c.redirect(fp, f.RequestRedirect)
		case gatewayv1.HTTPRouteFilterURLRewrite:
			base.Rewrite = c.rewrite(fp, f.URLRewrite)
		case gatewayv1.HTTPRouteFilterRequestMirror:
			if f.RequestMirror != nil {
				if m, ok := c.mirror(fp+".requestMirror", f.RequestMirror); ok {
					base.Mirror = append(base.Mirror, m)
				}
			}
		case gatewayv1.HTTPRouteFilterCORS:
			c.ignoreBoth(fp, whyGWCORS)
		default:
			// As istiod: a filter it cannot apply fails the rule rather
			// than letting requests past it.
			why := fmt.Sprintf("%s: filter type %q is not supported: the rule answers 500, the other rules apply", fp, f.Type)
			c.ignoreBoth(fp, why)
			c.notAccepted(gatewayv1.RouteReasonUnsupportedValue, why)
			unsupported = true
		}
	}
	if r.Retry != nil {
		base.Retries = c.retry(path+".retry", r.Retry)
	}
	if t := r.Timeouts; t != nil {
		base.Timeout = c.duration(path+".timeouts.request", t.Request)
		if be := c.duration(path+".timeouts.backendRequest", t.BackendRequest); be != 0 {
			// As istiod: each attempt's bound when the rule retries,
			// else the request's.
			if base.Retries != nil && base.Retries.Attempts > 0 {
				base.Retries.PerTryTimeout = be
				c.status.IgnoreGRPC(path+".timeouts.backendRequest", whyNoPerTry)
			} else {
				base.Timeout = be
			}
		}
	}
	var backends []gwBackend
	for j, b := range r.BackendRefs {
		gb := gwBackend{ref: b.BackendRef}
		for k, f := range b.Filters {
			switch f.Type {
			case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
				headerOps(f.RequestHeaderModifier, true, &gb.headers)
			case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
				headerOps(f.ResponseHeaderModifier, false, &gb.headers)
			default:
				c.ignoreBoth(fmt.Sprintf("%s.backendRefs[%d].filters[%d]", path, j, k), fmt.Sprintf("filter type %q on a backend is not supported: not applied", f.Type))
			}
		}
		backends = append(backends, gb)
	}
	c.answer(path, &base, backends, unsupported)
	matches := r.Matches
	if len(matches) == 0 {
		// The CRD's default (a folder's route does not get it): every
		// path, which ranks as a prefix among the other rules.
		matches = []gatewayv1.HTTPRouteMatch{{}}
	}
	var out []model.HTTPRoute
	for j, m := range matches {
		route := base
		route.Match = []model.HTTPMatch{c.httpMatch(fmt.Sprintf("%s.matches[%d]", path, j), m)}
		out = append(out, route)
	}
	return out
}

// answer gives a rule its destinations, or else the 500 the Gateway API
// asks for when no backend can take its requests.
func (c *gwConverter) answer(path string, base *model.HTTPRoute, backends []gwBackend, unsupported bool) {
	if unsupported {
		base.Route, base.Redirect = nil, nil
		base.DirectResponse = &model.HTTPDirectResponse{Status: 500}
		return
	}
	if base.Redirect != nil {
		return
	}
	dests, ok := c.destinations(path, backends)
	if !ok {
		base.DirectResponse = &model.HTTPDirectResponse{Status: 500}
		c.status.IgnoreGRPC(path+".backendRefs", whyGWGRPCNoBackend)
		return
	}
	base.Route = dests
}

// httpMatch converts one match. A path prefix is kept as written but for
// a trailing "/" (the Gateway API ignores it); the route generator
// matches it by whole segments.
func (c *gwConverter) httpMatch(path string, m gatewayv1.HTTPRouteMatch) model.HTTPMatch {
	var out model.HTTPMatch
	kind, value := gatewayv1.PathMatchPathPrefix, "/"
	if p := m.Path; p != nil {
		if p.Type != nil {
			kind = *p.Type
		}
		if p.Value != nil {
			value = *p.Value
		}
	}
	switch kind {
	case gatewayv1.PathMatchExact:
		out.URI = &model.StringMatch{Kind: model.MatchExact, Value: value}
	case gatewayv1.PathMatchRegularExpression:
		if hm, ok := c.headerMatch(path+".path", "", value, true); ok {
			out.URI = &hm.StringMatch
		}
	default:
		if value != "/" {
			value = strings.TrimSuffix(value, "/")
		}
		out.URI = &model.StringMatch{Kind: model.MatchPrefix, Value: value}
	}
	for i, h := range m.Headers {
		regex := h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression
		if hm, ok := c.headerMatch(fmt.Sprintf("%s.headers[%d]", path, i), string(h.Name), h.Value, regex); ok {
			out.Headers = append(out.Headers, hm)
		}
	}
	if m.Method != nil {
		c.status.IgnoreGRPC(path+".method", whyGWGRPCMethod)
		out.Headers = append(out.Headers, model.HeaderMatch{Name: ":method", StringMatch: model.StringMatch{Kind: model.MatchExact, Value: string(*m.Method)}})
	}
	sortHeaderMatches(out.Headers)
	if len(m.QueryParams) > 0 {
		c.status.IgnoreGRPC(path+".queryParams", whyGRPCNoQuery)
		for i, q := range m.QueryParams {
			regex := q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression
			// Query parameter names are case-sensitive: kept as written.
			if hm, ok := c.headerMatch(fmt.Sprintf("%s.queryParams[%d]", path, i), "", q.Value, regex); ok {
				hm.Name = string(q.Name)
				out.QueryParams = append(out.QueryParams, hm)
			}
		}
		sortHeaderMatches(out.QueryParams)
	}
	return out
}

// redirect converts a RequestRedirect filter (Envoy only: grpc-go
// cannot redirect).
func (c *gwConverter) redirect(path string, f *gatewayv1.HTTPRequestRedirectFilter) *model.HTTPRedirect {
	c.status.IgnoreGRPC(path, whyGRPCNoRedirect)
	out := &model.HTTPRedirect{}
	if f == nil {
		return out
	}
	if f.Hostname != nil {
		out.Authority = string(*f.Hostname)
	}
	out.Code = 302 // the CRD's default
	if f.StatusCode != nil {
		out.Code = uint32(*f.StatusCode)
	}
	if p := f.Path; p != nil && p.Type == gatewayv1.FullPathHTTPPathModifier && p.ReplaceFullPath != nil {
		out.URI = *p.ReplaceFullPath
	}
	if p := f.Path; p != nil && p.Type == gatewayv1.PrefixMatchHTTPPathModifier && p.ReplacePrefixMatch != nil {
		out.PrefixRewrite = *p.ReplacePrefixMatch
	}
	if f.Scheme != nil {
		out.Scheme = *f.Scheme
	}
	// Without a port the Gateway API keeps the request's, but a new
	// scheme takes its own default port, as istiod reads it.
	switch {
	case f.Port != nil:
		out.Port = uint32(*f.Port)
	case f.Scheme == nil:
		out.PortFromRequest = true
	}
	return out
}

// rewrite converts a URLRewrite filter as istiod does (Envoy only): a
// prefix replaced, or the whole path through a regular expression, and
// the host.
func (c *gwConverter) rewrite(path string, f *gatewayv1.HTTPURLRewriteFilter) *model.HTTPRewrite {
	c.status.IgnoreGRPC(path, whyGRPCNoRewrite)
	if f == nil {
		return nil
	}
	out := &model.HTTPRewrite{}
	if p := f.Path; p != nil {
		switch {
		case p.Type == gatewayv1.PrefixMatchHTTPPathModifier && p.ReplacePrefixMatch != nil:
			out.URI = strings.TrimSuffix(*p.ReplacePrefixMatch, "/")
			if out.URI == "" {
				out.URI = "/"
			}
		case p.Type == gatewayv1.FullPathHTTPPathModifier && p.ReplaceFullPath != nil:
			out.RegexMatch, out.RegexSubstitute = "/.*", *p.ReplaceFullPath
		}
	}
	if f.Hostname != nil {
		out.Authority = string(*f.Hostname)
	}
	if *out == (model.HTTPRewrite{}) {
		return nil
	}
	return out
}

// retry converts a rule's retry as istiod does: attempts (2 when unset)
// on connection failures and the listed HTTP status codes, with the
// backoff.
func (c *gwConverter) retry(path string, r *gatewayv1.HTTPRouteRetry) *model.HTTPRetry {
	out := &model.HTTPRetry{Attempts: 2}
	if r.Attempts != nil {
		out.Attempts = int32(*r.Attempts)
	}
	if out.Attempts == 0 {
		return out
	}
	on := []string{"connect-failure", "refused-stream", "unavailable", "cancelled"}
	for _, code := range r.Codes {
		on = append(on, strconv.Itoa(int(code)))
	}
	out.RetryOn = strings.Join(on, ",")
	if len(r.Codes) > 0 {
		c.status.IgnoreGRPC(path+".codes", whyGWGRPCRetryCodes)
	}
	out.Backoff = c.duration(path+".backoff", r.Backoff)
	return out
}
