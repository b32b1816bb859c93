package model

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// Store is an in-memory service model that registries fill. It compares
// every update with what it holds and reports only real changes, so a
// registry may rebuild a service as often as it likes (after a relist, say)
// without causing a push.
//
// Store is safe for concurrent use. Updates of one hostname must not race
// each other (registries serialise them per key); handlers run on the
// updating goroutine after the change is visible to readers.
//
// A registry keeps its Store private and exposes reads only, so that
// nothing else writes its model. A Store is also a Controller of its own,
// synced from the start and written by whoever holds it: an in-memory
// source for tests of what consumes a model (xds, server, aggregate).
type Store struct {
	mu       sync.RWMutex // guards services and handlers
	services map[Hostname]*storedService
	handlers []EventHandler
}

type storedService struct {
	svc *Service
	eps []*Endpoint // sorted by endpointCompare
	// byPortName holds, per service port name, the run of eps that serves
	// it. Endpoints are indexed by name because a number may name two
	// ports (see Service.PortByNumber).
	byPortName map[string][]*Endpoint
	// identities are those of eps (endpointIdentities), kept to tell
	// whether a change changes them.
	identities []Identity
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{services: map[Hostname]*storedService{}}
}

// AppendEventHandler adds a handler for change events. Call it before the
// first update.
func (s *Store) AppendEventHandler(h EventHandler) {
	s.mu.Lock()
	s.handlers = append(s.handlers, h)
	s.mu.Unlock()
}

// HasSynced is always true: what a Store holds is all there is.
func (s *Store) HasSynced() bool { return true }

// Run only waits for ctx to end: a Store is written by its holder, it
// follows no source.
func (s *Store) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Update sets a service and all its endpoints, and reports what changed:
// ServiceChanged when the service is new or its definition differs,
// EndpointsChanged when only endpoints differ, saying whether the
// identities of the endpoints stayed the same (Event.SameServiceAccounts).
// It returns false, and emits
// nothing, when nothing changed. Update keeps svc and the endpoints; the
// caller must not modify them afterwards.
func (s *Store) Update(svc *Service, endpoints []*Endpoint) bool {
	return s.UpdateObserved(svc, endpoints, time.Time{})
}

// UpdateObserved is Update for a change that reached the registry at
// observed; the event carries it (Event.Observed).
func (s *Store) UpdateObserved(svc *Service, endpoints []*Endpoint, observed time.Time) bool {
	eps := slices.Clone(endpoints)
	slices.SortFunc(eps, endpointCompare)
	eps = slices.CompactFunc(eps, func(a, b *Endpoint) bool { return endpointCompare(a, b) == 0 })
	ids := endpointIdentities(eps)

	s.mu.Lock()
	old := s.services[svc.Hostname]
	kind := ServiceChanged
	switch {
	case old == nil || !old.svc.Equal(svc):
	case !slices.EqualFunc(old.eps, eps, (*Endpoint).Equal):
		kind = EndpointsChanged
	default:
		s.mu.Unlock()
		return false
	}
	sameIDs := old != nil && slices.Equal(old.identities, ids)
	s.services[svc.Hostname] = &storedService{svc: svc, eps: eps, byPortName: indexByPortName(eps), identities: ids}
	handlers := s.handlers
	s.mu.Unlock()

	ev := Event{Kind: kind, Hostname: svc.Hostname, Namespace: svc.Namespace, Observed: observed,
		NoEndpoints: len(eps) == 0, SameServiceAccounts: sameIDs}
	for _, h := range handlers {
		h(ev)
	}
	return true
}

// Delete removes a service; it reports whether the service was there.
func (s *Store) Delete(hostname Hostname) bool {
	return s.DeleteObserved(hostname, time.Time{})
}

// DeleteObserved is Delete for a deletion that reached the registry at
// observed.
func (s *Store) DeleteObserved(hostname Hostname, observed time.Time) bool {
	s.mu.Lock()
	old := s.services[hostname]
	if old == nil {
		s.mu.Unlock()
		return false
	}
	delete(s.services, hostname)
	handlers := s.handlers
	s.mu.Unlock()

	// Endpoints without identities leave none behind: the aggregate
	// serves such a deletion as a change of endpoints when another
	// source still defines the service.
	ev := Event{Kind: ServiceDeleted, Hostname: hostname, Namespace: old.svc.Namespace, Observed: observed,
		NoEndpoints: true, SameServiceAccounts: len(old.identities) == 0}
	for _, h := range handlers {
		h(ev)
	}
	return true
}

