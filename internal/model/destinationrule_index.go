package model

import (
	"cmp"
	"slices"
)

// NamespaceRules are the DestinationRules of one namespace for one host
// (or wildcard host), consolidated as Istio consolidates them
// (ConsolidateRules) into the three lists a client's choice reads
// (HostRules.choose):
//
//   - Local: what clients of the namespace itself choose among, the
//     rules exported to it ("*", ".", its name, or nothing said);
//   - Exported: what clients of other namespaces may get, the rules not
//     exported to their own namespace alone, each still subject to its
//     exportTo;
//   - Private: the rules exported to their own namespace alone, the first
//     choice of a client of the root namespace.
//
// Each list is in Istio's order, oldest first; a client gets the last
// rule of the list it reads (Istio's SidecarScope.DestinationRule).
// NamespaceRules are never changed once built.
type NamespaceRules struct {
	Local, Exported, Private []*DestinationRule
	// Notes say what consolidating did to each rule merged into another.
	Notes []MergeNote
	// public: every rule is exported to every namespace, so that Local
	// and Exported are one list and Private is empty.
	public bool
}

// MergeNote says what became of a rule merged into an older one of its
// namespace for the same host.
type MergeNote struct {
	// Name is the rule merged; Into the older rule it was merged into.
	Name, Into string
	// Subset, when Dropped, is the index in Name's subsets of one that
	// Into already defines: Name's definition is dropped.
	Subset  int
	Dropped bool
	// PolicyDropped: Name's top-level trafficPolicy is dropped, Into
	// has one.
	PolicyDropped bool
}

// ConsolidateRules builds the rules of one namespace for one host from
// its objects, given oldest first (SortRules). defaultPrivate is whether
// MeshConfig's defaultDestinationRuleExportTo says "." (a rule that says
// nothing is then exported to its own namespace alone; any other default
// leaves it exported to all, as in Istio, which honours only "." and "*"
// there).
func ConsolidateRules(rules []*DestinationRule, defaultPrivate bool) *NamespaceRules {
	out := &NamespaceRules{public: true}
	var local, exported, private []*DestinationRule
	for _, r := range rules {
		if r.privateOnly(defaultPrivate) {
			private = append(private, r)
		} else {
			exported = append(exported, r)
		}
		if r.exportedToOwn() {
			local = append(local, r)
		}
		if !r.exportedToAll() || defaultPrivate && len(r.ExportTo) == 0 {
			out.public = false
		}
	}
	notes := map[MergeNote]bool{}
	out.Local = consolidate(local, notes)
	if out.public {
		out.Exported = out.Local
	} else {
		out.Exported = consolidate(exported, notes)
		out.Private = consolidate(private, notes)
	}
	for n := range notes {
		out.Notes = append(out.Notes, n)
	}
	slices.SortFunc(out.Notes, func(a, b MergeNote) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Into, b.Into), cmp.Compare(a.Subset, b.Subset),
			compareBool(a.Dropped, b.Dropped), compareBool(a.PolicyDropped, b.PolicyDropped))
	})
	return out
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// SortRules puts the rules of one namespace for one host in Istio's
// order: oldest first, then by name.
func SortRules(rules []*DestinationRule) {
	slices.SortFunc(rules, func(a, b *DestinationRule) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name))
	})
}

// exportedToOwn reports whether the rule is among those its own
// namespace's clients read first (Istio's namespaceLocal index).
func (r *DestinationRule) exportedToOwn() bool {
	if len(r.ExportTo) == 0 {
		return true
	}
	for _, e := range r.ExportTo {
		if e == "*" || e == "." || e == r.Namespace {
			return true
		}
	}
	return false
}

// privateOnly reports whether the rule is exported to its own namespace
// alone.
func (r *DestinationRule) privateOnly(defaultPrivate bool) bool {
	if len(r.ExportTo) == 0 {
		return defaultPrivate
	}
	set := exportSet(r.ExportTo)
	return len(set) == 1 && (set["."] || set[r.Namespace])
}

// exportedTo is the check of a rule of the Exported list against a
// client's namespace: "." does not count there, as in Istio, since the
// rule's own clients read Local.
func (r *DestinationRule) exportedTo(ns string) bool {
	return len(r.ExportTo) == 0 || slices.Contains(r.ExportTo, "*") || slices.Contains(r.ExportTo, ns)
}

