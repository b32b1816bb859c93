package translate

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	commonfault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	fault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
)

// faultFilterName names the fault filter in a listener's filters and in a
// route's typed_per_filter_config: grpc-go applies a route's fault
// config to the filter of that name.
const faultFilterName = "envoy.filters.http.fault"

// virtualService returns the VirtualService a client follows to a
// service, adding its key to deps and what the answer varies by.
func (g *routeGenerator) virtualService(c *Client, svc *model.Service, deps []model.ConfigKey) (*model.VirtualService, []model.ConfigKey, Vary) {
	if g.Routes == nil {
		return nil, deps, 0
	}
	deps = append(deps, model.VirtualServiceKey(svc.Hostname))
	vs, byClient := g.Routes.VirtualServiceFor(svc.Hostname, c.Namespace)
	var vary Vary
	if byClient {
		vary = VaryNamespace
	}
	if vs == nil {
		return nil, deps, vary
	}
	// gRPC clients and Envoy get a VirtualService's routes in two forms
	// (the timeout, what grpc-go does not do).
	vary |= VaryKind
	return vs, deps, vary
}

// vsRoutes builds a VirtualService's routes for one port of a service, as
// istiod does for a sidecar's or a proxyless client's outbound route:
// one route per match, in order. None when no route applies to the port,
// and then the service's default route stands.
func (g *routeGenerator) vsRoutes(c *Client, svc *model.Service, port int32, vs *model.VirtualService, deps []model.ConfigKey) ([]*route.Route, []model.ConfigKey, Vary) {
	var (
		out  []*route.Route
		vary Vary
	)
	for i := range vs.HTTP {
		hr := &vs.HTTP[i]
		var action *route.Route
		matches := hr.Match
		if len(matches) == 0 {
			matches = []model.HTTPMatch{{}}
		}
		for j := range matches {
			m := &matches[j]
			if m.Port != 0 && m.Port != port {
				continue
			}
			// As istiod: a match for other clients is left out of this
			// client's routes, which then depend on what it checks.
			if m.SourceNamespace != "" {
				vary |= VaryNamespace
			}
			if len(m.SourceLabels) > 0 {
				vary |= VaryLabels
			}
			if !m.AppliesTo(c.Namespace, c.labels) {
				continue
			}
			if action == nil {
				var v Vary
				action, deps, v = g.vsAction(c, svc, port, hr, deps)
				vary |= v
				if vs.Gateway {
					gatewayAction(action)
				}
			}
			for _, rm := range routeMatches(m, vs.Gateway, c.GRPC) {
				r := &route.Route{
					Name:                    action.Name,
					Match:                   rm,
					Action:                  action.Action,
					TypedPerFilterConfig:    action.TypedPerFilterConfig,
					RequestHeadersToAdd:     action.RequestHeadersToAdd,
					RequestHeadersToRemove:  action.RequestHeadersToRemove,
					ResponseHeadersToAdd:    action.ResponseHeadersToAdd,
					ResponseHeadersToRemove: action.ResponseHeadersToRemove,
				}
				if vs.Gateway {
					gatewayRewrite(r)
				}
				out = append(out, r)
				if catchAll(r.Match) {
					// As istiod: no request gets past a route that
					// matches every request, so the routes after it are
					// not sent.
					return out, deps, vary
				}
			}
		}
	}
	return out, deps, vary
}

// catchAll reports whether a route's match takes every request, as
// istiod's IsCatchAllRoute tells: the path "/" (or the regex ".*") and
// no header or query condition.
func catchAll(m *route.RouteMatch) bool {
	switch p := m.GetPathSpecifier().(type) {
	case *route.RouteMatch_Prefix:
		if p.Prefix != "/" {
			return false
		}
	case *route.RouteMatch_SafeRegex:
		if p.SafeRegex.GetRegex() != ".*" {
			return false
		}
	default:
		return false
	}
	return len(m.GetHeaders()) == 0 && len(m.GetQueryParameters()) == 0
}

