package crd

import (
	"slices"
	"testing"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// TestPoliciesKeepSelectorRulesApart: a DestinationRule with a
// workloadSelector neither shadows nor is shadowed by the plain rule of
// its namespace for the host (Istio keeps both, the selector's for the
// clients it matches); it is offered to its namespace's clients only,
// whatever its exportTo (reported), and its changes are the host's.
func TestPoliciesKeepSelectorRulesApart(t *testing.T) {
	store := newMemStore()
	reporter := configstatus.NewReporter()
	p := NewPolicies(store, PolicyOptions{Status: reporter})
	var events []string
	p.AppendEventHandler(func(ev model.Event) { events = append(events, ev.Config.String()) })
	const reviews = model.Hostname("reviews.ns.svc.cluster.local")
	stateOf := func(name string) string {
		st, _ := reporter.Get(configstatus.Ref{Kind: "DestinationRule", Namespace: "ns", Name: name})
		return configstatus.Entry{Status: st}.State()
	}
	// "a" comes first by name: without a selector it would shadow "b".
	store.applyDR(t, "a", "  host: reviews\n  workloadSelector: {matchLabels: {app: tester}}\n  exportTo: ['*']\n  subsets: [{name: canary, labels: {v: \"2\"}}]")
	reported := func() []string {
		st, _ := reporter.Get(configstatus.Ref{Kind: "DestinationRule", Namespace: "ns", Name: "a"})
		var out []string
		for _, f := range st.IgnoredGRPC {
			out = append(out, f.Path)
		}
		return out
	}
	// Alone in its namespace for the host: where istiod would leave the
	// clients it does not match without a rule, which is reported.
	if got := reported(); !slices.Equal(got, []string{"spec.exportTo", "spec.workloadSelector"}) {
		t.Fatalf("a alone reports %v, want its exportTo and workloadSelector", got)
	}
	store.applyDR(t, "b", "  host: reviews\n  subsets: [{name: v1, labels: {v: \"1\"}}]")
	if got := reported(); !slices.Equal(got, []string{"spec.exportTo"}) {
		t.Fatalf("a beside b reports %v, want its exportTo only", got)
	}
	if got, _ := p.DestinationRuleFor(reviews, "ns", "ns"); got == nil || got.Name != "b" {
		t.Fatalf("the plain rule is %v, want b", got)
	}
	if got, _ := p.DestinationRuleFor(reviews, "ns", "other"); got == nil || got.Name != "b" {
		t.Fatalf("another namespace's client gets %v, want b", got)
	}
	sel, anyNS := p.SelectorRulesFor(reviews, "ns")
	if len(sel) != 1 || sel[0].Name != "a" || !anyNS || !sel[0].Selects(map[string]string{"app": "tester"}) {
		t.Fatalf("selector rules of ns %v (any %v), want a, selecting app=tester", sel, anyNS)
	}
	if sel, anyNS := p.SelectorRulesFor(reviews, "other"); len(sel) != 0 || !anyNS {
		t.Fatalf("selector rules of another namespace %v (any %v), want none but some elsewhere", sel, anyNS)
	}
	if stateOf("a") != configstatus.StatePartial || stateOf("b") != configstatus.StateApplied {
		t.Fatalf("a %s, b %s; want a partial (its exportTo), b applied", stateOf("a"), stateOf("b"))
	}
	if !p.SubsetDefined(reviews, "canary") {
		t.Errorf("the selector rule's subset is not defined")
	}
	events = nil
	delete(store.drs, "ns/a")
	store.notify(DestinationRule, "ns", "a")
	if sel, anyNS := p.SelectorRulesFor(reviews, "ns"); len(sel) != 0 || anyNS || !slices.Equal(events, []string{"DestinationRule/" + string(reviews)}) {
		t.Fatalf("after a went: selector rules %v (any %v), events %v", sel, anyNS, events)
	}
}

// TestSelectorWildcardRuleHeard: a rule with a workloadSelector for a
// wildcard host that had none is reported under "*" as well as its own
// key, as a plain wildcard rule is: what read a host's rules before named
// only the wildcards with rules, and hears of the new one under "*"; once
// it exists, a host it matches names its key.
func TestSelectorWildcardRuleHeard(t *testing.T) {
	store := newMemStore()
	p := NewPolicies(store, PolicyOptions{Status: configstatus.NewReporter()})
	var events []string
	p.AppendEventHandler(func(ev model.Event) { events = append(events, ev.Config.Name) })
	const reviews = model.Hostname("reviews.ns.svc.cluster.local")
	held := p.AppendDestinationRuleKeys(nil, reviews)
	store.applyDR(t, "w", "  host: '*.ns.svc.cluster.local'\n  workloadSelector: {matchLabels: {app: tester}}")
	if !slices.Contains(events, "*") || !slices.Contains(events, "*.ns.svc.cluster.local") {
		t.Fatalf("pushed %v, want the wildcard's key and *", events)
	}
	if !slices.ContainsFunc(held, func(k model.ConfigKey) bool { return slices.Contains(events, k.Name) }) {
		t.Fatalf("pushed %v, none of the keys reviews' readers held: %v", events, held)
	}
	var now []string
	for _, k := range p.AppendDestinationRuleKeys(nil, reviews) {
		now = append(now, k.Name)
	}
	if !slices.Contains(now, "*.ns.svc.cluster.local") {
		t.Fatalf("reviews' keys %v do not name the selector rule's wildcard", now)
	}
}