func exportSet(exportTo []string) map[string]bool {
	set := make(map[string]bool, len(exportTo))
	for _, e := range exportTo {
		set[e] = true
	}
	return set
}

// consolidate merges rules, oldest first, as Istio's mergeDestinationRule
// does with its enhanced merge (the default): a rule joins each earlier
// entry whose exportTo is the same set, or a non-empty subset of its own;
// joining adds the subsets whose names the entry lacks, and the rule's
// trafficPolicy only if the entry has none. Whether it is also kept as
// an entry of its own is decided, as in Istio, by the last entry it was
// compared with: kept when that one could not take it. Selectors are not
// looked at: every rule here applies to all workloads.
func consolidate(rules []*DestinationRule, notes map[MergeNote]bool) []*DestinationRule {
	var out []*DestinationRule
	for _, r := range rules {
		mine := exportSet(r.ExportTo)
		separate := true
		for i, e := range out {
			theirs := exportSet(e.ExportTo)
			if !setEqual(mine, theirs) && (len(theirs) == 0 || !superset(mine, theirs)) {
				separate = true
				continue
			}
			separate = false
			out[i] = merge(e, r, notes)
		}
		if separate {
			out = append(out, r)
		}
	}
	return out
}

// merge returns into with r merged in, as a new rule.
func merge(into, r *DestinationRule, notes map[MergeNote]bool) *DestinationRule {
	m := *into
	m.MergedFrom = append(slices.Clip(into.MergedFrom), r.Name)
	m.Subsets = slices.Clip(into.Subsets)
	notes[MergeNote{Name: r.Name, Into: into.Name}] = true
	for i, s := range r.Subsets {
		if m.Subset(s.Name) != nil {
			notes[MergeNote{Name: r.Name, Into: into.Name, Subset: i, Dropped: true}] = true
			continue
		}
		m.Subsets = append(m.Subsets, s)
	}
	switch {
	case m.Policy == nil:
		m.Policy = r.Policy
	case r.Policy != nil:
		notes[MergeNote{Name: r.Name, Into: into.Name, PolicyDropped: true}] = true
	}
	return &m
}

func setEqual(a, b map[string]bool) bool { return len(a) == len(b) && superset(a, b) }

func superset(a, b map[string]bool) bool {
	for k := range b {
		if !a[k] {
			return false
		}
	}
	return true
}

// HostRules are the rules for one host or wildcard host, by namespace.
type HostRules map[string]*NamespaceRules

// RuleIndex finds the rules for a host: by host, exact and wildcard,
// with the wildcard hosts among them most specific first (SortWildcards).
// Its maps must not be changed once it is read.
type RuleIndex struct {
	ByHost    map[Hostname]HostRules
	Wildcards []Hostname
}

// find returns, from the namespace's list that pick reads, the rules for
// host: those for the host itself, else those for the most specific
// wildcard that has any (Istio's MostSpecificHostMatch on one index).
// A list that is empty counts as none: a private exact rule does not
// hide an exported wildcard from clients of other namespaces.
func (x RuleIndex) find(host Hostname, ns string, pick func(*NamespaceRules) []*DestinationRule) []*DestinationRule {
	if nr := x.ByHost[host][ns]; nr != nil {
		if l := pick(nr); len(l) > 0 {
			return l
		}
	}
	for _, w := range x.Wildcards {
		if w == host || !WildcardMatches(w, host) {
			continue
		}
		if nr := x.ByHost[w][ns]; nr != nil {
			if l := pick(nr); len(l) > 0 {
				return l
			}
		}
	}
	return nil
}

func pickLocal(nr *NamespaceRules) []*DestinationRule    { return nr.Local }
func pickExported(nr *NamespaceRules) []*DestinationRule { return nr.Exported }
func pickPrivate(nr *NamespaceRules) []*DestinationRule  { return nr.Private }

