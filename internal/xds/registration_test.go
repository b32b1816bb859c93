package xds

import (
	"slices"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// TestFilingOutlivesWatches: a stream type's filing in the watch index
// is made once and kept through answers and ACKs, refiled only when
// what the type covers changes, and removed when the stream ends. Every
// test of delivery passes if each request refiled everything (as it
// once did); this one pins that it does not.
func TestFilingOutlivesWatches(t *testing.T) {
	store := baseStore()
	s := NewServer(Options{Discovery: store})
	c := openMemStream(t, s)
	ts := c.typeFor(resource.EndpointType)
	filing := func() (*registration, *watch, [][]model.ConfigKey) {
		s.mu.Lock()
		defer s.mu.Unlock()
		r := ts.reg
		if r == nil {
			return nil, nil, nil
		}
		return r, r.current, r.deps
	}
	lists := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.watches.byList)
	}

	c.request(t, &discovery.DiscoveryRequest{Node: envoyNode("e"), TypeUrl: resource.EndpointType, ResourceNames: []string{reviews}})
	c.ack(t, <-c.sent, []string{reviews})
	first, w, deps := filing()
	if first == nil || w == nil || len(deps) != 1 || lists() != 1 {
		t.Fatalf("after the ACK: filing %v, open watch %v, %d dependency lists (index %d); want one filed list and an open watch", first, w, len(deps), lists())
	}

	// A push answers the watch; the filing stays, with no open watch,
	// and the ACK's watch takes it over without refiling.
	store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.9"))
	var req push.Request
	req.Add(model.Event{Kind: model.EndpointsChanged, Hostname: model.ServiceHostname("reviews", "default", "")}, timeNow())
	s.Push(req)
	pushed := <-c.sent
	if r, w, _ := filing(); r != first || w != nil || lists() != 1 {
		t.Fatalf("after the push's answer: filing %p (was %p), open watch %v, index %d lists; want the same filing, no open watch, one list", r, first, w, lists())
	}
	if got := s.Stats().Watches; got != 0 {
		t.Fatalf("%d watches counted waiting while the answer awaits its ACK", got)
	}
	c.ack(t, pushed, []string{reviews})
	r, w, deps := filing()
	if r != first || w == nil || len(deps) != 1 {
		t.Fatalf("after the ACK: filing %p (was %p), open watch %v, %d lists", r, first, w, len(deps))
	}
	// Filed under the keys of the resource the client now holds, the
	// one the push regenerated (a list of equal keys is not refiled).
	s.mu.Lock()
	held := s.cache.peek(ts.typ, w.client, reviews)
	s.mu.Unlock()
	if held == nil || !slices.Equal(deps[0], held.deps) {
		t.Fatalf("the filing's list %v is not the held resource's %v", deps[0], held)
	}

	// Another name: refiled under both.
	c.request(t, &discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: []string{reviews, ratings}, VersionInfo: pushed.GetVersionInfo(), ResponseNonce: pushed.GetNonce()})
	c.ack(t, <-c.sent, []string{reviews, ratings})
	if r, _, deps := filing(); r != first || len(deps) != 2 || lists() != 2 {
		t.Fatalf("after subscribing to a second name: filing %p (was %p), %d lists filed, index %d", r, first, len(deps), lists())
	}

	c.close()
	if r, _, _ := filing(); r != nil || lists() != 0 || registrations(s) != 0 {
		t.Fatalf("after the stream ended: filing %v, index %d lists, %d registrations", r, lists(), registrations(s))
	}
}
