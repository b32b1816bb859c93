package model

import (
	"slices"
)

// Several namespaces may define one host: ServiceEntries take any host,
// and two teams may each keep a private definition of the same external
// one. istiod keeps every definition and gives each client the one its
// namespace sees first; so does meshpilot. The model still holds one
// Service per hostname, the host's first definition, and hangs the
// others' on it (Service.Others), each with its own endpoints: lookups by
// hostname alone (debug pages, events, the aggregate's merge with other
// sources) keep working on the first, and what builds a client's
// resources picks the client's with ForNamespace.

// Definition is one namespace's definition of a host: the service and
// every endpoint of it.
type Definition struct {
	Service   *Service
	Endpoints []*Endpoint
}

// definitionEndpoints are the endpoints a definition in Others carries,
// indexed as a Store indexes a service's.
type definitionEndpoints struct {
	eps        []*Endpoint
	byPortName map[string][]*Endpoint
}

// WithDefinitions returns first with others' definitions of its host
// hung on it (Others), in the order given, which should be istiod's
// (oldest first). first is copied, never modified; with no others it is
// returned as it is.
func WithDefinitions(first *Service, others []Definition) *Service {
	if len(others) == 0 {
		return first
	}
	c := *first
	c.Others = make([]*Service, len(others))
	for i, d := range others {
		o := *d.Service
		o.Others = nil
		eps := slices.Clone(d.Endpoints)
		slices.SortFunc(eps, endpointCompare)
		eps = slices.CompactFunc(eps, func(a, b *Endpoint) bool { return endpointCompare(a, b) == 0 })
		o.own = &definitionEndpoints{eps: eps, byPortName: indexByPortName(eps)}
		c.Others[i] = &o
	}
	return &c
}

// ForNamespace returns the definition of the host that clients of ns
// see, as istiod's default sidecar scope picks it: first one private to
// ns (exportTo "." or ns itself, defined in ns), then one that names ns
// in its exportTo, then one exported to every namespace, each in the
// order of the definitions; nil when none is visible to ns.
func (s *Service) ForNamespace(ns string) *Service {
	if len(s.Others) == 0 {
		if s.VisibleTo(ns) {
			return s
		}
		return nil
	}
	var named, public *Service
	for _, d := range s.definitions() {
		switch {
		case !d.VisibleTo(ns):
		case exportedToAll(d.ExportTo):
			if public == nil {
				public = d
			}
		case d.Namespace == ns:
			return d
		case named == nil:
			named = d
		}
	}
	if named != nil {
		return named
	}
	return public
}

// definitions lists s and its Others, in order.
func (s *Service) definitions() []*Service {
	return append([]*Service{s}, s.Others...)
}

// EndpointsOf is d.Endpoints for svc, which may be a definition in another
// service's Others: those carry their own endpoints, which d's lookups by
// hostname return only for the first definition.
func EndpointsOf(d ServiceDiscovery, svc *Service, port int32, selector Labels) []*Endpoint {
	if svc.own == nil {
		return d.Endpoints(svc.Hostname, port, selector)
	}
	p, ok := svc.PortByNumber(port)
	if !ok {
		return nil
	}
	return selectEndpoints(svc.own.byPortName[p.Name], selector)
}

// EndpointsByPortNameOf is EndpointsOf for the service port with that name.
func EndpointsByPortNameOf(d ServiceDiscovery, svc *Service, portName string, selector Labels) []*Endpoint {
	if svc.own == nil {
		return d.EndpointsByPortName(svc.Hostname, portName, selector)
	}
	return selectEndpoints(svc.own.byPortName[portName], selector)
}

// OwnEndpoints returns every endpoint of a definition in another
// service's Others, and false for any other service, whose endpoints its
// registry holds.
func (s *Service) OwnEndpoints() ([]*Endpoint, bool) {
	if s.own == nil {
		return nil, false
	}
	return s.own.eps, true
}

// othersEqual compares two services' Others, endpoints included.
func othersEqual(a, b []*Service) bool {
	return slices.EqualFunc(a, b, func(x, y *Service) bool {
		if !x.Equal(y) {
			return false
		}
		xe, _ := x.OwnEndpoints()
		ye, _ := y.OwnEndpoints()
		return slices.EqualFunc(xe, ye, (*Endpoint).Equal)
	})
}
