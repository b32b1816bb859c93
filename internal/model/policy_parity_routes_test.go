package model

import (
	"slices"
	"testing"
	"time"
)

// TestSelectorRulesOrder: a namespace's rules with a workloadSelector for
// a host come in the order a client tries them: those for the host
// itself, then those for the wildcards that match it, most specific
// first; within each, the oldest, then by name. Other namespaces' are
// not offered, but say the answer depends on the namespace.
func TestSelectorRulesOrder(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sel := &Labels{"app": "a"}
	rule := func(ns, name string, host Hostname, age time.Duration) *DestinationRule {
		return &DestinationRule{Namespace: ns, Name: name, Host: host, Selector: sel, Created: base.Add(-age)}
	}
	const host = "reviews.prod.svc.cluster.local"
	var s SelectorRules
	for _, r := range []*DestinationRule{
		rule("ns", "b-young", host, 0),
		rule("ns", "z-old", host, time.Hour),
		rule("ns", "a-young", host, 0),
		rule("ns", "star", "*", 2*time.Hour),
		rule("ns", "prod", "*.prod.svc.cluster.local", 0),
		rule("other", "x", host, 0),
		rule("ns", "elsewhere", "ratings.prod.svc.cluster.local", 0),
	} {
		s.Add(r)
	}
	names := func(rs []*DestinationRule) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return out
	}
	if got, anyNS := s.For(host, "ns"); !slices.Equal(names(got), []string{"z-old", "a-young", "b-young", "prod", "star"}) || !anyNS {
		t.Errorf("ns: %v (any %v)", names(got), anyNS)
	}
	if got, anyNS := s.For(host, "third"); len(got) != 0 || !anyNS {
		t.Errorf("a namespace without: %v (any %v), want none, but some elsewhere", names(got), anyNS)
	}
	s.Remove(host, "ns", "z-old")
	s.Remove("*", "ns", "star")
	if got, _ := s.For(host, "ns"); !slices.Equal(names(got), []string{"a-young", "b-young", "prod"}) {
		t.Errorf("after removals: %v", names(got))
	}
	if got, anyNS := s.For("details.dev.svc.cluster.local", "ns"); len(got) != 0 || anyNS {
		t.Errorf("a host no rule matches: %v (any %v)", names(got), anyNS)
	}
}
