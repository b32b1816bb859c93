package model

import (
	"slices"
	"strings"
	"testing"
	"time"
)

const testRoot = "istio-system"

// parseRule reads "ns/name[:exportTo,...][@minute]" into a rule for host.
func parseRule(host Hostname, spec string) *DestinationRule {
	spec, at, _ := strings.Cut(spec, "@")
	spec, export, _ := strings.Cut(spec, ":")
	ns, name, _ := strings.Cut(spec, "/")
	r := &DestinationRule{Namespace: ns, Name: name, Host: host}
	if export != "" {
		r.ExportTo = strings.Split(export, ",")
	}
	if at != "" {
		d, _ := time.ParseDuration(at + "m")
		r.Created = time.Unix(0, 0).Add(d)
	}
	return r
}

// TestChooseNamespaces: the order istiod reads namespaces in for one
// host (PushContext.destinationRule).
func TestChooseNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name         string
		rules        []string // "ns/name[:exportTo]"
		client       string
		want         string // ns/name chosen; "" none
		wantByClient bool
	}{
		{"none", nil, "a", "", false},
		{"service's rule, any client", []string{"svc/r"}, "a", "svc/r", false},
		{"root's rule, any client", []string{testRoot + "/r"}, "a", testRoot + "/r", false},
		{"client's rule first", []string{"a/r", "svc/r", testRoot + "/r"}, "a", "a/r", true},
		{"then the service's", []string{"b/r", "svc/r", testRoot + "/r"}, "a", "svc/r", true},
		{"then the root's", []string{"b/r", testRoot + "/r"}, "a", testRoot + "/r", true},
		{"another namespace's rule does not apply", []string{"b/r"}, "a", "", true},
		{"and applies to its own clients", []string{"b/r"}, "b", "b/r", true},
		{"a root client looks at the service's before the root's public one", []string{"svc/r", testRoot + "/r"}, testRoot, "svc/r", false},
		{"a root client takes the root's private rule first", []string{"svc/r", testRoot + "/p:."}, testRoot, testRoot + "/p", true},
		{"a root client's private rule by the namespace's name", []string{"svc/r", testRoot + "/p:" + testRoot}, testRoot, testRoot + "/p", true},
		{"the root's private rule is not for other clients", []string{"svc/r", testRoot + "/p:."}, "a", "svc/r", true},
		{"a root client without the service's gets the root's", []string{testRoot + "/r"}, testRoot, testRoot + "/r", false},
		{"a client without namespace", []string{"svc/r"}, "", "svc/r", false},
		{"exported to its namespace only", []string{"svc/r:."}, "a", "", true},
		{"exported to its namespace only, for its clients", []string{"svc/r:."}, "svc", "svc/r", true},
		{"exported to the client's namespace by name", []string{"svc/r:a"}, "a", "svc/r", true},
		{"not exported: the root's next", []string{"svc/r:~", testRoot + "/r"}, "a", testRoot + "/r", true},
		{"a client's own rule exported to nobody does not apply", []string{"a/r:~", "svc/r"}, "a", "svc/r", true},
		{"exported to all", []string{"svc/r:*"}, "a", "svc/r", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rules []*DestinationRule
			for _, spec := range tc.rules {
				rules = append(rules, parseRule("h.svc.svc.cluster.local", spec))
			}
			got, byClient := NewStaticPolicies(testRoot, rules).DestinationRuleFor("h.svc.svc.cluster.local", "svc", tc.client)
			if name := ruleName(got); name != tc.want || byClient != tc.wantByClient {
				t.Errorf("chose %q (byClient %v), want %q (byClient %v)", name, byClient, tc.want, tc.wantByClient)
			}
		})
	}
}

func ruleName(r *DestinationRule) string {
	if r == nil {
		return ""
	}
	return r.Namespace + "/" + r.Name
}

