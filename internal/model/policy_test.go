package model

import (
	"strings"
	"testing"
)

func TestHostRulesChoose(t *testing.T) {
	rule := func(ns string) *DestinationRule { return &DestinationRule{Namespace: ns, Name: "r"} }
	const root = "istio-system"
	for _, tc := range []struct {
		name         string
		rules        []string // namespaces holding a rule for the host, "ns:exportTo"
		client       string
		want         string // namespace of the rule chosen; "" none
		wantByClient bool
	}{
		{"none", nil, "a", "", false},
		{"service's rule, any client", []string{"svc"}, "a", "svc", false},
		{"root's rule, any client", []string{root}, "a", root, false},
		{"client's rule first", []string{"a", "svc", root}, "a", "a", true},
		{"then the service's", []string{"b", "svc", root}, "a", "svc", true},
		{"then the root's", []string{"b", root}, "a", root, true},
		{"another namespace's rule does not apply", []string{"b"}, "a", "", true},
		{"and applies to its own clients", []string{"b"}, "b", "b", true},
		{"a root client looks at the service's first", []string{"svc", root}, root, "svc", true},
		{"a root client without the service's gets the root's", []string{root}, root, root, false},
		{"a client without namespace", []string{"svc"}, "", "svc", false},
		{"exported to its namespace only", []string{"svc:."}, "a", "", true},
		{"exported to its namespace only, for its clients", []string{"svc:."}, "svc", "svc", true},
		{"exported to the client's namespace by name", []string{"svc:a"}, "a", "svc", true},
		{"not exported: the root's next", []string{"svc:~", root}, "a", root, true},
		{"a client's own rule exported to nobody does not apply", []string{"a:~", "svc"}, "a", "svc", true},
		{"exported to all", []string{"svc:*"}, "a", "svc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			byNS := HostRules{}
			for _, spec := range tc.rules {
				// "namespace" or "namespace:exportTo"
				ns, export, _ := strings.Cut(spec, ":")
				r := rule(ns)
				if export != "" {
					r.ExportTo = []string{export}
				}
				byNS[ns] = r
			}
			got, byClient := byNS.Choose("svc", tc.client, root)
			gotNS := ""
			if got != nil {
				gotNS = got.Namespace
			}
			if gotNS != tc.want || byClient != tc.wantByClient {
				t.Errorf("chose %q (byClient %v), want %q (byClient %v)", gotNS, byClient, tc.want, tc.wantByClient)
			}
		})
	}
}

func TestAppendRuleKeys(t *testing.T) {
	wildcards := []Hostname{"*.ns.svc.cluster.local", "*.example.com", "*.cluster.local", "*"}
	SortWildcards(wildcards)
	for _, tc := range []struct {
		host Hostname
		want []string
	}{
		{"a.ns.svc.cluster.local", []string{"a.ns.svc.cluster.local", "*.ns.svc.cluster.local", "*.cluster.local", "*"}},
		{"b.other.svc.cluster.local", []string{"b.other.svc.cluster.local", "*.cluster.local", "*"}},
		{"api.example.com", []string{"api.example.com", "*.example.com", "*"}},
		{"*.example.com", []string{"*.example.com", "*"}},
		{"localhost", []string{"localhost", "*"}},
		{"*", []string{"*"}},
	} {
		var got []string
		for _, k := range AppendRuleKeys(nil, tc.host, wildcards) {
			if k.Kind != KindDestinationRule {
				t.Fatalf("%v: kind %v", k, k.Kind)
			}
			got = append(got, k.Name)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("AppendRuleKeys(%s) = %v, want %v", tc.host, got, tc.want)
		}
	}
}

// TestRulesForWildcards: a namespace's rule for the host itself, else its
// rule for the most specific wildcard that matches; then the choice among
// namespaces as for exact rules (a client's namespace's wildcard before
// the service's namespace's exact rule, as in Istio).
func TestRulesForWildcards(t *testing.T) {
	rule := func(ns, name string, host Hostname) *DestinationRule {
		return &DestinationRule{Namespace: ns, Name: name, Host: host}
	}
	p := NewStaticPolicies("istio-system", []*DestinationRule{
		rule("shop", "exact", "cart.shop.svc.cluster.local"),
		rule("shop", "ns-wide", "*.shop.svc.cluster.local"),
		rule("shop", "mesh-wide", "*.cluster.local"),
		rule("istio-system", "root", "*"),
		rule("team", "team", "*.svc.cluster.local"),
		rule("ext", "ext", "*.example.com"),
	})
	for _, tc := range []struct {
		host     Hostname
		svcNS    string
		clientNS string
		want     string
	}{
		{"cart.shop.svc.cluster.local", "shop", "shop", "exact"},
		{"orders.shop.svc.cluster.local", "shop", "shop", "ns-wide"},
		{"orders.shop.svc.cluster.local", "shop", "other", "ns-wide"},
		{"web.other.svc.cluster.local", "other", "shop", "mesh-wide"},
		{"cart.shop.svc.cluster.local", "shop", "team", "team"},
		{"web.other.svc.cluster.local", "other", "other", "root"},
		{"api.example.com", "", "ext", "ext"},
		{"example.com", "", "ext", "root"},
	} {
		r, _ := p.DestinationRuleFor(tc.host, tc.svcNS, tc.clientNS)
		got := ""
		if r != nil {
			got = r.Name
		}
		if got != tc.want {
			t.Errorf("%s from %s: rule %q, want %q", tc.host, tc.clientNS, got, tc.want)
		}
	}
}
