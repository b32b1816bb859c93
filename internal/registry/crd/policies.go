package crd

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// PolicyOptions configure Policies.
type PolicyOptions struct {
	// DomainSuffix resolves short hosts; "cluster.local" when empty.
	DomainSuffix string
	// RootNamespace holds the rules that apply mesh-wide (Istio's
	// MeshConfig rootNamespace) while Mesh names none; empty: Istio's
	// default, model.DefaultRootNamespace.
	RootNamespace string
	// Mesh, when set, is followed for MeshConfig's rootNamespace, which
	// takes RootNamespace's place while it is set.
	Mesh MeshSource
	// Status, when set, records what became of every DestinationRule.
	Status *configstatus.Reporter
}

// Policies is the DestinationRules of a Registry as generators read them
// (model.PolicyIndex): converted, indexed by host, and chosen for a
// client as Istio chooses. A change to a rule is reported, once visible,
// as a model.ConfigChanged event with the DestinationRuleKey of each host
// the rule applied to before or applies to now.
//
// A rule that cannot be converted is refused: its status says why, and
// its last good version stays in force.
//
// The root namespace and defaultDestinationRuleExportTo follow the mesh
// settings (PolicyOptions.Mesh); a change of either is reported as the
// DestinationRuleKey of each host whose choice of rule it can change.
//
// A rule with a workloadSelector is kept apart (policies_selector.go):
// it applies only to the matching clients of its namespace
// (model.SelectorPolicyIndex) and takes no part in the choice below.
//
// Several rules of one namespace for one host are merged as Istio merges
// them (model.ConsolidateRules): oldest first, subsets joined, the first
// trafficPolicy kept. Each merged rule's status says what it was merged
// into (Status.Merged), and which of its subsets and policy are dropped
// because an older rule already has them (ignored for every client).
//
// A rule for a wildcard host ("*.example.com") applies to the hosts it
// matches in its namespace's place when the namespace has no rule for
// the host itself, the most specific wildcard first (model.RuleIndex);
// its change is reported under the wildcard's DestinationRuleKey, which
// what reads a host's rules depends on (model.AppendRuleKeys), and under
// "*" as well when the wildcard gains its first rule or loses its last.
type Policies struct {
	reg  Store
	opts PolicyOptions

	handlers modelHandlers

	mu sync.RWMutex // guards root, defaultPrivate, rules, naming, current, index and selectors
	// root is the root namespace in force.
	root string
	// defaultPrivate: a rule without exportTo is its namespace's alone
	// (model.ExportDefaults.DestinationRulesPrivate).
	defaultPrivate bool
	// rules holds each object's converted rule, by namespace/name: its
	// last good version.
	rules map[string]*model.DestinationRule
	// naming holds the same rules per host or wildcard host, by
	// namespace/name: what the index is built from, so that a change
	// costs the rules of the hosts it touches, not every rule.
	naming map[model.Hostname]map[string]*model.DestinationRule
	// current holds, by namespace/name, the objects whose latest version
	// converted, with their status and reference: what merging did to
	// them is added to their status.
	current map[string]convertedRule
	// index holds, per host or wildcard host, the consolidated rules of
	// each namespace that has one, and the wildcard hosts among them.
	index model.RuleIndex
	// selectors holds the rules with a workloadSelector, kept out of
	// naming and index: they neither shadow nor are shadowed by the
	// rules chosen there (policies_selector.go).
	selectors model.SelectorRules
}

// NewPolicies builds the policy view of reg; it follows reg's events, so
// call it before reg runs.
func NewPolicies(reg Store, opts PolicyOptions) *Policies {
	p := &Policies{
		reg:     reg,
		opts:    opts,
		rules:   map[string]*model.DestinationRule{},
		naming:  map[model.Hostname]map[string]*model.DestinationRule{},
		current: map[string]convertedRule{},
		index:   model.RuleIndex{ByHost: map[model.Hostname]model.HostRules{}},
	}
	p.root = p.rootOf(nil)
	if opts.Mesh != nil {
		mesh := opts.Mesh.Mesh()
		p.root = p.rootOf(mesh)
		p.defaultPrivate = mesh != nil && mesh.DefaultExportTo.DestinationRulesPrivate()
		opts.Mesh.AppendEventHandler(p.onMeshEvent)
	}
	reg.AppendEventHandler(p.onEvent)
	return p
}

