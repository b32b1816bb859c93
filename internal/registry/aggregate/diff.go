package aggregate

import (
	"slices"

	"github.com/meshpilot/meshpilot/internal/model"
)

// served is what a view serves for one hostname: the served definition
// and, by port name, the union of endpoints.
type served struct {
	def       *model.Service
	endpoints [][]*model.Endpoint // by index of def.Ports
}

func (v *view) served(hostname model.Hostname) served {
	_, def := v.lookup(hostname)
	if def == nil {
		return served{}
	}
	out := served{def: def, endpoints: make([][]*model.Endpoint, len(def.Ports))}
	for i, p := range def.Ports {
		out.endpoints[i] = v.union(hostname, p.Name, nil)
	}
	return out
}

// servedHostnames lists the hostnames either view serves, each once.
// A change of sources can change only those: a hostname nobody defines
// is served by neither.
func servedHostnames(old, next *view) []model.Hostname {
	var out []model.Hostname
	for _, v := range []*view{old, next} {
		for _, svc := range v.services() {
			out = append(out, svc.Hostname)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// change is the event that takes a consumer from what was served for a
// hostname to what is, by the package's rules: ServiceDeleted when it is
// served no more, ServiceChanged when it is new or its served definition
// differs, EndpointsChanged when only the union of endpoints differs,
// nothing when the two are equal (model.Service.Equal,
// model.Endpoint.Equal). SameServiceAccounts is left false: the union's
// identities are not compared, so they count as changed.
func change(hostname model.Hostname, before, after served) (model.Event, bool) {
	ev := model.Event{Hostname: hostname}
	switch {
	case after.def == nil && before.def == nil:
		return ev, false
	case after.def == nil:
		ev.Kind, ev.Namespace, ev.NoEndpoints = model.ServiceDeleted, before.def.Namespace, true
		return ev, true
	case !after.def.Equal(before.def):
		ev.Kind = model.ServiceChanged
	case !slices.EqualFunc(before.endpoints, after.endpoints, func(x, y []*model.Endpoint) bool {
		return slices.EqualFunc(x, y, (*model.Endpoint).Equal)
	}):
		ev.Kind = model.EndpointsChanged
	default:
		return ev, false
	}
	ev.Namespace = after.def.Namespace
	ev.NoEndpoints = !slices.ContainsFunc(after.endpoints, func(eps []*model.Endpoint) bool { return len(eps) > 0 })
	return ev, true
}