// TestChooseWildcards: within each list a namespace's rule for the host
// itself, else its rule for the most specific wildcard; a private exact
// rule hides nothing from clients of other namespaces, as in istiod,
// whose exported index does not hold it.
func TestChooseWildcards(t *testing.T) {
	rule := func(ns, name string, host Hostname, export ...string) *DestinationRule {
		return &DestinationRule{Namespace: ns, Name: name, Host: host, ExportTo: export}
	}
	p := NewStaticPolicies(testRoot, []*DestinationRule{
		rule("shop", "exact", "cart.shop.svc.cluster.local"),
		rule("shop", "ns-wide", "*.shop.svc.cluster.local"),
		rule("shop", "mesh-wide", "*.cluster.local"),
		rule(testRoot, "root", "*"),
		rule("team", "team", "*.svc.cluster.local"),
		rule("ext", "ext", "*.example.com"),
		rule("pay", "private-exact", "card.pay.svc.cluster.local", "."),
		rule("pay", "exported-wildcard", "*.pay.svc.cluster.local"),
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
		{"card.pay.svc.cluster.local", "pay", "pay", "private-exact"},
		{"card.pay.svc.cluster.local", "pay", "other", "exported-wildcard"},
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

// TestConsolidateRules: rules of one namespace for one host merge as
// istiod merges them (mergeDestinationRule): oldest first, subsets
// joined (a later duplicate dropped), the oldest trafficPolicy kept or
// the first given, and only rules whose exportTo is the same set, or a
// superset of a non-empty one, merged.
func TestConsolidateRules(t *testing.T) {
	const host = Hostname("h.ns.svc.cluster.local")
	lb := func(l LoadBalancer) *TrafficPolicy { return &TrafficPolicy{LoadBalancer: l} }
	sub := func(names ...string) []Subset {
		var out []Subset
		for _, n := range names {
			out = append(out, Subset{Name: n, Labels: Labels{"v": n}})
		}
		return out
	}
	type spec struct {
		rule    string // "ns/name[:exportTo][@minute]"
		policy  *TrafficPolicy
		subsets []Subset
	}
	for _, tc := range []struct {
		name          string
		rules         []spec
		client        string
		wantName      string // the chosen rule's name
		wantFrom      []string
		wantSubsets   []string
		wantPolicy    LoadBalancer
		wantNotes     []MergeNote
		defaultPublic bool
	}{
		{
			name: "oldest first, not by name; subsets joined, the older policy kept",
			rules: []spec{
				{"ns/a@2", lb(LBRandom), sub("v2", "v1")},
				{"ns/b@1", lb(LBLeastRequest), sub("v1")},
			},
			client: "ns", wantName: "b", wantFrom: []string{"a"}, wantSubsets: []string{"v1", "v2"}, wantPolicy: LBLeastRequest,
			wantNotes: []MergeNote{{Name: "a", Into: "b"}, {Name: "a", Into: "b", PolicyDropped: true}, {Name: "a", Into: "b", Subset: 1, Dropped: true}},
		},
		{
			name: "same age: by name; the first policy given is taken",
			rules: []spec{
				{"ns/b", lb(LBRandom), sub("v2")},
				{"ns/a", nil, sub("v1")},
			},
			client: "other", wantName: "a", wantFrom: []string{"b"}, wantSubsets: []string{"v1", "v2"}, wantPolicy: LBRandom,
			wantNotes: []MergeNote{{Name: "b", Into: "a"}},
		},
		{
			name: "different exportTo: kept apart, the newest applies to its own clients",
			rules: []spec{
				{"ns/a:*@1", lb(LBRandom), sub("v1")},
				{"ns/b:.@2", nil, sub("v2")},
			},
			client: "ns", wantName: "b", wantSubsets: []string{"v2"},
		},
		{
			name: "different exportTo: other clients see only the exported one",
			rules: []spec{
				{"ns/a:*@1", lb(LBRandom), sub("v1")},
				{"ns/b:.@2", nil, sub("v2")},
			},
			client: "other", wantName: "a", wantSubsets: []string{"v1"}, wantPolicy: LBRandom,
		},
		{
			name: "exportTo a superset of the older's: merged into it",
			rules: []spec{
				{"ns/a:.@1", nil, sub("v1")},
				{"ns/b:.,other@2", nil, sub("v2")},
			},
			client: "ns", wantName: "a", wantFrom: []string{"b"}, wantSubsets: []string{"v1", "v2"},
			wantNotes: []MergeNote{{Name: "b", Into: "a"}},
		},
		{
			name: "exportTo the same set in another order: merged",
			rules: []spec{
				{"ns/a:x,y@1", nil, sub("v1")},
				{"ns/b:y,x@2", nil, sub("v2")},
			},
			client: "x", wantName: "a", wantFrom: []string{"b"}, wantSubsets: []string{"v1", "v2"},
			wantNotes: []MergeNote{{Name: "b", Into: "a"}},
		},
		{
			name: "none said and \"*\" are different sets: kept apart",
			rules: []spec{
				{"ns/a@1", nil, sub("v1")},
				{"ns/b:*@2", nil, sub("v2")},
			},
			client: "other", wantName: "b", wantSubsets: []string{"v2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rules []*DestinationRule
			for _, s := range tc.rules {
				r := parseRule(host, s.rule)
				r.Policy, r.Subsets = s.policy, s.subsets
				rules = append(rules, r)
			}
			SortRules(rules)
			nr := ConsolidateRules(rules, false)
			x := RuleIndex{ByHost: map[Hostname]HostRules{host: {"ns": nr}}}
			got, _ := x.Choose(host, "ns", tc.client, testRoot)
			if got == nil {
				t.Fatalf("no rule, want %s", tc.wantName)
			}
			var subsets []string
			for _, s := range got.Subsets {
				subsets = append(subsets, s.Name)
			}
			var policy LoadBalancer
			if got.Policy != nil {
				policy = got.Policy.LoadBalancer
			}
			if got.Name != tc.wantName || !slices.Equal(got.MergedFrom, tc.wantFrom) || !slices.Equal(subsets, tc.wantSubsets) || policy != tc.wantPolicy {
				t.Errorf("got %s merged from %v, subsets %v, lb %v; want %s from %v, subsets %v, lb %v",
					got.Name, got.MergedFrom, subsets, policy, tc.wantName, tc.wantFrom, tc.wantSubsets, tc.wantPolicy)
			}
			if !slices.Equal(nr.Notes, tc.wantNotes) {
				t.Errorf("notes %+v, want %+v", nr.Notes, tc.wantNotes)
			}
		})
	}
}

// TestConsolidateRulesDefaultPrivate: with defaultDestinationRuleExportTo
// ["."], a rule that says no exportTo is its namespace's alone.
func TestConsolidateRulesDefaultPrivate(t *testing.T) {
	const host = Hostname("h.ns.svc.cluster.local")
	r := &DestinationRule{Namespace: "ns", Name: "r", Host: host}
	for _, tc := range []struct {
		defaultPrivate bool
		client         string
		want           bool
		byClient       bool
	}{
		{false, "other", true, false},
		{true, "other", false, true},
		{true, "ns", true, true},
	} {
		x := RuleIndex{ByHost: map[Hostname]HostRules{host: {"ns": ConsolidateRules([]*DestinationRule{r}, tc.defaultPrivate)}}}
		got, byClient := x.Choose(host, "ns", tc.client, testRoot)
		if (got != nil) != tc.want || byClient != tc.byClient {
			t.Errorf("default private %v, client %s: rule %v (byClient %v), want one: %v (byClient %v)",
				tc.defaultPrivate, tc.client, got != nil, byClient, tc.want, tc.byClient)
		}
	}
}