// AppendEventHandler adds a handler of the policy events; it may be
// called while the registry runs (see modelHandlers).
func (p *Policies) AppendEventHandler(h model.EventHandler) { p.handlers.add(h) }

func (p *Policies) onEvent(ev Event) {
	if ev.Kind != DestinationRule {
		return
	}
	key := ev.Namespace + "/" + ev.Name
	ref := Ref(p.reg, DestinationRule, ev.Namespace, ev.Name)
	var now *model.DestinationRule
	if obj := p.reg.DestinationRule(ev.Namespace, ev.Name); obj != nil {
		var status configstatus.Status
		now, status = ConvertDestinationRule(obj, p.opts.DomainSuffix)
		if now == nil {
			p.mu.Lock()
			delete(p.current, key)
			p.mu.Unlock()
			p.opts.Status.Set(ref, status)
			return
		}
		p.mu.Lock()
		p.current[key] = convertedRule{ref: ref, status: status}
		p.mu.Unlock()
	} else {
		p.mu.Lock()
		delete(p.current, key)
		p.mu.Unlock()
		p.opts.Status.Delete(ref)
	}
	hosts := p.set(key, now)
	p.reportSelectors(hosts)
	p.reportMerged(hosts)
	p.notify(hosts)
}

// convertedRule is an object whose latest version converted.
type convertedRule struct {
	ref    configstatus.Ref
	status configstatus.Status
}

// reportMerged records the status of every converted rule of hosts: its
// conversion's, with what merging it into an older rule of its namespace
// did (model.MergeNote), so that no part of a rule is dropped silently.
func (p *Policies) reportMerged(hosts []model.Hostname) {
	type update struct {
		ref    configstatus.Ref
		status configstatus.Status
	}
	var updates []update
	p.mu.RLock()
	for _, h := range hosts {
		notes := map[string][]model.MergeNote{} // namespace/name -> notes
		for ns, nr := range p.index.ByHost[h] {
			for _, n := range nr.Notes {
				notes[ns+"/"+n.Name] = append(notes[ns+"/"+n.Name], n)
			}
		}
		for key, r := range p.naming[h] {
			c, ok := p.current[key]
			if !ok {
				continue // refused on its own: its status says why
			}
			updates = append(updates, update{c.ref, withMergeNotes(c.status, r, notes[key])})
		}
	}
	p.mu.RUnlock()
	for _, u := range updates {
		p.opts.Status.Set(u.ref, u.status)
	}
}

// withMergeNotes adds to a rule's status what merging did to it.
func withMergeNotes(st configstatus.Status, r *model.DestinationRule, notes []model.MergeNote) configstatus.Status {
	if len(notes) == 0 {
		return st
	}
	st.IgnoredGRPC, st.IgnoredEnvoy = slices.Clone(st.IgnoredGRPC), slices.Clone(st.IgnoredEnvoy)
	ignore := func(path, why string) {
		st.IgnoredGRPC = append(st.IgnoredGRPC, configstatus.Field{Path: path, Why: why})
		st.IgnoredEnvoy = append(st.IgnoredEnvoy, configstatus.Field{Path: path, Why: why})
	}
	for _, n := range notes {
		into := r.Namespace + "/" + n.Into
		switch {
		case n.Dropped:
			ignore(fmt.Sprintf("spec.subsets[%d]", n.Subset), fmt.Sprintf(
				"merged into DestinationRule %s, created earlier for %s, which already defines subset %q: its definition applies (Istio's merge)",
				into, r.Host, r.Subsets[n.Subset].Name))
		case n.PolicyDropped:
			ignore("spec.trafficPolicy", fmt.Sprintf(
				"merged into DestinationRule %s, created earlier for %s, whose trafficPolicy applies (Istio's merge keeps the first)", into, r.Host))
		default:
			st.Merged = append(st.Merged, configstatus.Field{Path: "spec", Why: fmt.Sprintf(
				"merged into DestinationRule %s, created earlier for %s in this namespace: its subsets are added to that rule's, and its trafficPolicy applies if that rule has none (Istio's merge)",
				into, r.Host)})
		}
	}
	return st
}

