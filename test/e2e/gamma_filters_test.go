package e2e

import (
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/meshpilot/meshpilot/internal/gwstatus"
)

// The scenarios of this file use what only an HTTP proxy does: query
// parameters, header changes, rewrites and redirects. Each checks the
// route configuration an Envoy of the mesh namespace receives for echo:80,
// and what a grpc-go client does with the same route: it never matches
// query parameters, it changes no header nor path (meshpilot does not
// send it those changes), and it fails the RPCs a redirect matches with
// UNAVAILABLE while the other rules route.

// TestGAMMAMeshHTTPRouteQueryParamMatching: query parameter matches,
// alone and with a path or header match, ordered by the Gateway API's
// precedence (the longest path first, then the most headers, then the
// most query parameters).
func TestGAMMAMeshHTTPRouteQueryParamMatching(t *testing.T) {
	g := startGAMMA(t)
	g.apply(t, "httproute-query-param-matching.yaml")
	g.awaitReported(t, gwstatus.KindHTTPRoute, g.mesh, "mesh-query-param-matching", "spec.rules[0].matches[0].queryParams", "spec.rules[1].matches[0].queryParams",
		"spec.rules[2].matches[0].queryParams", "spec.rules[3].matches[0].queryParams", "spec.rules[4].matches[0].queryParams",
		"spec.rules[4].matches[1].queryParams", "spec.rules[6].matches[0].queryParams")
	g.awaitEnvoyEcho(t,
		"^/path4 ?animal=kraken version=three -> echo-v1:8080",
		"^/path1 ?animal=whale -> echo-v1:8080",
		"^/path3 ?animal=shark -> echo-v1:8080",
		"^/path5 -> echo-v1:8080",
		"~/ ?animal=whale version=one -> echo-v2:8080",
		"~/ ?animal=whale -> echo-v1:8080",
		"~/ ?animal=dolphin -> echo-v2:8080",
		"~/ ?animal=hydra -> echo-v2:8080",
	)
	cc := g.channel(t, g.mesh, "echo", 80)
	g.awaitBackend(t, cc, "echo-v1", "/path5/Get")
	// Every other rule needs a query parameter, which a gRPC request
	// never has: nothing routes it.
	for _, path := range []string{"/", "/path1/Get", "/path3/Get"} {
		g.awaitFailure(t, cc, codes.Unavailable, path)
	}
	g.awaitFailure(t, cc, codes.Unavailable, "/path4/Get")
}

// requestHeaderModifierRoutes is what an Envoy receives of the rules (or
// backends, whose one backend's changes istiod puts on the route) of the
// two header modifier scenarios: set overwrites, add appends.
var requestHeaderModifierRoutes = []string{
	"^/case-insensitivity -> echo-v1:8080 +x-header-set=header-set(OVERWRITE_IF_EXISTS_OR_ADD) +x-header-add=header-add(APPEND_IF_EXISTS_OR_ADD) -x-header-remove",
	"^/multiple -> echo-v1:8080 +x-header-set-1=header-set-1(OVERWRITE_IF_EXISTS_OR_ADD) +x-header-set-2=header-set-2(OVERWRITE_IF_EXISTS_OR_ADD) +x-header-add-1=header-add-1(APPEND_IF_EXISTS_OR_ADD) +x-header-add-2=header-add-2(APPEND_IF_EXISTS_OR_ADD) +x-header-add-3=header-add-3(APPEND_IF_EXISTS_OR_ADD) -x-header-remove-1 -x-header-remove-2",
	"^/remove -> echo-v1:8080 -x-header-remove",
	"^/set -> echo-v1:8080 +x-header-set=set-overwrites-values(OVERWRITE_IF_EXISTS_OR_ADD)",
	"^/add -> echo-v1:8080 +x-header-add=add-appends-values(APPEND_IF_EXISTS_OR_ADD)",
}

