package translate

import (
	"regexp"
	"strings"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"

	"github.com/meshpilot/meshpilot/internal/model"
)

// routeMatches converts a match; the routes of Gateway API routes
// (model.VirtualService.Gateway) match a path prefix by whole segments,
// as the Gateway API says and istiod writes it for Envoy
// (path_separated_prefix, "/api" matching "/api" and "/api/x" but not
// "/apix"). grpc-go NACKs a route configuration with a path specifier
// it does not know, path_separated_prefix among them, so a gRPC client
// gets the same match as two routes: the path itself, and the prefix
// with its separator.
func routeMatches(m *model.HTTPMatch, gateway, grpc bool) []*route.RouteMatch {
	rm := routeMatch(m)
	u := m.URI
	if !gateway || u == nil || u.Kind != model.MatchPrefix || u.Value == "/" {
		return []*route.RouteMatch{rm}
	}
	path := strings.TrimSuffix(u.Value, "/")
	if !grpc {
		rm.PathSpecifier = &route.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: path}
		return []*route.RouteMatch{rm}
	}
	if strings.HasSuffix(u.Value, "/") {
		// A GRPCRoute's service ("/pkg.Service/"): its methods only.
		return []*route.RouteMatch{rm}
	}
	exact := routeMatch(m)
	exact.PathSpecifier = &route.RouteMatch_Path{Path: path}
	rm.PathSpecifier = &route.RouteMatch_Prefix{Prefix: path + "/"}
	return []*route.RouteMatch{exact, rm}
}

// gatewayAction makes a route of Gateway API routes answer 500 for a
// backend whose cluster does not exist, as the Gateway API asks of a
// backend that cannot be resolved and istiod writes it. grpc-go ignores
// the field: its RPCs to such a backend fail with UNAVAILABLE.
func gatewayAction(r *route.Route) {
	if a, ok := r.Action.(*route.Route_Route); ok {
		a.Route.ClusterNotFoundResponseCode = route.RouteAction_INTERNAL_SERVER_ERROR
	}
}

// gatewayRewrite gives a route its own action where a Gateway API
// prefix replaced by "/" drops the matched segments, keeping one "/", as
// istiod writes it (a prefix_rewrite of "/" would join what follows to
// it: "/api/x" -> "//x"). The other routes share their rule's action.
func gatewayRewrite(r *route.Route) {
	a, ok := r.Action.(*route.Route_Route)
	prefix := r.GetMatch().GetPathSeparatedPrefix()
	if !ok || a.Route.GetPrefixRewrite() != "/" || prefix == "" {
		return
	}
	ra := proto.Clone(a.Route).(*route.RouteAction)
	ra.PrefixRewrite = ""
	ra.RegexRewrite = &matcher.RegexMatchAndSubstitute{
		Pattern:      &matcher.RegexMatcher{Regex: "^" + regexp.QuoteMeta(prefix) + `(/?)(.*)`},
		Substitution: `/\2`,
	}
	r.Action = &route.Route_Route{Route: ra}
}
