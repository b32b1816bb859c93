package translate

import (
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestWorkloadSelectorRules: a DestinationRule with a workloadSelector
// applies only to the clients of its namespace whose labels match, the
// first of them in Istio's order; every other client follows the rule
// chosen without it, which it never hides: a client of another
// namespace with matching labels, a client of its namespace without
// them. Only the answers that can differ vary by labels.
func TestWorkloadSelectorRules(t *testing.T) {
	host := model.ServiceHostname("reviews", "prod", "")
	sel := func(l model.Labels) *model.Labels { return &l }
	plain := &model.DestinationRule{Namespace: "prod", Name: "a-plain", Host: host}
	rules := []*model.DestinationRule{
		plain,
		// First by name: it used to shadow the plain rule mesh-wide.
		{Namespace: "prod", Name: "0-testers", Host: host, Selector: sel(model.Labels{"app": "tester"})},
		{Namespace: "client", Name: "canary", Host: host, Selector: sel(model.Labels{"track": "canary"})},
		{Namespace: "client", Name: "wide", Host: "*.prod.svc.cluster.local", Selector: sel(model.Labels{"app": "tester"})},
		{Namespace: "client", Name: "all", Host: "other.prod.svc.cluster.local", Selector: sel(model.Labels{})},
	}
	o := GeneratorOptions{Policies: model.NewStaticPolicies("istio-system", rules)}
	svc := &model.Service{Hostname: host, Namespace: "prod"}
	for _, tc := range []struct {
		name, ns string
		labels   map[string]string
		want     string // the rule's name; "" none
		vary     Vary
	}{
		{"prod, matching", "prod", map[string]string{"app": "tester", "x": "y"}, "0-testers", VaryNamespace | VaryLabels},
		{"prod, not matching", "prod", map[string]string{"app": "web"}, "a-plain", VaryNamespace | VaryLabels},
		{"prod, no labels", "prod", nil, "a-plain", VaryNamespace | VaryLabels},
		{"client, canary", "client", map[string]string{"track": "canary", "app": "tester"}, "canary", VaryNamespace | VaryLabels},
		{"client, a wildcard's selector", "client", map[string]string{"app": "tester"}, "wide", VaryNamespace | VaryLabels},
		{"client, none matching: the plain rule, not none", "client", map[string]string{"app": "web"}, "a-plain", VaryNamespace | VaryLabels},
		{"elsewhere, matching labels: never exported", "other", map[string]string{"app": "tester", "track": "canary"}, "a-plain", VaryNamespace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{Namespace: tc.ns}
			c.SetLabels(tc.labels)
			rule, _, vary := o.ruleFor(c, svc, nil)
			got := ""
			if rule != nil {
				got = rule.Name
			}
			if got != tc.want || vary != tc.vary {
				t.Errorf("rule %q, vary %b; want %q, %b", got, vary, tc.want, tc.vary)
			}
		})
	}
	t.Run("a host without selector rules does not vary", func(t *testing.T) {
		o := GeneratorOptions{Policies: model.NewStaticPolicies("istio-system", []*model.DestinationRule{plain,
			{Namespace: "prod", Name: "x", Host: "ratings.prod.svc.cluster.local", Selector: sel(model.Labels{"app": "tester"})}})}
		c := &Client{Namespace: "prod"}
		c.SetLabels(map[string]string{"app": "tester"})
		if rule, _, vary := o.ruleFor(c, svc, nil); rule != plain || vary != 0 {
			t.Errorf("rule %v, vary %b; want the plain rule, no vary", rule, vary)
		}
	})
	t.Run("the namespace's own rule for the host beats a wildcard's selector", func(t *testing.T) {
		own := &model.DestinationRule{Namespace: "client", Name: "own", Host: host}
		o := GeneratorOptions{Policies: model.NewStaticPolicies("istio-system", append([]*model.DestinationRule{own}, rules...))}
		c := &Client{Namespace: "client"}
		c.SetLabels(map[string]string{"app": "tester"})
		if rule, _, _ := o.ruleFor(c, svc, nil); rule != own {
			t.Errorf("rule %v, want the namespace's own", rule)
		}
	})
}
