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
	// MeshConfig rootNamespace) while Mesh names none.
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
// The root namespace follows the mesh settings (PolicyOptions.Mesh); its
// change is reported as the DestinationRuleKey of each host with a rule
// in the old or the new root namespace, the only hosts whose choice of
// rule it can change.
//
// A rule with a workloadSelector is kept apart (policies_selector.go):
// it applies only to the matching clients of its namespace
// (model.SelectorPolicyIndex) and takes no part in the choice below.
//
// Two rules of one namespace for one host are not merged as Istio merges
// them: the first by name applies and the others are refused (their
// status says which rule won), until it goes. When exportTo hides the
// winner from a client, that namespace has no rule for the client.
//
// A rule for a wildcard host ("*.example.com") applies to the hosts it
// matches in its namespace's place when the namespace has no rule for
// the host itself, the most specific wildcard first (model.RulesFor);
// its change is reported under the wildcard's DestinationRuleKey, which
// what reads a host's rules depends on (model.AppendRuleKeys), and under
// "*" as well when the wildcard gains its first rule or loses its last.
type Policies struct {
	reg  Store
	opts PolicyOptions

	handlers modelHandlers

	mu sync.RWMutex // guards root, rules, naming, current, byHost, wildcards and selectors
	// root is the root namespace in force.
	root string
	// rules holds each object's converted rule, by namespace/name: its
	// last good version.
	rules map[string]*model.DestinationRule
	// naming holds the same rules per host or wildcard host, by
	// namespace/name: what byHost is built from, so that a change costs
	// the rules of the hosts it touches, not every rule.
	naming map[model.Hostname]map[string]*model.DestinationRule
	// current holds, by namespace/name, the objects whose latest version
	// converted, with their status and reference: whether another rule
	// shadows them decides what their status says.
	current map[string]convertedRule
	// byHost holds, per host or wildcard host, the rule of each
	// namespace that has one.
	byHost map[model.Hostname]model.HostRules
	// wildcards are the wildcard hosts of byHost, most specific first.
	wildcards []model.Hostname
	// selectors holds the rules with a workloadSelector, kept out of
	// naming and byHost: they neither shadow nor are shadowed by the
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
		byHost:  map[model.Hostname]model.HostRules{},
	}
	p.root = p.rootOf(nil)
	if opts.Mesh != nil {
		p.root = p.rootOf(opts.Mesh.Mesh())
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
	p.reportShadowed(hosts)
	p.notify(hosts)
}

// convertedRule is an object whose latest version converted.
type convertedRule struct {
	ref    configstatus.Ref
	status configstatus.Status
}

// reportShadowed records the status of every converted rule of hosts:
// its conversion's, or refused when an earlier rule by name of its
// namespace has the same host (Istio would merge the two; meshpilot
// applies the first alone, and says so rather than dropping the other
// silently).
func (p *Policies) reportShadowed(hosts []model.Hostname) {
	type update struct {
		ref    configstatus.Ref
		status configstatus.Status
	}
	var updates []update
	p.mu.RLock()
	for _, h := range hosts {
		for key, r := range p.naming[h] {
			c, ok := p.current[key]
			if !ok {
				continue // refused on its own: its status says why
			}
			st := c.status
			if w := p.byHost[h][r.Namespace]; w != nil && w.Name != r.Name {
				st = configstatus.Refuse("spec.host", fmt.Sprintf("DestinationRule %s/%s, first by name, already applies to %s in this namespace", w.Namespace, w.Name, h))
			}
			updates = append(updates, update{c.ref, st})
		}
	}
	p.mu.RUnlock()
	for _, u := range updates {
		p.opts.Status.Set(u.ref, u.status)
	}
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
	wildcardsChanged := false
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
	byNS := model.HostRules{}
	for _, r := range p.naming[h] {
		byNS.Add(r)
	}
	_, had := p.byHost[h]
	if len(byNS) == 0 {
		delete(p.byHost, h)
		delete(p.naming, h)
	} else {
		p.byHost[h] = byNS
	}
	_, has := p.byHost[h]
	if has == had || !strings.HasPrefix(string(h), "*") {
		return false
	}
	p.wildcards = slices.DeleteFunc(p.wildcards, func(w model.Hostname) bool { return w == h })
	if has {
		p.wildcards = append(p.wildcards, h)
		model.SortWildcards(p.wildcards)
	}
	return true
}

// AppendDestinationRuleKeys implements model.PolicyIndex.
func (p *Policies) AppendDestinationRuleKeys(deps []model.ConfigKey, host model.Hostname) []model.ConfigKey {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return model.AppendRuleKeys(deps, host, p.wildcards)
}

// DestinationRuleFor picks the rule for a client as Istio does
// (model.HostRules.Choose).
func (p *Policies) DestinationRuleFor(host model.Hostname, serviceNamespace, clientNamespace string) (*model.DestinationRule, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return model.RulesFor(p.byHost, p.wildcards, host).Choose(serviceNamespace, clientNamespace, p.root)
}

// SubsetDefined reports whether a rule for host, of any namespace,
// defines subset: a VirtualService naming a subset no rule defines is
// refused.
func (p *Policies) SubsetDefined(host model.Hostname, subset string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	defines := func(rules model.HostRules) bool {
		for _, r := range rules {
			if r.Subset(subset) != nil {
				return true
			}
		}
		return false
	}
	if defines(p.byHost[host]) || p.selectors.DefinesSubset(host, subset) {
		return true
	}
	for _, w := range p.wildcards {
		if w != host && model.WildcardMatches(w, host) && defines(p.byHost[w]) {
			return true
		}
	}
	return false
}

var _ model.PolicyIndex = (*Policies)(nil)
