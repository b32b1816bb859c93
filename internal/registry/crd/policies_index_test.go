package crd

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// TestPoliciesRuleMovesHost: a rule that changes host leaves the old
// host's index and joins the new one's (rules are indexed by host, so a
// change looks at those two alone): both hosts are pushed, the rule it
// now meets is merged into it, the one it left applies alone again, and
// a subset is found where the rule is now. A wildcard host that gains its
// first rule or loses its last is pushed under "*" too (the wildcard set
// changed: model.AppendRuleKeys).
func TestPoliciesRuleMovesHost(t *testing.T) {
	store, status := newRuleStore(), configstatus.NewReporter()
	p := NewPolicies(store, PolicyOptions{Status: status})
	var pushed []string
	p.AppendEventHandler(func(ev model.Event) { pushed = append(pushed, ev.Config.Name) })
	const (
		reviews  = "reviews.ns.svc.cluster.local"
		ratings  = "ratings.ns.svc.cluster.local"
		wildcard = "*.ns.svc.cluster.local"
	)
	// apply gives rule name a subset of its own name on host ("": the
	// rule goes).
	apply := func(name, host string) {
		var dr *networkingv1.DestinationRule
		if host != "" {
			dr = &networkingv1.DestinationRule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
				Spec: apinetworking.DestinationRule{Host: host, Subsets: []*apinetworking.Subset{
					{Name: name, Labels: map[string]string{"rule": name}}}}}
		}
		store.apply("ns", name, dr)
	}
	inForce := func(host model.Hostname) string {
		if r, _ := p.DestinationRuleFor(host, "ns", "ns"); r != nil {
			return r.Name
		}
		return ""
	}
	merged := func(name string) bool {
		st, _ := status.Get(configstatus.Ref{Kind: "DestinationRule", Namespace: "ns", Name: name})
		return len(st.Merged) > 0
	}
	for _, step := range []struct {
		desc, name, host        string
		wantPushed              []string
		reviews, ratings        string // the rule in force for each
		mergedB, subsetAReviews bool
	}{
		{"b for ratings", "b", ratings, []string{ratings}, "", "b", false, false},
		{"a for reviews", "a", reviews, []string{reviews}, "a", "b", false, true},
		{"a moves to ratings: first by name, b merges into it", "a", ratings, []string{reviews, ratings}, "", "a", true, false},
		{"a moves to the namespace's wildcard: b applies again", "a", wildcard, []string{ratings, wildcard, "*"}, "a", "b", false, true},
		{"a goes", "a", "", []string{wildcard, "*"}, "", "b", false, false},
	} {
		pushed = nil
		apply(step.name, step.host)
		if !slices.Equal(pushed, step.wantPushed) {
			t.Errorf("%s: pushed %v, want %v", step.desc, pushed, step.wantPushed)
		}
		if r, g := inForce(reviews), inForce(ratings); r != step.reviews || g != step.ratings {
			t.Errorf("%s: in force for reviews %q, ratings %q; want %q, %q", step.desc, r, g, step.reviews, step.ratings)
		}
		if merged("b") != step.mergedB {
			t.Errorf("%s: b merged %v, want %v", step.desc, merged("b"), step.mergedB)
		}
		if got := p.SubsetDefined(reviews, "a"); got != step.subsetAReviews {
			t.Errorf("%s: subset a defined for reviews %v, want %v", step.desc, got, step.subsetAReviews)
		}
	}
}
