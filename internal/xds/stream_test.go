package xds

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"
	"weak"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// TestSendOrder: pending responses of several types go out clusters
// first, then endpoints, listeners, routes, then types meshpilot does not
// serve, whatever order they were built in; each gets the stream's next
// nonce and makes what it carries the type's returned resources.
func TestSendOrder(t *testing.T) {
	const other = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
	cases := []struct {
		pending []string
		want    []string
	}{
		{[]string{resource.RouteType, resource.ListenerType, resource.EndpointType, resource.ClusterType}, []string{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType}},
		{[]string{other, resource.RouteType, resource.ClusterType}, []string{resource.ClusterType, resource.RouteType, other}},
		{[]string{resource.EndpointType, resource.ListenerType}, []string{resource.EndpointType, resource.ListenerType}},
		{[]string{resource.ListenerType}, []string{resource.ListenerType}},
	}
	s := NewServer(Options{Discovery: model.NewStore()})
	for _, c := range cases {
		t.Run(fmt.Sprint(c.pending), func(t *testing.T) {
			st := newStream(s.env, streamKey{id: 1}, nil, "")
			for _, url := range c.pending {
				ts := st.typeFor(url)
				ts.pending = &response{sotw: &discovery.DiscoveryResponse{TypeUrl: url}, returned: versionMap{{url, "v"}}}
			}
			var got []string
			for {
				ts, r := st.next()
				if r == nil {
					break
				}
				v, ok := ts.sub.returned.get(ts.url)
				if want := fmt.Sprint(len(got) + 1); r.sotw.GetNonce() != want || ts.nonce != want || !ok || v != "v" {
					t.Fatalf("%s: nonce %q (type's %q), returned %v, want nonce %s", ts.url, r.sotw.GetNonce(), ts.nonce, ts.sub.returned, want)
				}
				got = append(got, ts.url)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("sent %v, want %v", got, c.want)
			}
		})
	}
}

// TestStaleNonceIgnored: a state-of-the-world request whose nonce is not
// the latest sent for its type changes nothing (go-control-plane's rule,
// from the xDS protocol's resource updates); one with the latest does.
func TestStaleNonceIgnored(t *testing.T) {
	s := NewServer(Options{Discovery: baseStore()})
	c := openMemStream(t, s)
	defer c.close()
	c.request(t, &discovery.DiscoveryRequest{Node: envoyNode("e"), TypeUrl: resource.ClusterType, ResourceNames: []string{reviews}})
	first := <-c.sent
	for _, nonce := range []string{"", "0", "2", "stale"} {
		c.request(t, &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{reviews, ratings}, ResponseNonce: nonce})
	}
	c.mu.Lock()
	names := c.typeState(resource.ClusterType).sub.names
	c.mu.Unlock()
	if !slices.Equal(names, []string{reviews}) || len(c.sent) != 0 {
		t.Fatalf("after stale requests: subscribed %v, %d responses, want only %s and none", names, len(c.sent), reviews)
	}
	c.ack(t, first, []string{reviews, ratings})
	if r := <-c.sent; r.GetNonce() != "2" || len(r.GetResources()) != 2 {
		t.Fatalf("after the request with the latest nonce: nonce %s, %d clusters, want 2 and 2", r.GetNonce(), len(r.GetResources()))
	}
}

// TestOnePendingPerType: a type's watch answers once. Pushes while that
// response waits to be sent (the client does not read) add nothing to
// it; the client's next request gets the latest state in one response.
func TestOnePendingPerType(t *testing.T) {
	store := baseStore()
	s := NewServer(Options{Discovery: store})
	// A send takes a token: the client reads one response per token.
	tokens := make(chan struct{}, 3)
	c := openGatedMemStream(t, s, tokens)
	defer c.close()
	tokens <- struct{}{}
	c.request(t, &discovery.DiscoveryRequest{Node: envoyNode("e"), TypeUrl: resource.EndpointType, ResourceNames: []string{reviews}})
	c.ack(t, <-c.sent, []string{reviews})
	hostname := model.ServiceHostname("reviews", "default", "")
	for i, addr := range []string{"10.0.0.7", "10.0.0.8", "10.0.0.9"} {
		store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, addr))
		var req push.Request
		req.Add(model.Event{Kind: model.EndpointsChanged, Hostname: hostname}, timeNow())
		s.Push(req)
		if w := s.Stats().Watches; w != 0 {
			t.Fatalf("push %d: %d watches waiting, want none while the answer is unsent", i, w)
		}
	}
	tokens <- struct{}{}
	pushed := <-c.sent
	c.mu.Lock()
	for c.sending {
		c.idle.Wait()
	}
	c.mu.Unlock()
	if len(c.sent) != 0 {
		t.Fatalf("%d more responses after the first, want none", len(c.sent))
	}
	if got := addrsOf(t, pushed); !slices.Equal(got, []string{"10.0.0.7"}) {
		t.Fatalf("the push's response: %v, want the first push's 10.0.0.7", got)
	}
	tokens <- struct{}{}
	c.ack(t, pushed, []string{reviews})
	if got := addrsOf(t, <-c.sent); !slices.Equal(got, []string{"10.0.0.9"}) {
		t.Fatalf("after the ACK: %v, want the latest push's 10.0.0.9", got)
	}
}

