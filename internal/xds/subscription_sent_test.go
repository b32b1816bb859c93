package xds

import (
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// sentView is what a stream's subscription says it was sent of a type
// and the entries it holds for it, beside what the client state holds.
type sentView struct {
	returned map[string]string
	sent     []*entry // the subscription's own hold
	tracked  []*entry // the client state's: the pending response's, else the ACKed
}

func viewOf(t testing.TB, m *memStream, url string) sentView {
	t.Helper()
	m.mu.Lock()
	ts := m.typeState(url)
	v := sentView{returned: ts.sub.returnedMap().asMap(), sent: ts.sub.sent}
	v.tracked = ts.held
	if ts.awaiting {
		v.tracked = ts.inflight
	}
	m.mu.Unlock()
	return v
}

// versionsOf is res with the versions of r's assignments.
func versionsOf(r *discovery.DiscoveryResponse, res map[string]string) map[string]string {
	out := maps.Clone(res)
	for _, a := range r.GetResources() {
		cla := &endpointv3.ClusterLoadAssignment{}
		if err := a.UnmarshalTo(cla); err != nil {
			panic(err)
		}
		out[cla.GetClusterName()] = strconv.FormatUint(xxhash.Sum64(a.GetValue()), 36)
	}
	return out
}

// TestSubscriptionSharesSentEntries: the stream's record of what it sent
// a type is the response's entries, the very list the client state
// holds, while every name it returned exists; it holds no entry the
// client state does not (an unsubscribed name, a request it ignores as
// stale, a rejected response), and it always says the versions sent.
func TestSubscriptionSharesSentEntries(t *testing.T) {
	ts := startServer(t, baseStore())
	m := openMemStream(t, ts.Server)
	defer m.close()
	var last *discovery.DiscoveryResponse
	var first string // the first response's nonce
	var beforePush map[string]string
	sent := map[string]string{} // name to version, as the client was sent
	steps := []struct {
		name string
		do   func()
		// holds: the subscription holds entries, not names and
		// versions; sameList: the client state's list itself.
		holds, sameList bool
	}{
		{"sent", func() {
			m.request(t, &discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: []string{reviews, ratings}})
			last = <-m.sent
			first = last.GetNonce()
			sent = versionsOf(last, sent)
		}, true, true},
		{"ACKed", func() { m.ack(t, last, []string{reviews, ratings}) }, true, true},
		{"unsubscribed", func() {
			m.ack(t, last, []string{reviews})
			delete(sent, ratings)
		}, true, false},
		{"pushed", func() {
			beforePush = maps.Clone(sent)
			ts.store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.9"))
			last = <-m.sent
			sent = versionsOf(last, sent)
		}, true, true},
		{"stale", func() {
			// Not the latest nonce: the stream ignores the request, its
			// names included.
			m.request(t, &discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: []string{ratings}, ResponseNonce: first})
		}, true, true},
		{"NACKed", func() {
			// The client holds what it held before the push: the stream
			// goes back to it.
			m.request(t, &discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: []string{reviews},
				ResponseNonce: last.GetNonce(), ErrorDetail: &status.Status{Message: "no"}})
			sent = beforePush
		}, true, false},
	}
	for _, step := range steps {
		step.do()
		v := viewOf(t, m, resource.EndpointType)
		if !maps.Equal(v.returned, sent) {
			t.Fatalf("%s: returned %v, sent %v", step.name, v.returned, sent)
		}
		for _, e := range v.sent {
			if !slices.Contains(v.tracked, e) {
				t.Fatalf("%s: the stream holds %s, which the client state does not", step.name, e.name)
			}
		}
		if holds := len(v.sent) > 0; holds != step.holds {
			t.Fatalf("%s: the stream holds entries: %v, want %v", step.name, holds, step.holds)
		}
		if same := len(v.sent) > 0 && len(v.sent) == len(v.tracked) && &v.sent[0] == &v.tracked[0]; same != step.sameList {
			t.Fatalf("%s: the stream's list is the client state's: %v, want %v", step.name, same, step.sameList)
		}
	}
}
