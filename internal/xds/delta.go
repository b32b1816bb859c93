package xds

import (
	"slices"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// delta builds the incremental response a watch needs, or nil, and
// collects what the covered resources depend on. s.mu is held.
func (s *Server) delta(w *watch, change time.Time, deps *depCollector) *response {
	sub := &w.ts.sub
	names := s.names(w)
	deps.reserve(len(names))
	updated := newVersionMapBuilder(0)
	var res []*discovery.Resource
	// removed is what the response says does not exist; dropped what
	// leaves the stream's record with it (a name reported absent stays,
	// as absent, so that it is reported once).
	var removed, dropped []string
	var holds []*entry
	covered := make(map[string]struct{}, len(names))
	for _, n := range names {
		covered[n] = struct{}{}
		e := s.resource(w.typ, w.client, n, deps)
		prev, had := sub.returnedVersion(n)
		if e.exists() {
			holds = append(holds, e)
		}
		switch {
		case e.exists() && prev != e.version:
			res = append(res, e.deltaForm())
			updated.add(n, e.version)
		case !e.exists() && (!had || prev != absent):
			// Sent before and gone, or subscribed and never there: the
			// incremental protocol ("Knowing When a Requested Resource
			// Does Not Exist") has the server say so in removed_resources.
			removed = append(removed, n)
			updated.add(n, absent)
		}
	}
	if w.wildcard {
		// Names the client holds that left the wildcard set. An empty
		// version is a name it unsubscribed while subscribed to the
		// wildcard: the subscription marks it (subscription.go) so that
		// the client is told whether it still exists, and here it does
		// not.
		sub.eachReturned(func(name string) {
			if _, ok := covered[name]; !ok {
				removed = append(removed, name)
				dropped = append(dropped, name)
			}
		})
	}
	// The first request of a wildcard subscription is answered even with
	// nothing in it: Envoy waits for that answer (up to its
	// initial_fetch_timeout) before it finishes starting. That holds for
	// listeners too, which meshpilot never serves to Envoy. A first
	// request is known by its empty nonce, as go-control-plane's caches
	// know it.
	initialWildcard := w.ts.sub.wildcard && w.initial
	if len(res) == 0 && len(removed) == 0 && !initialWildcard {
		return nil
	}
	slices.Sort(removed)
	slices.Sort(dropped)
	next := sub.returnedMap().updated(updated.done(), dropped)
	if sub.isRejected(next) {
		return nil
	}
	return &response{
		delta: &discovery.DeltaDiscoveryResponse{
			SystemVersionInfo: s.nextVersion(),
			Resources:         res,
			RemovedResources:  removed,
			TypeUrl:           s.types[w.typ].URL,
		},
		returned: next,
		change:   change,
		holds:    holds,
	}
}