// addrsOf reads the addresses of a response's one ClusterLoadAssignment.
func addrsOf(t *testing.T, r *discovery.DiscoveryResponse) []string {
	t.Helper()
	var cla endpoint.ClusterLoadAssignment
	if len(r.GetResources()) != 1 || r.GetResources()[0].UnmarshalTo(&cla) != nil {
		t.Fatalf("%v, want one ClusterLoadAssignment", r.GetResources())
	}
	return xdstest.Addresses(&cla)
}

// TestSenderOnlyWhileSending: a stream's sender goroutine exists while
// it has responses of a push to send: answered, idle streams run none,
// before the push and after it.
func TestSenderOnlyWhileSending(t *testing.T) {
	const streams = 200
	store := baseStore()
	s := NewServer(Options{Discovery: store})
	before := runtime.NumGoroutine()
	idle := func(when string) {
		t.Helper()
		testenv.Eventually(t, "no sender "+when, func() (bool, string) {
			n := runtime.NumGoroutine()
			return n <= before+5, fmt.Sprintf("%d goroutines with %d idle streams, %d before", n, streams, before)
		})
	}
	cs := make([]*memStream, streams)
	for i := range cs {
		cs[i] = openMemStream(t, s)
		defer cs[i].close()
		cs[i].request(t, &discovery.DiscoveryRequest{Node: envoyNode(fmt.Sprint("e", i)), TypeUrl: resource.EndpointType, ResourceNames: []string{reviews}})
		cs[i].ack(t, <-cs[i].sent, []string{reviews})
	}
	idle("once answered")
	store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.7"))
	var req push.Request
	req.Add(model.Event{Kind: model.EndpointsChanged, Hostname: model.ServiceHostname("reviews", "default", "")}, timeNow())
	s.Push(req)
	for _, c := range cs {
		if got := addrsOf(t, <-c.sent); !slices.Equal(got, []string{"10.0.0.7"}) {
			t.Fatalf("pushed %v, want 10.0.0.7", got)
		}
	}
	idle("once the push is sent")
}

// TestACKKeepsSubscribedNames: an ACK repeats a type's names, in the
// same order or another, with its own copy of each as read from the
// wire: the stream keeps the list it has, not the request's.
func TestACKKeepsSubscribedNames(t *testing.T) {
	s := NewServer(Options{Discovery: baseStore()})
	c := openMemStream(t, s)
	defer c.close()
	c.request(t, &discovery.DiscoveryRequest{Node: grpcNode("n", "default"), TypeUrl: resource.ClusterType, ResourceNames: []string{ratings, reviews}})
	last := <-c.sent
	subscribed := func() []string {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.typeState(resource.ClusterType).sub.names
	}
	kept := subscribed()
	for _, names := range [][]string{{ratings, reviews}, {reviews, ratings}, {reviews, ratings, ratings}} {
		req := make([]string, len(names))
		for i, n := range names {
			req[i] = strings.Clone(n)
		}
		c.ack(t, last, req)
		select {
		case last = <-c.sent:
			t.Fatalf("%v: an ACK of the same names was answered", names)
		default:
		}
		got := subscribed()
		if !slices.Equal(got, kept) || unsafe.SliceData(got) != unsafe.SliceData(kept) {
			t.Fatalf("%v: the stream's names are %v, a new list; want its own %v", names, got, kept)
		}
	}
}

// TestStreamKeepsNoNode: once a request named it, the node is garbage:
// the stream keeps what it says of the client, not the node and its
// metadata.
func TestStreamKeepsNoNode(t *testing.T) {
	s := NewServer(Options{Discovery: baseStore()})
	c := openMemStream(t, s)
	defer c.close()
	node := grpcNode("n", "default")
	gone := weak.Make(node)
	c.request(t, &discovery.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterType, ResourceNames: []string{reviews}})
	c.ack(t, <-c.sent, []string{reviews})
	node = nil
	runtime.GC()
	if gone.Value() != nil {
		t.Fatal("the stream keeps its node")
	}
	if got := c.client; got == nil || got.ID != "n" || got.Namespace != "default" || !got.GRPC {
		t.Fatalf("the stream's client is %+v", got)
	}
}

// TestSubscriptionsShareCachedNames: streams that subscribe to the same
// resources, each request with its own copy of the names as read from
// the wire, keep one copy of each name between them: the cache's.
func TestSubscriptionsShareCachedNames(t *testing.T) {
	s := NewServer(Options{Discovery: baseStore()})
	names := func(s *memStream) []string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.typeState(resource.ClusterType).sub.names
	}
	var first []string
	for i := range 3 {
		c := openMemStream(t, s)
		defer c.close()
		req := []string{strings.Clone(reviews), strings.Clone(ratings)}
		c.request(t, &discovery.DiscoveryRequest{Node: grpcNode(fmt.Sprint("n", i), "default"), TypeUrl: resource.ClusterType, ResourceNames: req})
		c.ack(t, <-c.sent, []string{strings.Clone(reviews), strings.Clone(ratings)})
		got := names(c)
		if i == 0 {
			first = got
			continue
		}
		if !slices.Equal(got, first) {
			t.Fatalf("stream %d subscribes to %v, want %v", i, got, first)
		}
		for j := range got {
			if unsafe.StringData(got[j]) != unsafe.StringData(first[j]) {
				t.Errorf("stream %d keeps its own copy of %s", i, got[j])
			}
		}
	}
}
