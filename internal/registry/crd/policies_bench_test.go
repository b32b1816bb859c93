package crd

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
)

// BenchmarkRuleChange measures one DestinationRule change among n rules
// (each for its own host, one in a hundred for a wildcard host; two
// subsets each, as meshbench's rules have), status recorded: converting
// it, indexing it and reporting the statuses of its host's rules. It
// should cost the rules of the host it touches, not n.
func BenchmarkRuleChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			store := newRuleStore()
			NewPolicies(store, PolicyOptions{Status: configstatus.NewReporter(), RootNamespace: "istio-system"})
			rule := func(i int, version string) *networkingv1.DestinationRule {
				host := fmt.Sprintf("svc-%d", i)
				if i%100 == 0 {
					host = fmt.Sprintf("*.ext-%d.example.com", i)
				}
				return &networkingv1.DestinationRule{
					ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%50), Name: fmt.Sprintf("rule-%d", i)},
					Spec: apinetworking.DestinationRule{Host: host, Subsets: []*apinetworking.Subset{
						{Name: "v1", Labels: map[string]string{"version": "v1"}},
						{Name: "v2", Labels: map[string]string{"version": version}},
					}},
				}
			}
			for i := range n {
				dr := rule(i, "v2")
				store.apply(dr.Namespace, dr.Name, dr)
			}
			// The objects a change brings are made before the clock
			// runs: the store's work, not the index's.
			changed := []*networkingv1.DestinationRule{rule(n/2, "v3"), rule(n/2, "v2")}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				dr := changed[i%2]
				store.apply(dr.Namespace, dr.Name, dr)
			}
		})
	}
}

// BenchmarkRuleChangeWithRoutes is a rule change among n rules, each host
// routed by a VirtualService naming one of its subsets, as serve runs
// them: the VirtualServices naming a subset of the changed host are
// checked again, and only those.
func BenchmarkRuleChangeWithRoutes(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			store := newMemStore()
			NewRoutes(store, RouteOptions{Policies: NewPolicies(store, PolicyOptions{}), Status: configstatus.NewReporter()})
			rule := func(i int, version string) *networkingv1.DestinationRule {
				return &networkingv1.DestinationRule{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("rule-%d", i)},
					Spec: apinetworking.DestinationRule{Host: fmt.Sprintf("svc-%d", i), Subsets: []*apinetworking.Subset{
						{Name: "v1", Labels: map[string]string{"version": "v1"}},
						{Name: "v2", Labels: map[string]string{"version": version}},
					}},
				}
			}
			apply := func(dr *networkingv1.DestinationRule) {
				store.drs[dr.Namespace+"/"+dr.Name] = dr
				store.notify(DestinationRule, dr.Namespace, dr.Name)
			}
			for i := range n {
				apply(rule(i, "v2"))
				host := fmt.Sprintf("svc-%d", i)
				store.applyVS(&networkingv1.VirtualService{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("route-%d", i)},
					Spec: apinetworking.VirtualService{Hosts: []string{host}, Http: []*apinetworking.HTTPRoute{{
						Route: []*apinetworking.HTTPRouteDestination{{Destination: &apinetworking.Destination{Host: host, Subset: "v1"}}},
					}}},
				})
			}
			changed := []*networkingv1.DestinationRule{rule(n/2, "v3"), rule(n/2, "v2")}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				apply(changed[i%2])
			}
		})
	}
}
