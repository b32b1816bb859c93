package aggregate

import (
	"cmp"
	"slices"

	"github.com/meshpilot/meshpilot/internal/model"
)

// lookup returns the served definition of a hostname and the index of the
// source it comes from: the first source that defines it. It returns
// (-1, nil) when none does.
func (v *view) lookup(hostname model.Hostname) (int, *model.Service) {
	for i, s := range v.sources {
		if svc := s.Controller.GetService(hostname); svc != nil {
			return i, svc
		}
	}
	return -1, nil
}

// Services lists every service, ordered by hostname, each hostname once
// with its served definition.
func (a *Controller) Services() []*model.Service {
	return a.view.Load().services()
}

func (v *view) services() []*model.Service {
	if v.single != nil {
		return v.single.Services()
	}
	var all []*model.Service
	nonEmpty := 0
	for _, s := range v.sources {
		if svcs := s.Controller.Services(); len(svcs) > 0 {
			all = append(all, svcs...)
			nonEmpty++
		}
	}
	if nonEmpty <= 1 {
		// One source's list is ordered and unique already: a source
		// that serves nothing (no ServiceEntries) costs no sort.
		return all
	}
	byHostname := func(x, y *model.Service) int { return cmp.Compare(x.Hostname, y.Hostname) }
	// Stable: of the definitions of one hostname, the earlier source's
	// stays first, and Compact keeps the first.
	slices.SortStableFunc(all, byHostname)
	return slices.CompactFunc(all, func(x, y *model.Service) bool { return x.Hostname == y.Hostname })
}

// GetService returns the served definition of a hostname (the first
// source's), or nil.
func (a *Controller) GetService(hostname model.Hostname) *model.Service {
	v := a.view.Load()
	if v.single != nil {
		return v.single.GetService(hostname)
	}
	_, svc := v.lookup(hostname)
	return svc
}

// Endpoints returns the endpoints of the port a number means in the served
// definition (model.Service.PortByNumber): every source's endpoints for
// that port's name, whose labels match selector, sorted by address and
// port. The slice may be shared: do not modify it.
func (a *Controller) Endpoints(hostname model.Hostname, port int32, selector model.Labels) []*model.Endpoint {
	v := a.view.Load()
	if v.single != nil {
		return v.single.Endpoints(hostname, port, selector)
	}
	_, def := v.lookup(hostname)
	if def == nil {
		return nil
	}
	p, ok := def.PortByNumber(port)
	if !ok {
		return nil
	}
	return v.union(hostname, p.Name, selector)
}

// EndpointsByPortName is Endpoints for the port of the served definition
// with that name; nil when the definition has no such port.
func (a *Controller) EndpointsByPortName(hostname model.Hostname, portName string, selector model.Labels) []*model.Endpoint {
	return a.view.Load().endpointsByPortName(hostname, portName, selector)
}

func (v *view) endpointsByPortName(hostname model.Hostname, portName string, selector model.Labels) []*model.Endpoint {
	if v.single != nil {
		return v.single.EndpointsByPortName(hostname, portName, selector)
	}
	_, def := v.lookup(hostname)
	if def == nil || !slices.ContainsFunc(def.Ports, func(p model.Port) bool { return p.Name == portName }) {
		return nil
	}
	return v.union(hostname, portName, selector)
}

// union merges the sources' endpoints of one port name. When one source
// alone has some, its slice is returned as it is.
func (v *view) union(hostname model.Hostname, portName string, selector model.Labels) []*model.Endpoint {
	var first []*model.Endpoint
	var all []*model.Endpoint // set once a second source has endpoints
	for _, s := range v.sources {
		eps := s.Controller.EndpointsByPortName(hostname, portName, selector)
		switch {
		case len(eps) == 0:
		case first == nil:
			first = eps
		case all == nil:
			all = append(append(make([]*model.Endpoint, 0, len(first)+len(eps)), first...), eps...)
		default:
			all = append(all, eps...)
		}
	}
	if all == nil {
		return first
	}
	// A stable sort keeps, of one address and port, the earlier source's
	// copy first, and Compact keeps the first.
	slices.SortStableFunc(all, compareAddress)
	return slices.CompactFunc(all, func(x, y *model.Endpoint) bool { return compareAddress(x, y) == 0 })
}

// compareAddress orders endpoints of one port name as model.Store does.
func compareAddress(x, y *model.Endpoint) int {
	return cmp.Or(cmp.Compare(x.Address, y.Address), cmp.Compare(x.Port, y.Port))
}

// WorkloadByIP returns the workload that holds the IP according to the
// first source that knows it (sources that implement
// model.WorkloadLookup, in order), or nil.
func (a *Controller) WorkloadByIP(ip string) *model.Workload {
	for _, l := range a.view.Load().lookups {
		if w := l.WorkloadByIP(ip); w != nil {
			return w
		}
	}
	return nil
}

// Len returns the number of services and of endpoints served, for
// metrics. With a single source that counts itself (model.Store, the
// registries: Len), its count; otherwise the served view is counted
// service by service.
func (a *Controller) Len() (services, endpoints int) {
	v := a.view.Load()
	if l, ok := v.single.(interface{ Len() (int, int) }); ok {
		return l.Len()
	}
	svcs := v.services()
	for _, svc := range svcs {
		for _, p := range svc.Ports {
			endpoints += len(v.endpointsByPortName(svc.Hostname, p.Name, nil))
		}
	}
	return len(svcs), endpoints
}
