package crd

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// TestPoliciesDuplicateHost: of two rules of one namespace for one host,
// the first by name applies and the other is refused, saying which won;
// when the first goes the other applies; a rule of another namespace is
// no duplicate. A subset without labels is refused and its last good
// version stays.
func TestPoliciesDuplicateHost(t *testing.T) {
	store := newRuleStore()
	status := configstatus.NewReporter()
	p := NewPolicies(store, PolicyOptions{Status: status, RootNamespace: "istio-system"})
	const reviews = model.Hostname("reviews.ns.svc.cluster.local")
	rule := func(ns, name string, subsets ...*apinetworking.Subset) *networkingv1.DestinationRule {
		return &networkingv1.DestinationRule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: apinetworking.DestinationRule{Host: string(reviews), Subsets: subsets}}
	}
	v1 := &apinetworking.Subset{Name: "v1", Labels: map[string]string{"version": "v1"}}
	state := func(ns, name string) string {
		st, ok := status.Get(configstatus.Ref{Kind: "DestinationRule", Namespace: ns, Name: name})
		if !ok {
			return "none"
		}
		if st.Refused != nil {
			return "refused " + st.Refused.Path + ": " + st.Refused.Why
		}
		return configstatus.Entry{Status: st}.State()
	}
	inForce := func() string {
		r, _ := p.DestinationRuleFor(reviews, "ns", "ns")
		if r == nil {
			return ""
		}
		return r.Name
	}
	for _, step := range []struct {
		desc, ns, name string
		dr             *networkingv1.DestinationRule
		want           map[string]string // namespace/name -> state (prefix)
		wantInForce    string
	}{
		{"b alone applies", "ns", "b", rule("ns", "b"), map[string]string{"ns/b": "applied"}, "b"},
		{"a, first by name, takes over; b is refused", "ns", "a", rule("ns", "a"),
			map[string]string{"ns/a": "applied", "ns/b": "refused spec.host: DestinationRule ns/a, first by name, already applies"}, "a"},
		{"another namespace's rule is no duplicate", "other", "c", rule("other", "c"),
			map[string]string{"other/c": "applied", "ns/b": "refused"}, "a"},
		{"a subset without labels is refused; a's last good version stays", "ns", "a", rule("ns", "a", &apinetworking.Subset{Name: "v1"}),
			map[string]string{"ns/a": "refused spec.subsets[0].labels", "ns/b": "refused spec.host"}, "a"},
		{"two subsets with one name are refused", "ns", "a", rule("ns", "a", v1, v1),
			map[string]string{"ns/a": "refused spec.subsets[1].name: subset \"v1\" is defined twice (spec.subsets[0])"}, "a"},
		{"a goes: b applies", "ns", "a", nil, map[string]string{"ns/a": "none", "ns/b": "applied"}, "b"},
	} {
		store.apply(step.ns, step.name, step.dr)
		for obj, want := range step.want {
			ns, name, _ := strings.Cut(obj, "/")
			if got := state(ns, name); !strings.HasPrefix(got, want) {
				t.Fatalf("%s: %s is %q, want %q", step.desc, obj, got, want)
			}
		}
		if got := inForce(); got != step.wantInForce {
			t.Fatalf("%s: rule in force %q, want %q", step.desc, got, step.wantInForce)
		}
	}
}
