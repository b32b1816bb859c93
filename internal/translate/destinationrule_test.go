package translate

import (
	"slices"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestClusterRuleVary: what a cluster built from a rule depends on and
// varies by. Its host's rule key always; the client's namespace when
// rules of several namespaces could apply; its kind when the policy is
// one gRPC clients get otherwise (RANDOM).
func TestClusterRuleVary(t *testing.T) {
	svc := service("echo", "echo", 7070)
	st := model.NewStore()
	st.Update(svc, nil)
	rule := func(ns string, lb model.LoadBalancer) *model.DestinationRule {
		return &model.DestinationRule{Namespace: ns, Name: "r", Host: svc.Hostname, Policy: &model.TrafficPolicy{LoadBalancer: lb}}
	}
	name := model.ClusterName(7070, "", svc.Hostname)
	for _, tc := range []struct {
		desc  string
		rules []*model.DestinationRule
		want  Vary
	}{
		// Every cluster varies by kind: Envoy gets istiod's connection
		// pool defaults, gRPC clients do not.
		{"no rule", nil, VaryKind},
		{"the service's rule", []*model.DestinationRule{rule("echo", model.LBLeastRequest)}, VaryKind},
		{"RANDOM", []*model.DestinationRule{rule("echo", model.LBRandom)}, VaryKind},
		{"rules of two namespaces", []*model.DestinationRule{rule("echo", model.LBLeastRequest), rule("team-a", model.LBLeastRequest)}, VaryNamespace | VaryKind},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			g := &clusterGenerator{GeneratorOptions{Discovery: st, Policies: model.NewStaticPolicies("istio-system", tc.rules)}}
			r := g.Generate(&Client{GRPC: true, Namespace: "team-a"}, name)
			if r.Resource == nil || r.Vary != tc.want || !slices.Contains(r.Deps, model.DestinationRuleKey(svc.Hostname)) {
				t.Errorf("resource %v, vary %b, deps %v; want a cluster, vary %b, the rule's key", r.Resource != nil, r.Vary, r.Deps, tc.want)
			}
		})
	}
}