// Choose picks the rule for traffic from a client of clientNS to host, a
// service of serviceNS, as istiod does (PushContext.destinationRule):
//
//  1. the client's namespace's own rules (Local), or for a client of the
//     root namespace the root namespace's private rules;
//  2. the service's namespace's exported rules, if one is exported to
//     the client's namespace;
//  3. the root namespace's exported rules, likewise.
//
// Each step reads one list (NamespaceRules) and takes its most specific
// host; of the rules it yields the client gets the last. byClient is
// false only when every client gets the same answer: the host's rules are
// all in the service's or the root namespace and all exported to all.
func (x RuleIndex) Choose(host Hostname, serviceNS, clientNS, rootNS string) (rule *DestinationRule, byClient bool) {
	byClient = x.byClient(host, serviceNS, rootNS)
	last := func(l []*DestinationRule) *DestinationRule {
		if len(l) == 0 {
			return nil
		}
		return l[len(l)-1]
	}
	if clientNS != rootNS {
		if r := last(x.find(host, clientNS, pickLocal)); r != nil {
			return r, byClient
		}
	} else if r := last(x.find(host, rootNS, pickPrivate)); r != nil {
		return r, byClient
	}
	for _, ns := range []string{serviceNS, rootNS} {
		if ns == "" {
			continue
		}
		var visible []*DestinationRule
		for _, r := range x.find(host, ns, pickExported) {
			if r.exportedTo(clientNS) {
				visible = append(visible, r)
			}
		}
		if r := last(visible); r != nil {
			return r, byClient
		}
	}
	return nil, byClient
}

// byClient reports whether the choice for host may depend on the
// client's namespace.
func (x RuleIndex) byClient(host Hostname, serviceNS, rootNS string) bool {
	check := func(h HostRules) bool {
		for ns, nr := range h {
			if ns != serviceNS && ns != rootNS || !nr.public {
				return true
			}
		}
		return false
	}
	if check(x.ByHost[host]) {
		return true
	}
	for _, w := range x.Wildcards {
		if w != host && WildcardMatches(w, host) && check(x.ByHost[w]) {
			return true
		}
	}
	return false
}

// Rules calls f with every consolidated rule for host or a wildcard
// matching it, of any namespace and list, until f returns false.
func (x RuleIndex) Rules(host Hostname, f func(*DestinationRule) bool) {
	each := func(h HostRules) bool {
		for _, nr := range h {
			for _, l := range [][]*DestinationRule{nr.Local, nr.Exported, nr.Private} {
				for _, r := range l {
					if !f(r) {
						return false
					}
				}
			}
		}
		return true
	}
	if !each(x.ByHost[host]) {
		return
	}
	for _, w := range x.Wildcards {
		if w != host && WildcardMatches(w, host) && !each(x.ByHost[w]) {
			return
		}
	}
}

// StaticPolicies is a PolicyIndex over a fixed set of rules (tests; a
// source that rebuilds its index on each change), consolidated as
// Policies consolidates them, with rules that say no exportTo exported
// to all.
type StaticPolicies struct {
	root      string
	x         RuleIndex
	selectors SelectorRules // the rules with a workloadSelector, kept apart
}

// NewStaticPolicies indexes rules; rootNamespace holds mesh-wide rules.
func NewStaticPolicies(rootNamespace string, rules []*DestinationRule) *StaticPolicies {
	grouped := map[Hostname]map[string][]*DestinationRule{}
	var selectors SelectorRules
	for _, r := range rules {
		if r.Selector != nil {
			selectors.Add(r)
			continue
		}
		if grouped[r.Host] == nil {
			grouped[r.Host] = map[string][]*DestinationRule{}
		}
		grouped[r.Host][r.Namespace] = append(grouped[r.Host][r.Namespace], r)
	}
	p := &StaticPolicies{root: rootNamespace, x: RuleIndex{ByHost: map[Hostname]HostRules{}}, selectors: selectors}
	for h, byNS := range grouped {
		hr := HostRules{}
		for ns, rs := range byNS {
			rs = slices.Clone(rs)
			SortRules(rs)
			hr[ns] = ConsolidateRules(rs, false)
		}
		p.x.ByHost[h] = hr
		if isWildcard(h) {
			p.x.Wildcards = append(p.x.Wildcards, h)
		}
	}
	SortWildcards(p.x.Wildcards)
	return p
}

// AppendDestinationRuleKeys implements PolicyIndex.
func (p *StaticPolicies) AppendDestinationRuleKeys(deps []ConfigKey, host Hostname) []ConfigKey {
	return AppendRuleKeysWithSelectors(deps, host, p.x.Wildcards, &p.selectors)
}

// DestinationRuleFor implements PolicyIndex.
func (p *StaticPolicies) DestinationRuleFor(host Hostname, serviceNamespace, clientNamespace string) (*DestinationRule, bool) {
	return p.x.Choose(host, serviceNamespace, clientNamespace, p.root)
}
