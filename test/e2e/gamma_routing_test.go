package e2e

import (
	"testing"
)

// TestGAMMAMeshBasic: with no route, a client of the mesh namespace
// reaches the Service echo.
func TestGAMMAMeshBasic(t *testing.T) {
	g := startGAMMA(t)
	cc := g.channel(t, g.mesh, "echo", 80)
	g.awaitServed(t, cc, "/")
	g.awaitServed(t, cc, "/echo/Get")
}

// TestGAMMAMeshTrafficSplit: a route on echo sends /v1 to echo-v1 and /v2
// to echo-v2.
func TestGAMMAMeshTrafficSplit(t *testing.T) {
	g := startGAMMA(t)
	g.apply(t, "mesh-split.yaml")
	g.awaitEnvoyEcho(t, "=/v1 -> echo-v1:80", "=/v2 -> echo-v2:80")
	cc := g.channel(t, g.mesh, "echo", 80)
	g.awaitBackend(t, cc, "echo-v1", "/v1")
	g.awaitBackend(t, cc, "echo-v2", "/v2")
}

// TestGAMMAMeshHTTPRouteSimpleSameNamespace: a route of the Service's
// namespace on port 80 sends everything to echo-v1.
func TestGAMMAMeshHTTPRouteSimpleSameNamespace(t *testing.T) {
	g := startGAMMA(t)
	g.apply(t, "httproute-simple-same-namespace.yaml")
	g.awaitEnvoyEcho(t, "~/ -> echo-v1:8080")
	cc := g.channel(t, g.mesh, "echo", 80)
	g.awaitBackend(t, cc, "echo-v1", "/")
}

// TestGAMMAMeshHTTPRouteMatching: path prefixes match whole segments,
// and a header match is a match of its own beside the path's.
func TestGAMMAMeshHTTPRouteMatching(t *testing.T) {
	g := startGAMMA(t)
	g.apply(t, "httproute-matching.yaml")
	// The longest prefix first, then the most headers, then the rules'
	// order.
	g.awaitEnvoyEcho(t, "^/v2 -> echo-v2:8080", "~/ version=one -> echo-v1:8080", "~/ version=two -> echo-v2:8080", "~/ -> echo-v1:8080")
	cc := g.channel(t, g.mesh, "echo", 80)
	for _, c := range []struct {
		path    string
		md      []string
		backend string
	}{
		{"/", nil, "echo-v1"},
		{"/example", nil, "echo-v1"},
		{"/", []string{"version", "one"}, "echo-v1"},
		{"/v2", nil, "echo-v2"},
		{"/v2/example", nil, "echo-v2"},
		{"/", []string{"version", "two"}, "echo-v2"},
		{"/v2/", nil, "echo-v2"},
		{"/v2example", nil, "echo-v1"},
		{"/foo/v2/example", nil, "echo-v1"},
	} {
		g.awaitBackend(t, cc, c.backend, c.path, c.md...)
	}
}

// TestGAMMAMeshHTTPRouteNamedRule: a rule's name changes nothing of its
// routing.
func TestGAMMAMeshHTTPRouteNamedRule(t *testing.T) {
	g := startGAMMA(t)
	g.apply(t, "httproute-named-rule.yaml")
	g.awaitEnvoyEcho(t, "^/unnamed -> echo-v2:8080", "^/named -> echo-v1:8080")
	cc := g.channel(t, g.mesh, "echo", 80)
	if r := g.awaitBackend(t, cc, "echo-v1", "/named"); r.req.path != "/named" {
		t.Errorf("echo-v1 saw path %q, want /named", r.req.path)
	}
	if r := g.awaitBackend(t, cc, "echo-v2", "/unnamed"); r.req.path != "/unnamed" {
		t.Errorf("echo-v2 saw path %q, want /unnamed", r.req.path)
	}
}