// vsAction builds what a route does (its Match left empty), shared by the
// routes of its matches.
func (g *routeGenerator) vsAction(c *Client, svc *model.Service, port int32, hr *model.HTTPRoute, deps []model.ConfigKey) (*route.Route, []model.ConfigKey, Vary) {
	out := &route.Route{Name: hr.Name}
	var vary Vary
	// grpc-go ignores header changes: only Envoy gets them.
	envoy := !c.GRPC
	var authority string
	if envoy && hr.Headers != nil {
		ops := headerOps(hr.Headers)
		out.RequestHeadersToAdd, out.RequestHeadersToRemove = ops.requestAdd, ops.requestRemove
		out.ResponseHeadersToAdd, out.ResponseHeadersToRemove = ops.responseAdd, ops.responseRemove
		authority = ops.authority
	}
	if hr.Fault != nil {
		out.TypedPerFilterConfig = map[string]*anypb.Any{faultFilterName: mustAny(faultConfig(hr.Fault))}
	}
	switch {
	case hr.Redirect != nil:
		out.Action = redirectAction(hr.Redirect, port)
		return out, deps, vary
	case hr.DirectResponse != nil && len(hr.Route) == 0:
		out.Action = &route.Route_DirectResponse{DirectResponse: &route.DirectResponseAction{
			Status: hr.DirectResponse.Status,
			Body:   &core.DataSource{Specifier: &core.DataSource_InlineString{InlineString: hr.DirectResponse.Body}},
		}}
		return out, deps, vary
	}
	a := &route.RouteAction{}
	// to adds a destination's hash policy to the route, as istiod does
	// (HashForHTTPDestination): the consistent hash of the rule the
	// client follows to the destination, for its subset, and for its
	// port only when the destination names one.
	to := func(d model.RouteDestination) string {
		name, _, dst, ds, dv := g.destinationCluster(c, svc, port, d, deps)
		deps = ds
		vary |= dv
		if dst != nil {
			rule, ds, v := g.ruleFor(c, dst, deps)
			deps = ds
			hash, hv := hashPolicy(rule.HashFor(d.Port, d.Subset), c)
			a.HashPolicy = append(a.HashPolicy, hash...)
			vary |= v | hv
		}
		return name
	}
	var destAuthority string
	if len(hr.Route) == 1 {
		a.ClusterSpecifier = &route.RouteAction_Cluster{Cluster: to(hr.Route[0])}
		if h := hr.Route[0].Headers; envoy && h != nil {
			// As istiod: a lone destination's changes join the route's.
			ops := headerOps(h)
			out.RequestHeadersToAdd = append(out.RequestHeadersToAdd, ops.requestAdd...)
			out.RequestHeadersToRemove = append(out.RequestHeadersToRemove, ops.requestRemove...)
			out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, ops.responseAdd...)
			out.ResponseHeadersToRemove = append(out.ResponseHeadersToRemove, ops.responseRemove...)
			destAuthority = ops.authority
		}
	} else {
		wc := &route.WeightedCluster{}
		for _, d := range hr.Route {
			if d.Weight == 0 {
				// As istiod: a destination without weight among others
				// gets nothing (grpc-go would skip it too).
				continue
			}
			cw := &route.WeightedCluster_ClusterWeight{Name: to(d), Weight: wrapperspb.UInt32(uint32(d.Weight))}
			if envoy && d.Headers != nil {
				ops := headerOps(d.Headers)
				cw.RequestHeadersToAdd, cw.RequestHeadersToRemove = ops.requestAdd, ops.requestRemove
				cw.ResponseHeadersToAdd, cw.ResponseHeadersToRemove = ops.responseAdd, ops.responseRemove
				if ops.authority != "" {
					cw.HostRewriteSpecifier = &route.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: ops.authority}
				}
			}
			wc.Clusters = append(wc.Clusters, cw)
		}
		a.ClusterSpecifier = &route.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	// grpc-go neither rewrites nor mirrors requests: gRPC clients get the
	// route without them, where istiod sends what grpc-go ignores.
	if rw := hr.Rewrite; rw != nil && envoy {
		switch {
		case rw.RegexMatch != "":
			a.RegexRewrite = &matcher.RegexMatchAndSubstitute{Pattern: &matcher.RegexMatcher{Regex: rw.RegexMatch}, Substitution: rw.RegexSubstitute}
		case rw.URI != "":
			a.PrefixRewrite = rw.URI
		}
		if rw.Authority != "" {
			authority = rw.Authority
		}
	}
	// The route's authority (a rewrite's over a header change's) wins
	// over a lone destination's, as istiod orders them.
	if authority = cmp.Or(authority, destAuthority); authority != "" {
		a.HostRewriteSpecifier = &route.RouteAction_HostRewriteLiteral{HostRewriteLiteral: authority}
	}
	for i := 0; envoy && i < len(hr.Mirror); i++ {
		m := &hr.Mirror[i]
		name, _, _, ds, dv := g.destinationCluster(c, svc, port, m.Destination, deps)
		deps = ds
		vary |= dv
		a.RequestMirrorPolicies = append(a.RequestMirrorPolicies, &route.RouteAction_RequestMirrorPolicy{
			Cluster:         name,
			RuntimeFraction: &core.RuntimeFractionalPercent{DefaultValue: millionths(m.Percent)},
			TraceSampled:    wrapperspb.Bool(false),
		})
	}
	setTimeout(a, hr.Timeout, c.GRPC)
	retries := hr.Retries
	if retries == nil {
		retries = g.MeshSettings().DefaultHTTPRetry
	}
	a.RetryPolicy = retryPolicy(retries)
	if len(hr.Route) == 1 && len(a.HashPolicy) > 0 && a.RetryPolicy != nil {
		// As istiod: a retry keeps to the hashed host rather than
		// preferring another.
		a.RetryPolicy.RetryHostPredicate = nil
	}
	out.Action = &route.Route_Route{Route: a}
	return out, deps, vary
}