// checkHeadersUnchanged: a gRPC client's requests reach echo-v1 on each
// rule with their metadata as sent: grpc-go applies no header change.
func checkHeadersUnchanged(t *testing.T, g *gammaMesh) {
	t.Helper()
	cc := g.channel(t, g.mesh, "echo", 80)
	for _, path := range []string{"/set/Get", "/add/Get", "/remove/Get", "/multiple/Get", "/case-insensitivity/Get"} {
		r := g.awaitBackend(t, cc, "echo-v1", path, "x-header-set", "sent", "x-header-remove", "sent", "x-header-remove-1", "sent")
		for _, k := range []string{"x-header-set", "x-header-remove", "x-header-remove-1"} {
			if got := r.req.md.Get(k); !slices.Equal(got, []string{"sent"}) {
				t.Errorf("%s: echo-v1 saw %s %q, want it as sent", path, k, got)
			}
		}
		for _, k := range []string{"x-header-add", "x-header-set-1", "x-header-add-1"} {
			if got := r.req.md.Get(k); len(got) != 0 {
				t.Errorf("%s: echo-v1 saw %s %q, want none", path, k, got)
			}
		}
	}
}

// TestGAMMAMeshHTTPRouteRequestHeaderModifier: a rule's request header
// changes.
func TestGAMMAMeshHTTPRouteRequestHeaderModifier(t *testing.T) {
	g := startGAMMA(t)
	g.apply(t, "httproute-request-header-modifier.yaml")
	g.awaitReported(t, gwstatus.KindHTTPRoute, g.mesh, "mesh-request-header-modifier", "spec.rules[0].filters[0]",
		"spec.rules[1].filters[0]", "spec.rules[2].filters[0]", "spec.rules[3].filters[0]", "spec.rules[4].filters[0]")
	g.awaitEnvoyEcho(t, requestHeaderModifierRoutes...)
	checkHeadersUnchanged(t, g)
}

// TestGAMMAMeshHTTPRouteBackendRequestHeaderModifier: a backend's request
// header changes.
func TestGAMMAMeshHTTPRouteBackendRequestHeaderModifier(t *testing.T) {
	g := startGAMMA(t)
	g.apply(t, "httproute-request-header-modifier-backend.yaml")
	g.awaitReported(t, gwstatus.KindHTTPRoute, g.mesh, "mesh-request-header-modifier", "spec.rules[0].backendRefs[0].filters",
		"spec.rules[1].backendRefs[0].filters", "spec.rules[2].backendRefs[0].filters", "spec.rules[3].backendRefs[0].filters",
		"spec.rules[4].backendRefs[0].filters")
	g.awaitEnvoyEcho(t, requestHeaderModifierRoutes...)
	checkHeadersUnchanged(t, g)
}

// TestGAMMAMeshHTTPRouteRewritePath: prefix and full path rewrites, one
// with header changes; a prefix replaced by "/" keeps one "/".
func TestGAMMAMeshHTTPRouteRewritePath(t *testing.T) {
	g := startGAMMA(t)
	g.apply(t, "httproute-rewrite-path.yaml")
	g.awaitReported(t, gwstatus.KindHTTPRoute, g.mesh, "mesh-rewrite-path", "spec.rules[0].filters[0]", "spec.rules[1].filters[0]",
		"spec.rules[2].filters[0]", "spec.rules[3].filters[0]", "spec.rules[3].filters[1]", "spec.rules[4].filters[0]", "spec.rules[4].filters[1]")
	headers := " +x-header-set=set-overwrites-values(OVERWRITE_IF_EXISTS_OR_ADD) +x-header-add=header-val-1(APPEND_IF_EXISTS_OR_ADD) +x-header-add-append=header-val-2(APPEND_IF_EXISTS_OR_ADD) -x-header-remove"
	g.awaitEnvoyEcho(t,
		"^/prefix/rewrite-path-and-modify-headers -> echo-v1:80 prefix-rewrite=/prefix"+headers,
		"^/full/rewrite-path-and-modify-headers -> echo-v1:80 regex-rewrite=/.*//test"+headers,
		`^/strip-prefix -> echo-v1:80 regex-rewrite=^/strip-prefix(/?)(.*)//\2`,
		"^/prefix/one -> echo-v1:80 prefix-rewrite=/one",
		"^/full/one -> echo-v1:80 regex-rewrite=/.*//one",
	)
	cc := g.channel(t, g.mesh, "echo", 80)
	for _, path := range []string{"/prefix/one/two", "/strip-prefix/three", "/full/one/two", "/prefix/rewrite-path-and-modify-headers/one"} {
		if r := g.awaitBackend(t, cc, "echo-v1", path); r.req.path != path {
			t.Errorf("echo-v1 saw %s as %s, want it as sent", path, r.req.path)
		}
	}
}

