package translate

import (
	"slices"
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestRouteHashPolicyVary: what a service's route depends on and varies
// by once it carries the hash policy of the host's rule. Its host's rule
// key always; the client's namespace when rules of several namespaces
// could apply; its kind when the key is one gRPC clients do not get.
func TestRouteHashPolicyVary(t *testing.T) {
	svc := service("echo", "echo", 7070)
	st := model.NewStore()
	st.Update(svc, nil)
	rule := func(ns string, h *model.ConsistentHash) *model.DestinationRule {
		return &model.DestinationRule{Namespace: ns, Name: "r", Host: svc.Hostname, Policy: &model.TrafficPolicy{ConsistentHash: h}}
	}
	header := &model.ConsistentHash{HeaderName: "x-user", MinimumRingSize: 1024}
	cookie := &model.ConsistentHash{Cookie: &model.HashCookie{Name: "session"}, MinimumRingSize: 1024}
	maglev := &model.ConsistentHash{HeaderName: "x-user", Maglev: true}
	name := model.ClusterName(7070, "", svc.Hostname)
	for _, tc := range []struct {
		desc     string
		rules    []*model.DestinationRule
		want     Vary
		grpcHash bool // the gRPC client gets a hash policy
		envoy    bool // Envoy does
	}{
		{"no rule", nil, 0, false, false},
		{"a header", []*model.DestinationRule{rule("echo", header)}, 0, true, true},
		{"a cookie", []*model.DestinationRule{rule("echo", cookie)}, VaryKind, false, true},
		{"maglev on a header", []*model.DestinationRule{rule("echo", maglev)}, VaryKind, false, true},
		{"rules of two namespaces", []*model.DestinationRule{rule("echo", header), rule("team-a", header)}, VaryNamespace, true, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			g := &routeGenerator{GeneratorOptions{Discovery: st, Policies: model.NewStaticPolicies("istio-system", tc.rules)}}
			for _, c := range []*Client{{GRPC: true, Namespace: "team-a"}, {Namespace: "team-a"}} {
				r := g.Generate(c, name)
				if r.Resource == nil || r.Vary != tc.want || !slices.Contains(r.Deps, model.DestinationRuleKey(svc.Hostname)) {
					t.Fatalf("grpc %v: resource %v, vary %b, deps %v; want a route, vary %b, the rule's key", c.GRPC, r.Resource != nil, r.Vary, r.Deps, tc.want)
				}
				if err := Validate(r.Resource); err != nil {
					t.Fatal(err)
				}
				got := len(routeAction(t, r).GetHashPolicy()) > 0
				if want := map[bool]bool{true: tc.grpcHash, false: tc.envoy}[c.GRPC]; got != want {
					t.Errorf("grpc %v: hash policy %v, want %v", c.GRPC, got, want)
				}
			}
		})
	}
}

// routeAction is the action of a service route's one route.
func routeAction(t *testing.T, r Result) *route.RouteAction {
	t.Helper()
	rc, ok := r.Resource.(*route.RouteConfiguration)
	if !ok || len(rc.GetVirtualHosts()) != 1 || len(rc.GetVirtualHosts()[0].GetRoutes()) != 1 {
		t.Fatalf("not a route configuration with one route: %v", r.Resource)
	}
	return rc.GetVirtualHosts()[0].GetRoutes()[0].GetRoute()
}
