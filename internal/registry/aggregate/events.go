package aggregate

import "github.com/meshpilot/meshpilot/internal/model"

// translate turns an event of source from into what changed in the
// aggregate's view of the hostname, looking at the sources as they are
// now (the change behind ev is visible already):
//
//   - No source defines the hostname: ServiceDeleted.
//   - An earlier source defines it: from's definition is shadowed, before
//     and after, so only the union of endpoints can have changed
//     (from's endpoints, or which of them match the served port names):
//     EndpointsChanged, whatever from did.
//   - from's definition is served: its own kind, ServiceChanged or
//     EndpointsChanged. A ServiceDeleted here lost a race with from's
//     own re-creation, whose event follows: ServiceChanged.
//   - A later source's definition is served: from's definition went away,
//     so the definition moved to that source: ServiceChanged, not
//     ServiceDeleted, since the service is still there.
//
// NoEndpoints is whether the aggregate serves no endpoint for any port of
// the service; always so for ServiceDeleted.
func (v *view) translate(from int, ev model.Event) model.Event {
	winner, def := v.lookup(ev.Hostname)
	switch {
	case def == nil:
		ev.Kind = model.ServiceDeleted
		ev.NoEndpoints = true
		return ev
	case winner < from:
		ev.Kind = model.EndpointsChanged
	case winner == from:
		if ev.Kind == model.ServiceDeleted {
			ev.Kind = model.ServiceChanged
		}
	default:
		ev.Kind = model.ServiceChanged
	}
	ev.NoEndpoints = !v.hasEndpoints(def)
	return ev
}

// hasEndpoints reports whether any source has an endpoint for a port of
// the served definition def.
func (v *view) hasEndpoints(def *model.Service) bool {
	for _, p := range def.Ports {
		for _, s := range v.sources {
			if len(s.Controller.EndpointsByPortName(def.Hostname, p.Name, nil)) > 0 {
				return true
			}
		}
	}
	return false
}
