package xds

import (
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// names returns what a watch covers: its subscribed names, and for a
// wildcard subscription everything of the type too. A name subscribed
// explicitly stays covered when its resource goes, so that a wildcard
// client that named it is told of the removal. s.mu is held.
func (s *Server) names(w *watch) []string {
	subscribed := w.ts.sub.names
	if !w.wildcard {
		return subscribed
	}
	all := s.cache.gens[w.typ].AllNames()
	if len(subscribed) == 0 {
		return all
	}
	seen := make(map[string]struct{}, len(all))
	for _, n := range all {
		seen[n] = struct{}{}
	}
	for _, n := range subscribed {
		if _, ok := seen[n]; !ok {
			all = append(all, n)
		}
	}
	return all
}

// sotw builds the state-of-the-world response a watch needs, or nil when
// the client has everything, and collects what the covered resources
// depend on. Responses of full-state types (listeners, clusters) carry
// every subscribed resource (a missing one means deleted); the others
// carry only those that changed. s.mu is held.
func (s *Server) sotw(w *watch, change time.Time, deps *depCollector) *response {
	sub := &w.ts.sub
	names := s.names(w)
	deps.reserve(len(names))
	full := s.types[w.typ].FullState || w.wildcard
	initial := w.initial
	changed := initial
	next := newVersionMapBuilder(len(names))
	var res []*anypb.Any
	holds := make([]*entry, 0, len(names)) // what the client holds once it has the response
	for _, n := range names {
		e := s.resource(w.typ, w.client, n, deps)
		prev, had := sub.returnedVersion(n)
		if e.exists() {
			holds = append(holds, e)
			if prev != e.version {
				changed = true
				res = append(res, e.any)
			}
		} else if full && had && prev != absent {
			changed = true // deleted
		} else if full && !had {
			changed = true // asked for, does not exist: say so at once
		}
		if e.exists() || full {
			next.add(n, e.version)
		} else if had {
			next.add(n, prev)
		}
	}
	returnedNext := next.done()
	if w.wildcard {
		sub.eachReturned(func(name string) {
			if _, ok := returnedNext.get(name); !ok {
				changed = true // gone from the wildcard set
			}
		})
	}
	if !changed || sub.isRejected(returnedNext) {
		return nil
	}
	if full || initial {
		res = make([]*anypb.Any, len(holds))
		for i, e := range holds {
			res[i] = e.any
		}
	}
	return &response{
		sotw: &discovery.DiscoveryResponse{
			VersionInfo: s.nextVersion(),
			Resources:   res,
			TypeUrl:     s.types[w.typ].URL,
		},
		returned: returnedNext,
		change:   change,
		holds:    holds,
	}
}
