package crd

import (
	"slices"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// Rules with a workloadSelector apply only to the matching clients of
// their own namespace, as in Istio, which never exports them: Policies
// keeps them apart (model.SelectorRules), where they neither shadow the
// namespace's plain rule for the host nor are refused by it.

// setSelector records rule under key if it has a workloadSelector, and
// reports whether it did. p.mu is held.
func (p *Policies) setSelector(key string, rule *model.DestinationRule) bool {
	if rule.Selector == nil {
		return false
	}
	p.rules[key] = rule
	p.selectors.Add(rule)
	return true
}

// unsetSelector forgets old if it has a workloadSelector, and reports
// whether it did. p.mu is held.
func (p *Policies) unsetSelector(old *model.DestinationRule) bool {
	if old.Selector == nil {
		return false
	}
	p.selectors.Remove(old.Host, old.Namespace, old.Name)
	return true
}

// whyPlainKept is reported on a rule with a workloadSelector whose
// namespace has no plain rule for the host: there meshpilot and istiod
// differ for the clients it does not match.
const whyPlainKept = "the clients of this namespace that it does not match follow the rule they would without it (the service's or the root namespace's): istiod, finding only selector rules for the host in their namespace, gives them none"

// reportSelectors records the status of every rule with a
// workloadSelector for hosts: its conversion's, and whyPlainKept while
// its namespace has no plain rule for its host.
func (p *Policies) reportSelectors(hosts []model.Hostname) {
	type update struct {
		ref    configstatus.Ref
		status configstatus.Status
	}
	var updates []update
	p.mu.RLock()
	for _, h := range hosts {
		for _, r := range p.selectors.Of(h) {
			c, ok := p.current[r.Namespace+"/"+r.Name]
			if !ok {
				continue
			}
			st := c.status
			if p.index.ByHost[h][r.Namespace] == nil {
				st.IgnoredGRPC = append(slices.Clip(st.IgnoredGRPC), configstatus.Field{Path: "spec.workloadSelector", Why: whyPlainKept})
				st.IgnoredEnvoy = append(slices.Clip(st.IgnoredEnvoy), configstatus.Field{Path: "spec.workloadSelector", Why: whyPlainKept})
			}
			updates = append(updates, update{c.ref, st})
		}
	}
	p.mu.RUnlock()
	for _, u := range updates {
		p.opts.Status.Set(u.ref, u.status)
	}
}

// SelectorRulesFor implements model.SelectorPolicyIndex.
func (p *Policies) SelectorRulesFor(host model.Hostname, ns string) ([]*model.DestinationRule, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.selectors.For(host, ns)
}

var _ model.SelectorPolicyIndex = (*Policies)(nil)
