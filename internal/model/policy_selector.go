package model

import (
	"cmp"
	"slices"
	"strings"
)

// A DestinationRule with a workloadSelector (DestinationRule.Selector)
// applies only to the clients of its own namespace whose labels match,
// as in Istio, which never exports such a rule: it is kept apart from
// the rules PolicyIndex.DestinationRuleFor chooses among, so that it
// never shadows the host's plain rule for anyone else.

// Selects reports whether a rule with a workloadSelector applies to a
// client with labels; false for a rule without one.
func (r *DestinationRule) Selects(labels map[string]string) bool {
	return r.Selector != nil && r.Selector.Matches(labels)
}

// SelectorPolicyIndex is a PolicyIndex that also holds rules with a
// workloadSelector. It is safe for concurrent use; what it returns is
// immutable. A change to such a rule is reported as the host's
// DestinationRuleKey, like any rule's.
type SelectorPolicyIndex interface {
	PolicyIndex
	// SelectorRulesFor returns the rules with a workloadSelector of
	// namespace ns for host, in the order a client tries them (the
	// host's own before wildcards, the most specific wildcard first;
	// then the oldest, by name, as Istio orders them); anyNS reports
	// whether some namespace has one for host, that is whether the
	// answer depends on the client's namespace at all.
	SelectorRulesFor(host Hostname, ns string) (rules []*DestinationRule, anyNS bool)
}

// SelectorRules indexes rules with a workloadSelector by host and
// namespace. The zero value is empty; it is not safe for concurrent use.
type SelectorRules struct {
	byHost    map[Hostname]map[string][]*DestinationRule
	wildcards []Hostname // hosts of byHost that are wildcards, most specific first
}

// Add records a rule (one with a Selector).
func (s *SelectorRules) Add(r *DestinationRule) {
	if s.byHost == nil {
		s.byHost = map[Hostname]map[string][]*DestinationRule{}
	}
	byNS := s.byHost[r.Host]
	if byNS == nil {
		byNS = map[string][]*DestinationRule{}
		s.byHost[r.Host] = byNS
		if isWildcard(r.Host) {
			s.wildcards = append(s.wildcards, r.Host)
			SortWildcards(s.wildcards)
		}
	}
	list := append(byNS[r.Namespace], r)
	slices.SortFunc(list, func(a, b *DestinationRule) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Name, b.Name))
	})
	byNS[r.Namespace] = list
}

// WildcardHosts are the wildcard hosts that have rules, most specific
// first; the result must not be changed.
func (s *SelectorRules) WildcardHosts() []Hostname { return s.wildcards }

// Remove forgets the rule of that namespace and name for host.
func (s *SelectorRules) Remove(host Hostname, namespace, name string) {
	byNS := s.byHost[host]
	list := slices.DeleteFunc(byNS[namespace], func(r *DestinationRule) bool { return r.Name == name })
	if len(list) > 0 {
		byNS[namespace] = list
		return
	}
	delete(byNS, namespace)
	if len(byNS) == 0 {
		delete(s.byHost, host)
		s.wildcards = slices.DeleteFunc(s.wildcards, func(w Hostname) bool { return w == host })
	}
}

// For implements SelectorPolicyIndex.SelectorRulesFor. The result must
// not be changed.
func (s *SelectorRules) For(host Hostname, ns string) (rules []*DestinationRule, anyNS bool) {
	if len(s.byHost) == 0 {
		return nil, false
	}
	if byNS := s.byHost[host]; byNS != nil {
		anyNS = true
		rules = byNS[ns]
	}
	for _, w := range s.wildcards {
		if w == host || !WildcardMatches(w, host) {
			continue
		}
		anyNS = true
		if more := s.byHost[w][ns]; len(more) > 0 {
			rules = append(slices.Clip(rules), more...)
		}
	}
	return rules, anyNS
}

// Of returns the rules of every namespace for host itself (a wildcard
// host's for that wildcard), in no particular order.
func (s *SelectorRules) Of(host Hostname) []*DestinationRule {
	var out []*DestinationRule
	for _, rules := range s.byHost[host] {
		out = append(out, rules...)
	}
	return out
}

// DefinesSubset reports whether a rule of any namespace for host, or
// for a wildcard matching it, defines subset.
func (s *SelectorRules) DefinesSubset(host Hostname, subset string) bool {
	for h, byNS := range s.byHost {
		if h != host && !WildcardMatches(h, host) {
			continue
		}
		for _, rules := range byNS {
			for _, r := range rules {
				if r.Subset(subset) != nil {
					return true
				}
			}
		}
	}
	return false
}

// SelectorRulesFor implements SelectorPolicyIndex.
func (p *StaticPolicies) SelectorRulesFor(host Hostname, ns string) ([]*DestinationRule, bool) {
	return p.selectors.For(host, ns)
}

var _ SelectorPolicyIndex = (*StaticPolicies)(nil)
