package crd

import (
	"slices"
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
// Not done yet: wildcard hosts are refused; two rules of one namespace
// for one host are not merged as Istio merges them: the first by name
// wins (and when exportTo hides it from a client, that namespace has no
// rule for the client).
type Policies struct {
	reg  Store
	opts PolicyOptions

	handlers modelHandlers

	mu sync.RWMutex // guards rules, byHost and root
	// root is the root namespace in force.
	root string
	// rules holds each object's converted rule, by namespace/name.
	rules map[string]*model.DestinationRule
	// byHost holds, per host, the rule of each namespace that has one.
	byHost map[model.Hostname]model.HostRules
}

// NewPolicies builds the policy view of reg; it follows reg's events, so
// call it before reg runs.
func NewPolicies(reg Store, opts PolicyOptions) *Policies {
	p := &Policies{
		reg:    reg,
		opts:   opts,
		rules:  map[string]*model.DestinationRule{},
		byHost: map[model.Hostname]model.HostRules{},
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
	ref := Ref(p.reg, DestinationRule, ev.Namespace, ev.Name)
	var now *model.DestinationRule
	if obj := p.reg.DestinationRule(ev.Namespace, ev.Name); obj != nil {
		var status configstatus.Status
		now, status = ConvertDestinationRule(obj, p.opts.DomainSuffix)
		p.opts.Status.Set(ref, status)
		if now == nil {
			return
		}
	} else {
		p.opts.Status.Delete(ref)
	}
	p.notify(p.set(ev.Namespace+"/"+ev.Name, now))
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
	}
	if rule != nil {
		p.rules[key] = rule
		hosts = append(hosts, rule.Host)
	} else {
		delete(p.rules, key)
	}
	hosts = slices.Compact(hosts)
	for _, h := range hosts {
		p.reindex(h)
	}
	return hosts
}

// reindex rebuilds the rules of one host from rules.
func (p *Policies) reindex(h model.Hostname) {
	byNS := model.HostRules{}
	for _, r := range p.rules {
		if r.Host != h {
			continue
		}
		byNS.Add(r)
	}
	if len(byNS) == 0 {
		delete(p.byHost, h)
		return
	}
	p.byHost[h] = byNS
}

// DestinationRuleFor picks the rule for a client as Istio does
// (model.HostRules.Choose).
func (p *Policies) DestinationRuleFor(host model.Hostname, serviceNamespace, clientNamespace string) (*model.DestinationRule, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.byHost[host].Choose(serviceNamespace, clientNamespace, p.root)
}

// SubsetDefined reports whether a rule for host, of any namespace,
// defines subset: a VirtualService naming a subset no rule defines is
// refused.
func (p *Policies) SubsetDefined(host model.Hostname, subset string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, r := range p.byHost[host] {
		if r.Subset(subset) != nil {
			return true
		}
	}
	return false
}

var _ model.PolicyIndex = (*Policies)(nil)