// Services lists every service, ordered by hostname.
func (s *Store) Services() []*Service {
	s.mu.RLock()
	out := make([]*Service, 0, len(s.services))
	for _, st := range s.services {
		out = append(out, st.svc)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Service) int { return cmp.Compare(a.Hostname, b.Hostname) })
	return out
}

// GetService returns the service with that hostname, or nil.
func (s *Store) GetService(hostname Hostname) *Service {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if st := s.services[hostname]; st != nil {
		return st.svc
	}
	return nil
}

// Endpoints returns the endpoints of the service port a number means (see
// Service.PortByNumber) whose labels match selector, sorted by address and
// port. The slice is shared: do not modify it.
func (s *Store) Endpoints(hostname Hostname, port int32, selector Labels) []*Endpoint {
	st := s.get(hostname)
	if st == nil {
		return nil
	}
	p, ok := st.svc.PortByNumber(port)
	if !ok {
		return nil
	}
	return selectEndpoints(st.byPortName[p.Name], selector)
}

// EndpointsByPortName is Endpoints for the service port with that name,
// whatever its protocol.
func (s *Store) EndpointsByPortName(hostname Hostname, portName string, selector Labels) []*Endpoint {
	st := s.get(hostname)
	if st == nil {
		return nil
	}
	return selectEndpoints(st.byPortName[portName], selector)
}

func (s *Store) get(hostname Hostname) *storedService {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.services[hostname]
}

func selectEndpoints(eps []*Endpoint, selector Labels) []*Endpoint {
	if len(selector) == 0 {
		return eps
	}
	var out []*Endpoint
	for _, ep := range eps {
		if selector.Matches(ep.Labels) {
			out = append(out, ep)
		}
	}
	return out
}

// AllEndpoints returns every endpoint of a service, for every port.
func (s *Store) AllEndpoints(hostname Hostname) []*Endpoint {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if st := s.services[hostname]; st != nil {
		return st.eps
	}
	return nil
}

// Len returns the number of services and of endpoints held.
func (s *Store) Len() (services, endpoints int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, st := range s.services {
		endpoints += len(st.eps)
	}
	return len(s.services), endpoints
}

// indexByPortName relies on eps being sorted by service port name first:
// each name's endpoints are one run of eps, shared rather than copied.
// Endpoints of a name the service no longer has are kept but never asked
// for.
func indexByPortName(eps []*Endpoint) map[string][]*Endpoint {
	out := map[string][]*Endpoint{}
	for start := 0; start < len(eps); {
		name := eps[start].ServicePortName
		end := start + 1
		for end < len(eps) && eps[end].ServicePortName == name {
			end++
		}
		out[name] = eps[start:end:end]
		start = end
	}
	return out
}

func endpointCompare(a, b *Endpoint) int {
	return cmp.Or(
		cmp.Compare(a.ServicePortName, b.ServicePortName),
		cmp.Compare(a.Address, b.Address),
		cmp.Compare(a.Port, b.Port),
	)
}

var _ Controller = (*Store)(nil)

// StoreView is the read side of a Store, for a registry to embed: it
// promotes the ServiceDiscovery reads, AppendEventHandler and Len, never
// Update or Delete, so that whoever holds the registry cannot write its
// model.
type StoreView struct{ s *Store }

// View returns the read side of s.
func (s *Store) View() StoreView { return StoreView{s} }

// Services lists every service, ordered by hostname.
func (v StoreView) Services() []*Service { return v.s.Services() }

// GetService returns the service with that hostname, or nil.
func (v StoreView) GetService(hostname Hostname) *Service { return v.s.GetService(hostname) }

// Endpoints is Store.Endpoints: the slice is shared, do not modify it.
func (v StoreView) Endpoints(hostname Hostname, port int32, selector Labels) []*Endpoint {
	return v.s.Endpoints(hostname, port, selector)
}

// EndpointsByPortName is Store.EndpointsByPortName.
func (v StoreView) EndpointsByPortName(hostname Hostname, portName string, selector Labels) []*Endpoint {
	return v.s.EndpointsByPortName(hostname, portName, selector)
}

// AppendEventHandler adds a handler for change events; call it before the
// registry runs. Handlers run on the goroutines that update the store.
func (v StoreView) AppendEventHandler(h EventHandler) { v.s.AppendEventHandler(h) }

// Len returns the number of services and of endpoints held, for metrics.
func (v StoreView) Len() (services, endpoints int) { return v.s.Len() }