// redirectScenario checks a redirect scenario whose route is named
// route, of one redirect per rule: what an Envoy receives, that each
// redirect is reported not for gRPC clients, and that grpc-go fails the
// RPCs of each redirect rule.
func redirectScenario(t *testing.T, file, route string, paths []string, envoy ...string) {
	t.Helper()
	g := startGAMMA(t)
	g.apply(t, file)
	g.awaitEnvoyEcho(t, envoy...)
	var reported []string
	for i := range envoy {
		reported = append(reported, fmt.Sprintf("spec.rules[%d].filters[0]", i))
	}
	g.awaitReported(t, gwstatus.KindHTTPRoute, g.mesh, route, reported...)
	cc := g.channel(t, g.mesh, "echo", 80)
	for _, p := range paths {
		g.awaitNoRouteAction(t, cc, p)
	}
}

func TestGAMMAMeshHTTPRoute303Redirect(t *testing.T) {
	redirectScenario(t, "httproute-303-redirect.yaml", "mesh-303-redirect", []string{"/redirect/Get"}, "^/redirect -> redirect SEE_OTHER")
}

func TestGAMMAMeshHTTPRoute307Redirect(t *testing.T) {
	redirectScenario(t, "httproute-307-redirect.yaml", "mesh-307-redirect", []string{"/temporary/Get"}, "^/temporary -> redirect TEMPORARY_REDIRECT")
}

func TestGAMMAMeshHTTPRoute308Redirect(t *testing.T) {
	redirectScenario(t, "httproute-308-redirect.yaml", "mesh-308-redirect", []string{"/permanent/Get"}, "^/permanent -> redirect PERMANENT_REDIRECT")
}

func TestGAMMAMeshHTTPRouteRedirectHostAndStatus(t *testing.T) {
	redirectScenario(t, "httproute-redirect-host-and-status.yaml", "mesh-redirect-host-and-status", []string{"/hostname-redirect/Get", "/host-and-status/Get"},
		"^/hostname-redirect -> redirect FOUND host=example.org",
		"^/host-and-status -> redirect MOVED_PERMANENTLY host=example.org")
}

func TestGAMMAMeshHTTPRouteRedirectPath(t *testing.T) {
	redirectScenario(t, "httproute-redirect-path.yaml", "mesh-redirect-path", []string{"/original-prefix/lemon", "/full/path", "/path-and-host/Get"},
		"^/full-path-and-status -> redirect MOVED_PERMANENTLY path=/replacement-full",
		"^/full-path-and-host -> redirect FOUND host=example.org path=/replacement-full",
		"^/original-prefix -> redirect FOUND prefix=/replacement-prefix",
		"^/path-and-status -> redirect MOVED_PERMANENTLY prefix=/replacement-prefix",
		"^/path-and-host -> redirect FOUND host=example.org prefix=/replacement-prefix",
		"^/full -> redirect FOUND path=/full-path-replacement")
}

func TestGAMMAMeshHTTPRouteRedirectPort(t *testing.T) {
	redirectScenario(t, "httproute-redirect-port.yaml", "mesh-redirect-port", []string{"/port/Get", "/port-and-host/Get"},
		"^/port-and-host-and-status -> redirect FOUND host=example.org port=8083",
		"^/port-and-status -> redirect MOVED_PERMANENTLY port=8083",
		"^/port-and-host -> redirect FOUND host=example.org port=8083",
		"^/port -> redirect FOUND port=8083")
}

func TestGAMMAMeshHTTPRouteSchemeRedirect(t *testing.T) {
	redirectScenario(t, "httproute-redirect-scheme.yaml", "mesh-redirect-scheme", []string{"/scheme/Get", "/scheme-and-host/Get"},
		"^/scheme-and-host-and-status -> redirect FOUND scheme=https host=example.org",
		"^/scheme-and-status -> redirect MOVED_PERMANENTLY scheme=https",
		"^/scheme-and-host -> redirect FOUND scheme=https host=example.org",
		"^/scheme -> redirect FOUND scheme=https")
}
