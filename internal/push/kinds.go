package push

import (
	"slices"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Kinds lists, once each and in KeyKind order, the kinds of model change
// the request carries, for the push trigger metric: model.KindService
// for a service's definition, model.KindEndpoints for endpoints alone,
// and the kind of each configuration key. What a change implies (a
// service's endpoints, identities and namespace; endpoints' identities)
// is not listed again: it caused nothing by itself.
func (r *Request) Kinds() []model.KeyKind {
	var kinds []model.KeyKind
	add := func(k model.KeyKind) {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	if len(r.Services) > 0 {
		add(model.KindService)
	}
	if len(r.EndpointsOnly) > 0 {
		add(model.KindEndpoints)
	}
	for k := range r.Configs {
		add(k.Kind)
	}
	slices.Sort(kinds)
	return kinds
}
