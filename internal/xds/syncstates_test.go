package xds

import (
	"maps"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// TestSyncCounts: a response not answered counts as stale only once it
// is older than the threshold, an ACK ends it, a NACK counts until the
// next response is accepted, and a stream gone counts for nothing.
func TestSyncCounts(t *testing.T) {
	ts := startServer(t, baseStore())
	counts := func(at time.Time) (stale, nacked map[string]int) { return ts.SyncCounts(at, time.Minute) }
	want := func(what string, at time.Time, stale, nacked map[string]int) {
		t.Helper()
		s, n := counts(at)
		if !maps.Equal(s, stale) || !maps.Equal(n, nacked) {
			t.Fatalf("%s: stale %v nacked %v, want stale %v nacked %v", what, s, n, stale, nacked)
		}
	}

	a := openADS(t, dial(t, ts.addr), grpcNode("slow", "default"))
	a.Subscribe(resource.EndpointType, reviews)
	r1 := a.Next()
	awaitStatus(t, ts.Server, "slow", Stale)
	now := time.Now()
	want("unanswered, just sent", now, map[string]int{}, map[string]int{})
	want("unanswered past the threshold", now.Add(2*time.Minute), map[string]int{"EDS": 1}, map[string]int{})

	b := openADS(t, dial(t, ts.addr), envoyNode("rejecting"))
	b.Subscribe(resource.ClusterType, reviews)
	b.ACK(b.Next())
	b.Subscribe(resource.EndpointType, reviews)
	b.NACK(b.Next(), "no")
	awaitStatus(t, ts.Server, "rejecting", NACKed)
	want("one stale, one NACKing", now.Add(2*time.Minute), map[string]int{"EDS": 1}, map[string]int{"EDS": 1})

	a.ACK(r1)
	awaitStatus(t, ts.Server, "slow", Synced)
	want("the slow client ACKed", now.Add(2*time.Minute), map[string]int{}, map[string]int{"EDS": 1})

	ts.store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.9"))
	b.ACK(b.Next())
	a.ACK(a.Next())
	awaitStatus(t, ts.Server, "slow", Synced)
	awaitStatus(t, ts.Server, "rejecting", Synced)
	want("every response ACKed", now.Add(2*time.Minute), map[string]int{}, map[string]int{})

	ts.store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.10"))
	b.NACK(b.Next(), "no again")
	a.Next()
	awaitStatus(t, ts.Server, "slow", Stale)
	b.Close()
	awaitClient(t, ts.Server, "the NACKing client gone", func(c ClientInfo) bool { return c.NodeID == "slow" })
	want("the NACKing client gone", time.Now().Add(2*time.Minute), map[string]int{"EDS": 1}, map[string]int{})
}

// awaitStatus waits until node's EDS is in status.
func awaitStatus(t *testing.T, s *Server, node, status string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		for _, c := range s.Clients() {
			if c.NodeID == node && c.Types["EDS"] != nil && c.Types["EDS"].Status == status {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's EDS never %s; clients %+v", node, status, s.Clients())
		}
		time.Sleep(10 * time.Millisecond) // between polls
	}
}
