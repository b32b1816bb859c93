package crd

import (
	"cmp"
	"slices"

	"github.com/meshpilot/meshpilot/internal/model"
)

// gatewayVSPrefix starts the name of the VirtualService a namespace's
// routes for one host merge into: "~" is in no Kubernetes name, so it
// never meets a VirtualService's.
const gatewayVSPrefix = "gateway-api~"

// MergeGatewayRoutes merges converted routes as istiod does for the
// mesh: one VirtualService per namespace of the routes and Service host
// (a producer route's is of the Service's namespace, a consumer route's
// of its own), its rules those of every route attached to the host,
// oldest route first (then by namespace and name), ordered by the
// Gateway API's precedence (gatewayRulePrecedence), which keeps that
// order among equals. It takes the oldest route's creation time.
func MergeGatewayRoutes(routes []*GatewayRoute) []*model.VirtualService {
	sorted := slices.Clone(routes)
	slices.SortStableFunc(sorted, func(a, b *GatewayRoute) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind))
	})
	type key struct {
		ns   string
		host model.Hostname
	}
	byKey := map[key]*model.VirtualService{}
	var order []key
	for _, r := range sorted {
		for _, p := range r.Parents {
			k := key{r.Namespace, p.Host}
			vs := byKey[k]
			if vs == nil {
				vs = &model.VirtualService{Namespace: r.Namespace, Name: gatewayVSPrefix + string(p.Host), Hosts: []model.Hostname{p.Host},
					Created: r.Created, Gateway: true, Producer: p.Producer}
				byKey[k] = vs
				order = append(order, k)
			}
			vs.HTTP = append(vs.HTTP, p.Rules...)
		}
	}
	out := make([]*model.VirtualService, 0, len(order))
	for _, k := range order {
		vs := byKey[k]
		slices.SortStableFunc(vs.HTTP, gatewayRulePrecedence)
		out = append(out, vs)
	}
	slices.SortFunc(out, func(a, b *model.VirtualService) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// gatewayRulePrecedence orders two rules of one match each as the
// Gateway API's HTTPRoute precedence (and istiod's sortHTTPRoutes): an
// exact path before a prefix before a regular expression before none,
// a longer path first, then a method match, then more header matches,
// then more query parameter matches; a rule without a match last.
func gatewayRulePrecedence(a, b model.HTTPRoute) int {
	switch {
	case len(a.Match) == 0 && len(b.Match) == 0:
		return 0
	case len(a.Match) == 0:
		return 1
	case len(b.Match) == 0:
		return -1
	}
	m1, m2 := &a.Match[0], &b.Match[0]
	h1, method1 := headerCounts(m1)
	h2, method2 := headerCounts(m2)
	return cmp.Or(
		cmp.Compare(uriRank(m2), uriRank(m1)),
		cmp.Compare(uriLength(m2), uriLength(m1)),
		cmp.Compare(method2, method1),
		cmp.Compare(h2, h1),
		cmp.Compare(len(m2.QueryParams), len(m1.QueryParams)),
	)
}

func uriRank(m *model.HTTPMatch) int {
	if m.URI == nil {
		return -1
	}
	switch m.URI.Kind {
	case model.MatchExact:
		return 3
	case model.MatchPrefix:
		return 2
	case model.MatchRegex:
		return 1
	}
	return -1
}

func uriLength(m *model.HTTPMatch) int {
	if m.URI == nil {
		return 0
	}
	return len(m.URI.Value)
}

// headerCounts counts a match's header matches apart from the method's
// (a ":method" match), and says whether it has that one.
func headerCounts(m *model.HTTPMatch) (headers, method int) {
	for _, h := range m.Headers {
		if h.Name == ":method" {
			method = 1
			continue
		}
		headers++
	}
	return headers, method
}
