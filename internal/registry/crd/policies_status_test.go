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

// ruleStore is a Store of DestinationRules set by the test, which sends
// the events itself.
type ruleStore struct {
	Store   // the other kinds: not read by Policies
	rules   map[string]*networkingv1.DestinationRule
	handler EventHandler
}

func (s *ruleStore) DestinationRule(namespace, name string) *networkingv1.DestinationRule {
	return s.rules[namespace+"/"+name]
}

func (s *ruleStore) AppendEventHandler(h EventHandler) { s.handler = h }

func newRuleStore() *ruleStore {
	return &ruleStore{rules: map[string]*networkingv1.DestinationRule{}}
}

// apply puts dr in the store as namespace/name (nil: deletes it) and
// tells the handler, as the registry does.
func (s *ruleStore) apply(namespace, name string, dr *networkingv1.DestinationRule) {
	if dr == nil {
		delete(s.rules, namespace+"/"+name)
	} else {
		s.rules[namespace+"/"+name] = dr
	}
	s.handler(Event{Kind: DestinationRule, Namespace: namespace, Name: name})
}

// TestPoliciesRecordStatus: every DestinationRule's status is recorded as
// it comes and goes; a refused update leaves the last good rule in force
// and pushes nothing, and fixing it applies it again.
func TestPoliciesRecordStatus(t *testing.T) {
	store := &ruleStore{rules: map[string]*networkingv1.DestinationRule{}}
	status := configstatus.NewReporter()
	p := NewPolicies(store, PolicyOptions{Status: status})
	var pushed []model.Hostname
	p.AppendEventHandler(func(ev model.Event) { pushed = append(pushed, model.Hostname(ev.Config.Name)) })
	ref := configstatus.Ref{Kind: "DestinationRule", Namespace: "ns", Name: "reviews"}
	const reviews = model.Hostname("reviews.ns.svc.cluster.local")
	rule := func(host, lb string) *networkingv1.DestinationRule {
		return &networkingv1.DestinationRule{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "reviews"},
			Spec: apinetworking.DestinationRule{Host: host, TrafficPolicy: &apinetworking.TrafficPolicy{
				LoadBalancer: &apinetworking.LoadBalancerSettings{LbPolicy: &apinetworking.LoadBalancerSettings_Simple{
					Simple: apinetworking.LoadBalancerSettings_SimpleLB(apinetworking.LoadBalancerSettings_SimpleLB_value[lb])}}}},
		}
	}
	for _, step := range []struct {
		desc       string
		obj        *networkingv1.DestinationRule
		wantState  string // "" when no status is recorded
		wantWhy    string
		wantLB     model.LoadBalancer // the rule in force for reviews
		wantPushed []model.Hostname
	}{
		{"a rule is applied", rule("reviews", "RANDOM"), "applied", "", model.LBRandom, []model.Hostname{reviews}},
		{"a misplaced wildcard is refused; the last good rule stays", rule("reviews.*.svc.cluster.local", "LEAST_REQUEST"), "refused", `a wildcard is allowed only as the whole first label ("*.example.com")`, model.LBRandom, nil},
		{"a rule without a host is refused", rule("", "LEAST_REQUEST"), "refused", "a rule needs a host", model.LBRandom, nil},
		{"the fixed rule is applied", rule("reviews", "LEAST_REQUEST"), "applied", "", model.LBLeastRequest, []model.Hostname{reviews}},
		{"a deleted rule has no status", nil, "", "", model.LBDefault, []model.Hostname{reviews}},
	} {
		pushed = nil
		if step.obj == nil {
			delete(store.rules, "ns/reviews")
		} else {
			store.rules["ns/reviews"] = step.obj
		}
		store.handler(Event{Kind: DestinationRule, Namespace: "ns", Name: "reviews"})

		var state, why string
		if st, ok := status.Get(ref); ok {
			e := configstatus.Entry{Ref: ref, Status: st}
			state = e.State()
			if st.Refused != nil {
				why = st.Refused.Path + ": " + st.Refused.Why
			}
		}
		if state != step.wantState || (step.wantWhy != "" && why != "spec.host: "+step.wantWhy) {
			t.Fatalf("%s: status %q %q, want %q %q", step.desc, state, why, step.wantState, "spec.host: "+step.wantWhy)
		}
		lb := model.LBDefault
		if r, _ := p.DestinationRuleFor(reviews, "ns", "ns"); r != nil {
			lb = r.Policy.LoadBalancer
		}
		if lb != step.wantLB || !slices.Equal(pushed, step.wantPushed) {
			t.Fatalf("%s: load balancer %v, pushed %v; want %v, %v", step.desc, lb, pushed, step.wantLB, step.wantPushed)
		}
	}
}
