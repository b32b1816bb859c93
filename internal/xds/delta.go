package xds

import (
	"maps"
	"slices"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// CreateDeltaWatch implements go-control-plane's cache.ConfigWatcher for
// delta streams.
func (s *Server) CreateDeltaWatch(req *cache.DeltaRequest, sub cache.Subscription, ch chan cache.DeltaResponse) (func(), error) {
	t, ok := s.typeOf(req.GetTypeUrl())
	if !ok {
		return func() {}, nil // nothing to send, ever
	}
	return s.startWatch(&watch{typ: t, client: s.client(req.GetNode()), sub: sub, dch: ch, initial: req.GetResponseNonce() == ""}), nil
}

// delta builds the incremental response a watch needs, or nil, and
// collects what the covered resources depend on. s.mu is held.
func (s *Server) delta(w *watch, change time.Time, deps *depCollector) *deltaResponse {
	returned := w.sub.ReturnedResources()
	names := s.names(w)
	deps.reserve(len(names))
	next := maps.Clone(returned)
	if next == nil {
		next = map[string]string{}
	}
	var res []*discovery.Resource
	var removed []string
	var holds []*entry
	covered := make(map[string]struct{}, len(names))
	for _, n := range names {
		covered[n] = struct{}{}
		e := s.resource(w.typ, &w.client, n, deps)
		prev, had := returned[n]
		if e.exists() {
			holds = append(holds, e)
		}
		switch {
		case e.exists() && prev != e.version:
			res = append(res, e.delta)
			next[n] = e.version
		case !e.exists() && had && prev != "":
			removed = append(removed, n)
			delete(next, n)
		}
	}
	if w.wildcard {
		// Names the client holds that left the wildcard set. An empty
		// version is a name it unsubscribed while subscribed to the
		// wildcard: go-control-plane marks it so that the client is told
		// whether it still exists, and here it does not.
		for n := range returned {
			if _, ok := covered[n]; !ok {
				removed = append(removed, n)
				delete(next, n)
			}
		}
	}
	// The first request of a wildcard subscription is answered even with
	// nothing in it: Envoy waits for that answer (up to its
	// initial_fetch_timeout) before it finishes starting. That holds for
	// listeners too, which meshpilot never serves to Envoy. go-control-plane
	// knows a first request by its empty nonce, as its own caches do.
	initialWildcard := w.sub.IsWildcard() && w.initial
	if len(res) == 0 && len(removed) == 0 && !initialWildcard {
		return nil
	}
	slices.Sort(removed)
	r := &deltaResponse{
		req: s.deltaRequests[w.typ],
		out: &discovery.DeltaDiscoveryResponse{
			SystemVersionInfo: s.nextVersion(),
			Resources:         res,
			RemovedResources:  removed,
			TypeUrl:           s.types[w.typ].URL,
		},
		returned: next,
	}
	s.tracker.deltaBuilt(r.out, change, holds)
	return r
}