// notify tells the handlers that the rules of hosts changed.
func (p *Policies) notify(hosts []model.Hostname) {
	for _, h := range hosts {
		p.handlers.configChanged(model.DestinationRuleKey(h))
	}
}

// set records an object's rule (nil: gone) and returns the hosts whose
// rules changed.
func (p *Policies) set(key string, rule *model.DestinationRule) []model.Hostname {
	p.mu.Lock()
	defer p.mu.Unlock()
	var hosts []model.Hostname
	selectorWildcards := slices.Clone(p.selectors.WildcardHosts())
	if old := p.rules[key]; old != nil {
		hosts = append(hosts, old.Host)
		if !p.unsetSelector(old) {
			delete(p.naming[old.Host], key)
		}
	}
	if rule != nil && p.setSelector(key, rule) {
		hosts = append(hosts, rule.Host)
	} else if rule != nil {
		p.rules[key] = rule
		hosts = append(hosts, rule.Host)
		if p.naming[rule.Host] == nil {
			p.naming[rule.Host] = map[string]*model.DestinationRule{}
		}
		p.naming[rule.Host][key] = rule
	} else {
		delete(p.rules, key)
	}
	hosts = slices.Compact(hosts)
	wildcardsChanged := !slices.Equal(selectorWildcards, p.selectors.WildcardHosts())
	for _, h := range hosts {
		wildcardsChanged = p.reindex(h) || wildcardsChanged
	}
	if wildcardsChanged && !slices.Contains(hosts, "*") {
		// The set of wildcard hosts changed: what read a host's rules
		// named only the wildcards that existed (model.AppendRuleKeys),
		// and hears of the others under "*".
		hosts = append(hosts, "*")
	}
	return hosts
}

// reindex rebuilds the rules of one host from naming, and reports whether
// the set of wildcard hosts changed.
func (p *Policies) reindex(h model.Hostname) bool {
	byNS := map[string][]*model.DestinationRule{}
	for _, r := range p.naming[h] {
		byNS[r.Namespace] = append(byNS[r.Namespace], r)
	}
	_, had := p.index.ByHost[h]
	if len(byNS) == 0 {
		delete(p.index.ByHost, h)
		delete(p.naming, h)
	} else {
		rules := make(model.HostRules, len(byNS))
		for ns, rs := range byNS {
			model.SortRules(rs)
			rules[ns] = model.ConsolidateRules(rs, p.defaultPrivate)
		}
		p.index.ByHost[h] = rules
	}
	_, has := p.index.ByHost[h]
	if has == had || !strings.HasPrefix(string(h), "*") {
		return false
	}
	p.index.Wildcards = slices.DeleteFunc(p.index.Wildcards, func(w model.Hostname) bool { return w == h })
	if has {
		p.index.Wildcards = append(p.index.Wildcards, h)
		model.SortWildcards(p.index.Wildcards)
	}
	return true
}

// AppendDestinationRuleKeys implements model.PolicyIndex.
func (p *Policies) AppendDestinationRuleKeys(deps []model.ConfigKey, host model.Hostname) []model.ConfigKey {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return model.AppendRuleKeysWithSelectors(deps, host, p.index.Wildcards, &p.selectors)
}

// DestinationRuleFor picks the rule for a client as Istio does
// (model.RuleIndex.Choose).
func (p *Policies) DestinationRuleFor(host model.Hostname, serviceNamespace, clientNamespace string) (*model.DestinationRule, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.index.Choose(host, serviceNamespace, clientNamespace, p.root)
}

// SubsetDefined reports whether a rule for host, of any namespace,
// defines subset: a VirtualService naming a subset no rule defines is
// refused.
func (p *Policies) SubsetDefined(host model.Hostname, subset string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	found := p.selectors.DefinesSubset(host, subset)
	if !found {
		p.index.Rules(host, func(r *model.DestinationRule) bool {
			found = r.Subset(subset) != nil
			return !found
		})
	}
	return found
}

var _ model.PolicyIndex = (*Policies)(nil)
