package crd

import (
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// memStore is a Store of DestinationRules and VirtualServices held in
// memory; apply and remove call the handlers as the registry does.
type memStore struct {
	drs      map[string]*networkingv1.DestinationRule
	vss      map[string]*networkingv1.VirtualService
	handlers []EventHandler
}

func newMemStore() *memStore {
	return &memStore{drs: map[string]*networkingv1.DestinationRule{}, vss: map[string]*networkingv1.VirtualService{}}
}

func (s *memStore) DestinationRules() []*networkingv1.DestinationRule { return nil }
func (s *memStore) VirtualServices() []*networkingv1.VirtualService   { return nil }
func (s *memStore) ServiceEntries() []*networkingv1.ServiceEntry      { return nil }
func (s *memStore) WorkloadEntries() []*networkingv1.WorkloadEntry    { return nil }
func (s *memStore) DestinationRule(ns, name string) *networkingv1.DestinationRule {
	return s.drs[ns+"/"+name]
}
func (s *memStore) VirtualService(ns, name string) *networkingv1.VirtualService {
	return s.vss[ns+"/"+name]
}
func (s *memStore) ServiceEntry(string, string) *networkingv1.ServiceEntry   { return nil }
func (s *memStore) WorkloadEntry(string, string) *networkingv1.WorkloadEntry { return nil }
func (s *memStore) AppendEventHandler(h EventHandler)                        { s.handlers = append(s.handlers, h) }

func (s *memStore) notify(kind Kind, ns, name string) {
	for _, h := range s.handlers {
		h(Event{Kind: kind, Namespace: ns, Name: name})
	}
}

func (s *memStore) applyVS(vs *networkingv1.VirtualService) {
	s.vss[vs.Namespace+"/"+vs.Name] = vs
	s.notify(VirtualService, vs.Namespace, vs.Name)
}

func (s *memStore) removeVS(ns, name string) {
	delete(s.vss, ns+"/"+name)
	s.notify(VirtualService, ns, name)
}

func (s *memStore) applyDR(t *testing.T, name, spec string) {
	t.Helper()
	var dr networkingv1.DestinationRule
	if err := yaml.UnmarshalStrict([]byte("metadata: {namespace: ns, name: "+name+"}\nspec:\n"+spec), &dr); err != nil {
		t.Fatal(err)
	}
	s.drs["ns/"+name] = &dr
	s.notify(DestinationRule, "ns", name)
}

// TestRoutesFollowTheStore: each change reports the hosts it touched;
// a refused version leaves the last good one in force; a VirtualService
// naming a subset is accepted once a rule defines it; of two claiming a
// host in one namespace, the first by name has it and the other is
// reported refused.
func TestRoutesFollowTheStore(t *testing.T) {
	store := newMemStore()
	reporter := configstatus.NewReporter()
	policies := NewPolicies(store, PolicyOptions{})
	routes := NewRoutes(store, RouteOptions{Policies: policies, Status: reporter})
	var events []string
	routes.AppendEventHandler(func(ev model.Event) { events = append(events, ev.Config.String()) })
	const reviews, ratings = "reviews.ns.svc.cluster.local", "ratings.ns.svc.cluster.local"
	chosen := func(h model.Hostname) string {
		vs, _ := routes.VirtualServiceFor(h, "ns")
		if vs == nil {
			return ""
		}
		return vs.Name + ":" + vs.HTTP[0].Route[0].Subset
	}
	state := func(name string) string {
		st, ok := reporter.Get(configstatus.Ref{Kind: "VirtualService", Namespace: "ns", Name: name})
		if !ok {
			return "none"
		}
		return configstatus.Entry{Status: st}.State()
	}
	vs := func(name, host, subset string) func() {
		return func() {
			store.applyVS(vsFromYAML(t, name, "  hosts: ["+host+"]\n  http:\n  - route: [{destination: {host: reviews, subset: \""+subset+"\"}}]"))
		}
	}
	for _, step := range []struct {
		desc             string
		do               func()
		events           []string
		reviews, ratings string // chosen VirtualService:subset
		stateB, stateA   string // reported states of b and a
	}{
		{"a subset no rule defines: refused", vs("b", "reviews", "v1"), nil, "", "", "refused", "none"},
		{"the rule comes: accepted", func() { store.applyDR(t, "r", "  host: reviews\n  subsets: [{name: v1, labels: {v: \"1\"}}]") },
			[]string{"VirtualService/" + reviews}, "b:v1", "", "applied", "none"},
		{"refused again: the last good stays", vs("b", "reviews", "v9"), nil, "b:v1", "", "refused", "none"},
		{"moved to ratings: both hosts", vs("b", "ratings", ""), []string{"VirtualService/" + ratings, "VirtualService/" + reviews}, "", "b:", "applied", "none"},
		{"a claims ratings first by name", vs("a", "ratings", "v1"), []string{"VirtualService/" + ratings}, "", "a:v1", "refused", "applied"},
		{"a goes: b has ratings again", func() { store.removeVS("ns", "a") }, []string{"VirtualService/" + ratings}, "", "b:", "applied", "none"},
		{"b goes", func() { store.removeVS("ns", "b") }, []string{"VirtualService/" + ratings}, "", "", "none", "none"},
	} {
		events = nil
		step.do()
		if !slices.Equal(events, step.events) || chosen(reviews) != step.reviews || chosen(ratings) != step.ratings ||
			state("b") != step.stateB || state("a") != step.stateA {
			t.Fatalf("%s: events %v, reviews %q, ratings %q, b %s, a %s; want %v, %q, %q, %s, %s", step.desc,
				events, chosen(reviews), chosen(ratings), state("b"), state("a"),
				step.events, step.reviews, step.ratings, step.stateB, step.stateA)
		}
	}
}

// TestRoutesFollowWildcardRules: a VirtualService naming a subset that
// only a rule for a wildcard host defines is accepted once that rule
// comes, and refused again when it goes.
func TestRoutesFollowWildcardRules(t *testing.T) {
	store := newMemStore()
	reporter := configstatus.NewReporter()
	policies := NewPolicies(store, PolicyOptions{})
	NewRoutes(store, RouteOptions{Policies: policies, Status: reporter})
	state := func() string {
		st, ok := reporter.Get(configstatus.Ref{Kind: "VirtualService", Namespace: "ns", Name: "b"})
		if !ok {
			return "none"
		}
		return configstatus.Entry{Status: st}.State()
	}
	store.applyVS(vsFromYAML(t, "b", "  hosts: [reviews]\n  http:\n  - route: [{destination: {host: reviews, subset: v1}}]"))
	if got := state(); got != "refused" {
		t.Fatalf("before the rule: %s, want refused", got)
	}
	store.applyDR(t, "wide", "  host: \"*.ns.svc.cluster.local\"\n  subsets: [{name: v1, labels: {v: \"1\"}}]")
	if got := state(); got != "applied" {
		t.Fatalf("after the wildcard rule: %s, want applied", got)
	}
	delete(store.drs, "ns/wide")
	store.notify(DestinationRule, "ns", "wide")
	if got := state(); got != "refused" {
		t.Fatalf("after the wildcard rule went: %s, want refused", got)
	}
}