// setTimeout sets a route's timeout as istiod does: for gRPC clients as
// max_stream_duration (grpc-go reads nothing else), for Envoy as the
// route timeout and the grpc-timeout header's maximum; 0 is none.
func setTimeout(a *route.RouteAction, d time.Duration, grpc bool) {
	t := durationpb.New(d)
	if grpc {
		a.MaxStreamDuration = &route.RouteAction_MaxStreamDuration{MaxStreamDuration: t}
		return
	}
	a.Timeout = t
	a.MaxGrpcTimeout = t //nolint:staticcheck // istiod still sets it: max_stream_duration regressed in Envoy
}

// destinationCluster names the cluster of a destination,
// "outbound|<port>|<subset>|<host>", and returns its port and service
// (nil when the host is not a service the client may see: a destination
// its exportTo hides leads, for that client, nowhere, as an unknown
// host's). Without a port, Istio takes the destination service's only
// port, else the route's; looking at another service makes the route
// depend on its definition.
func (g *routeGenerator) destinationCluster(c *Client, svc *model.Service, port int32, d model.RouteDestination, deps []model.ConfigKey) (string, int32, *model.Service, []model.ConfigKey, Vary) {
	dst := svc
	var vary Vary
	if d.Host != svc.Hostname {
		deps = append(deps, model.ServiceKey(d.Host))
		dst, vary = visibleService(g.Discovery, c, d.Host)
	}
	p := d.Port
	if p == 0 {
		p = port
		if dst != nil && dst != svc && len(dst.Ports) == 1 {
			p = dst.Ports[0].Port
		}
	}
	return model.ClusterName(p, d.Subset, d.Host), p, dst, deps, vary
}

// routeMatch converts a match as istiod does; a gRPC method's path is
// "/pkg.Service/Method".
func routeMatch(m *model.HTTPMatch) *route.RouteMatch {
	out := &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}}
	if u := m.URI; u != nil {
		switch u.Kind {
		case model.MatchExact:
			out.PathSpecifier = &route.RouteMatch_Path{Path: u.Value}
		case model.MatchPrefix:
			out.PathSpecifier = &route.RouteMatch_Prefix{Prefix: u.Value}
		case model.MatchRegex:
			out.PathSpecifier = &route.RouteMatch_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: u.Value}}
		}
	}
	if m.IgnoreURICase {
		out.CaseSensitive = wrapperspb.Bool(false)
	}
	for _, h := range m.Headers {
		hm := &route.HeaderMatcher{Name: h.Name, InvertMatch: h.Invert}
		if h.Kind == model.MatchPresent {
			hm.HeaderMatchSpecifier = &route.HeaderMatcher_PresentMatch{PresentMatch: true}
		} else {
			hm.HeaderMatchSpecifier = &route.HeaderMatcher_StringMatch{StringMatch: stringMatcher(h.StringMatch)}
			// As istiod: a request without the header does not
			// match the condition, so it meets an inverted one.
			hm.TreatMissingHeaderAsEmpty = h.Invert
		}
		out.Headers = append(out.Headers, hm)
	}
	for _, q := range m.QueryParams {
		qm := &route.QueryParameterMatcher{Name: q.Name}
		if q.Kind == model.MatchPresent {
			qm.QueryParameterMatchSpecifier = &route.QueryParameterMatcher_PresentMatch{PresentMatch: true}
		} else {
			qm.QueryParameterMatchSpecifier = &route.QueryParameterMatcher_StringMatch{StringMatch: stringMatcher(q.StringMatch)}
		}
		out.QueryParameters = append(out.QueryParameters, qm)
	}
	return out
}

func stringMatcher(s model.StringMatch) *matcher.StringMatcher {
	switch s.Kind {
	case model.MatchPrefix:
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Prefix{Prefix: s.Value}}
	case model.MatchRegex:
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: s.Value}}}
	}
	return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: s.Value}}
}

