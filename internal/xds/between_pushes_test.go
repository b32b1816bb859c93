package xds

import (
	"slices"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// TestRequestsBetweenPushesKeepTheLastPush: a change of the model reaches
// clients with its push, not before. A client whose request is answered
// in between for another reason (it subscribes to one more listener, as
// grpc-go does when a process opens a channel to another service) keeps
// what the last push gave it for the rest. The debouncer holds back the
// push of a deletion on purpose, for a create may follow (kubectl replace
// --force): answering from the model meanwhile would send the deletion
// anyway, and grpc-go would fail every RPC to that service.
func TestRequestsBetweenPushesKeepTheLastPush(t *testing.T) {
	// The server reads live; the debouncer watches another store that
	// never changes, so that this test makes every push itself.
	live := baseStore()
	ts := startServer(t, model.NewStore(), func(o *Options) { o.Discovery = live })
	a := openADS(t, dial(t, ts.addr), grpcNode("client", "default"))
	// subscribe asks for names (with the version and nonce of the type's
	// last response, which it ACKed) and ACKs the answer, whose names it
	// returns.
	subscribe := func(typeURL string, names ...string) []string {
		t.Helper()
		a.SetSubscription(typeURL, names...)
		r := a.Next()
		if r.TypeURL != typeURL {
			t.Fatalf("asked for %s, got %s", typeURL, r.TypeURL)
		}
		a.ACK(r)
		return sortedNames(r)
	}
	subscribe(resource.ListenerType, "reviews:9080")
	subscribe(resource.ClusterType, reviews)

	// reviews is deleted; its push is held back. Meanwhile the client
	// subscribes to ratings too.
	live.Delete("reviews.default.svc.cluster.local")
	if got := subscribe(resource.ListenerType, "reviews:9080", "ratings:7070"); !slices.Equal(got, []string{"ratings:7070", "reviews:9080"}) {
		t.Fatalf("listeners between the deletion and its push: %v, want both", got)
	}
	if got := subscribe(resource.ClusterType, reviews, ratings); !slices.Equal(got, []string{ratings, reviews}) {
		t.Fatalf("clusters between the deletion and its push: %v, want both", got)
	}

	// The push sends the deletion.
	ts.Push(pushOf(model.Event{Kind: model.ServiceDeleted, Hostname: "reviews.default.svc.cluster.local", NoEndpoints: true}))
	seen := map[string][]string{}
	for len(seen) < 2 {
		r := a.Next()
		seen[r.TypeURL] = r.Names()
	}
	if !slices.Equal(seen[resource.ListenerType], []string{"ratings:7070"}) || !slices.Equal(seen[resource.ClusterType], []string{ratings}) {
		t.Fatalf("after the push of the deletion: %v, want ratings alone", seen)
	}
}
