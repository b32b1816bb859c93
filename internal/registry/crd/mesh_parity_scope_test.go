package crd

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestRoutesDefaultExportTo: defaultVirtualServiceExportTo is the
// exportTo of a VirtualService that says none, as in istiod; its change
// pushes the hosts of those VirtualServices alone.
func TestRoutesDefaultExportTo(t *testing.T) {
	store := newMemStore()
	mesh := &fakeMesh{settings: model.DefaultMeshSettings()}
	routes := NewRoutes(store, RouteOptions{Mesh: mesh})
	var events []string
	routes.AppendEventHandler(func(ev model.Event) { events = append(events, ev.Config.Name) })
	store.applyVS(vsFromYAML(t, "quiet", "  hosts: [reviews]\n  http:\n  - route: [{destination: {host: reviews}}]"))
	store.applyVS(vsFromYAML(t, "said", "  hosts: [ratings]\n  exportTo: ['*']\n  http:\n  - route: [{destination: {host: ratings}}]"))
	const reviews, ratings = "reviews.ns.svc.cluster.local", "ratings.ns.svc.cluster.local"
	seen := func(h model.Hostname, client string) bool {
		vs, _ := routes.VirtualServiceFor(h, client)
		return vs != nil
	}
	for _, step := range []struct {
		defaults             []string
		events               []string
		reviewsOther, ownSee bool
	}{
		{nil, nil, true, true},
		{[]string{"."}, []string{reviews}, false, true},
		{[]string{"~"}, []string{reviews}, false, false},
		{nil, []string{reviews}, true, true},
	} {
		events = nil
		m := *mesh.settings
		m.DefaultExportTo.VirtualService = step.defaults
		mesh.set(&m)
		if !slices.Equal(events, step.events) || seen(reviews, "other") != step.reviewsOther || seen(reviews, "ns") != step.ownSee || !seen(ratings, "other") {
			t.Errorf("default %v: events %v, reviews seen from other %v, from ns %v, ratings from other %v; want %v, %v, %v, true",
				step.defaults, events, seen(reviews, "other"), seen(reviews, "ns"), seen(ratings, "other"), step.events, step.reviewsOther, step.ownSee)
		}
	}
}

// TestPoliciesRootNamespaceDefault: without a root namespace given or
// set by MeshConfig, istio-system's rules apply mesh-wide, as in istiod.
func TestPoliciesRootNamespaceDefault(t *testing.T) {
	store := newRuleStore()
	p := NewPolicies(store, PolicyOptions{Mesh: &fakeMesh{settings: model.DefaultMeshSettings()}})
	store.apply("istio-system", "mesh-wide", &networkingv1.DestinationRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "mesh-wide"},
		Spec:       apinetworking.DestinationRule{Host: "*.cluster.local"},
	})
	if r, _ := p.DestinationRuleFor("reviews.shop.svc.cluster.local", "shop", "web"); r == nil || r.Name != "mesh-wide" {
		t.Errorf("rule %v, want istio-system's mesh-wide", r)
	}
}