// faultConfig is a route's fault filter config as istiod writes it:
// percentages in millionths.
func faultConfig(f *model.HTTPFault) *fault.HTTPFault {
	out := &fault.HTTPFault{}
	if d := f.Delay; d != nil {
		out.Delay = &commonfault.FaultDelay{
			FaultDelaySecifier: &commonfault.FaultDelay_FixedDelay{FixedDelay: durationpb.New(d.Fixed)},
			Percentage:         millionths(d.Percent),
		}
	}
	if a := f.Abort; a != nil {
		out.Abort = &fault.FaultAbort{Percentage: millionths(a.Percent)}
		if a.GRPC {
			out.Abort.ErrorType = &fault.FaultAbort_GrpcStatus{GrpcStatus: a.Code}
		} else {
			out.Abort.ErrorType = &fault.FaultAbort_HttpStatus{HttpStatus: a.Code}
		}
	}
	return out
}

func millionths(percent float64) *typev3.FractionalPercent {
	return &typev3.FractionalPercent{Numerator: uint32(percent * 10000), Denominator: typev3.FractionalPercent_MILLION}
}

// headerChanges are header changes as Envoy takes them.
type headerChanges struct {
	requestAdd, responseAdd       []*core.HeaderValueOption
	requestRemove, responseRemove []string
	// authority is the request's new authority, when a change sets it.
	authority string
}

// headerOps converts header changes as istiod does
// (TranslateHeadersOperations): set overwrites, add appends, in header
// order; a change of the authority (":authority" or "host") rewrites the
// host instead, set over add; pseudo-headers are never changed.
func headerOps(h *model.HTTPHeaders) headerChanges {
	var out headerChanges
	reqSet, setAuthority := headerValues(h.RequestSet, core.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD)
	reqAdd, addAuthority := headerValues(h.RequestAdd, core.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD)
	out.requestAdd = append(reqSet, reqAdd...)
	respSet, _ := headerValues(h.ResponseSet, core.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD)
	respAdd, _ := headerValues(h.ResponseAdd, core.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD)
	out.responseAdd = append(respSet, respAdd...)
	out.requestRemove = changeable(h.RequestRemove)
	out.responseRemove = changeable(h.ResponseRemove)
	out.authority = cmp.Or(setAuthority, addAuthority)
	return out
}

func headerValues(in map[string]string, action core.HeaderValueOption_HeaderAppendAction) ([]*core.HeaderValueOption, string) {
	var out []*core.HeaderValueOption
	var authority string
	for _, k := range slices.Sorted(maps.Keys(in)) {
		if strings.EqualFold(k, ":authority") || strings.EqualFold(k, "host") {
			authority = in[k]
		}
		if pseudoOrHost(k) {
			continue
		}
		out = append(out, &core.HeaderValueOption{Header: &core.HeaderValue{Key: k, Value: in[k]}, AppendAction: action})
	}
	return out, authority
}

// changeable drops the headers Envoy does not let a route change.
func changeable(names []string) []string {
	var out []string
	for _, n := range names {
		if !pseudoOrHost(n) {
			out = append(out, n)
		}
	}
	return out
}

func pseudoOrHost(name string) bool {
	return strings.HasPrefix(name, ":") || strings.EqualFold(name, "host")
}

// redirectAction is a redirect route's action (Envoy only), for a route
// of the service port port. As istiod writes it, a port that is the
// scheme's own (80 for http, 443 for https; outbound requests are http
// unless the redirect says otherwise) is left out of the location.
func redirectAction(r *model.HTTPRedirect, port int32) *route.Route_Redirect {
	a := &route.RedirectAction{HostRedirect: r.Authority}
	switch {
	case r.PrefixRewrite != "":
		a.PathRewriteSpecifier = &route.RedirectAction_PrefixRewrite{PrefixRewrite: r.PrefixRewrite}
	case r.URI != "":
		a.PathRewriteSpecifier = &route.RedirectAction_PathRedirect{PathRedirect: r.URI}
	}
	if r.Scheme != "" {
		a.SchemeRewriteSpecifier = &route.RedirectAction_SchemeRedirect{SchemeRedirect: r.Scheme}
	}
	a.PortRedirect = r.Port
	if r.PortFromRequest {
		a.PortRedirect = uint32(port)
	}
	scheme := r.Scheme
	if scheme == "" {
		scheme = "http"
	}
	if a.PortRedirect == 80 && scheme == "http" || a.PortRedirect == 443 && scheme == "https" {
		a.PortRedirect = 0
	}
	switch r.Code {
	case 302:
		a.ResponseCode = route.RedirectAction_FOUND
	case 303:
		a.ResponseCode = route.RedirectAction_SEE_OTHER
	case 307:
		a.ResponseCode = route.RedirectAction_TEMPORARY_REDIRECT
	case 308:
		a.ResponseCode = route.RedirectAction_PERMANENT_REDIRECT
	}
	return &route.Route_Redirect{Redirect: a}
}

// mustAny wraps a message that always marshals (a well-formed one).
func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}
