package xds

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/translate"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// This file is the stream loop: the protocol of one xDS stream, state of
// the world or delta, ADS or one type's service.
//
// An idle stream costs one goroutine, grpc-go's handler, which receives.
// A request updates the type's subscription and opens the type's watch
// (Server.startWatch); a watch that answers puts its response in the
// type's slot. One sender at a time sends every pending response,
// clusters first, then endpoints, listeners and routes (make before
// break, as istiod pushes), and stops when none is left: the handler
// while it handles a request (what the request's watch answers at once
// goes out with no goroutine started), else a goroutine that a watch
// answered by a push starts, which exits when none is left. grpc-go
// allows one goroutine in SendMsg while another is in RecvMsg. A type
// has at most one response pending: a watch answers once, and the next
// watch of the type starts from the client's next request.
//
// A request is handled once the sender is done: a client that does not
// read its responses has its requests wait unread too (at most
// ReceiveWindow of them), as a stream whose send is stuck should.
//
// The rules are go-control-plane's (pkg/server/sotw, delta), which
// meshpilot's clients have been served by:
//   - State of the world: a request whose nonce is not the latest sent
//     for its type is stale and ignored (the xDS protocol's resource
//     updates); otherwise it drops the type's unsent response and opens
//     a new watch. Nonces count the stream's responses.
//   - Delta: nonces are not checked; a response of the type built after
//     the request was read is sent before the request is handled (a
//     delta response is relative to the one before); then the request
//     opens the type's new watch.
//   - A stream's node is its latest request's that names one.
//   - ADS requests must name their type (InvalidArgument); a per-type
//     service's requests default to its type.

// xdsStream is one open stream.
type xdsStream struct {
	srv *Server
	key streamKey
	out *guardedStream
	// defaultType is the per-type service's type URL; empty for ADS.
	defaultType string
	// client is the handler goroutine's alone: what the latest node
	// named says of the client (never changed, shared by the stream's
	// watches); nil until a request names one. The stream keeps no node:
	// a node comes once, with the first request, and its metadata would
	// cost a kilobyte per stream.
	client *translate.Client

	// mu guards what follows, and every typeState's sub, nonce and
	// pending. A watch reads its type's subscription under Server.mu
	// without mu: the request that opened it was the last to change it,
	// and the send that changes it next is of the watch's own answer.
	// Lock order: Server.mu before mu.
	mu    sync.Mutex
	types []*typeState
	// nonce counts the responses sent.
	nonce int64
	// sending: a sender runs (the handler, or a goroutine a push
	// started); idle is signalled when it stops.
	sending bool
	idle    sync.Cond
	// closed: the stream ended; nothing more is sent.
	closed bool
}

// typeState is one type's protocol state on a stream.
type typeState struct {
	url string
	// typ is the type's generator index; -1 for a type meshpilot does
	// not serve.
	typ   int
	order int
	sub   subscription
	// nonce is the latest response's of the type; pending the response
	// built and not sent yet.
	nonce   string
	pending *response
	// watch is the type's latest watch; guarded by Server.mu.
	watch *watch
}

// sendOrder is Envoy's make-before-break order: a cluster exists before
// its endpoints and before a listener or route names it. Types meshpilot
// does not serve come last.
func sendOrder(url string) int {
	switch url {
	case resource.ClusterType:
		return 0
	case resource.EndpointType:
		return 1
	case resource.ListenerType:
		return 2
	case resource.RouteType:
		return 3
	}
	return 4
}

// serve runs one stream until its client ends it, a request is refused,
// or a send fails.
func (s *Server) serve(gs grpc.ServerStream, delta bool, defaultType string) error {
	k := streamKey{delta: delta}
	if delta {
		k.id = s.deltaStreams.Add(1)
	} else {
		k.id = s.sotwStreams.Add(1)
	}
	g := s.guard(gs)
	st := s.newStream(k, g, defaultType)
	defer st.close()
	if err := s.open(g.ctx, k); err != nil {
		return err
	}
	g.key.Store(&k)
	for {
		var err error
		if delta {
			req := &discovery.DeltaDiscoveryRequest{}
			if g.RecvMsg(req) != nil {
				return nil
			}
			err = st.handle(func() error { return st.deltaRequest(req) })
		} else {
			req := &discovery.DiscoveryRequest{}
			if g.RecvMsg(req) != nil {
				return nil
			}
			err = st.handle(func() error { return st.sotwRequest(req) })
		}
		if err != nil {
			return err
		}
	}
}

func (s *Server) newStream(k streamKey, out *guardedStream, defaultType string) *xdsStream {
	st := &xdsStream{srv: s, key: k, out: out, defaultType: defaultType}
	st.idle.L = &st.mu
	return st
}

var errNoTypeURL = status.Error(codes.InvalidArgument, "type URL is required for ADS")

// typeURL is a request's type, or the service's.
func (st *xdsStream) typeURL(url string) (string, error) {
	if url != "" {
		return url, nil
	}
	if st.defaultType == "" {
		return "", errNoTypeURL
	}
	return st.defaultType, nil
}

// setNode makes node the stream's.
func (st *xdsStream) setNode(node *core.Node) {
	c := st.srv.client(node)
	st.client = &c
}

// currentClient is the client the stream's node describes; the empty
// node's while no request named one.
func (st *xdsStream) currentClient() *translate.Client {
	if st.client == nil {
		st.setNode(&core.Node{})
	}
	return st.client
}

// nodeID is the id of the stream's node, for logs.
func (st *xdsStream) nodeID() string {
	if st.client == nil {
		return ""
	}
	return st.client.ID
}

// sotwRequest handles a state-of-the-world request.
func (st *xdsStream) sotwRequest(req *discovery.DiscoveryRequest) error {
	s := st.srv
	node := req.GetNode()
	switch {
	case node != nil:
		st.setNode(node)
	case st.client == nil:
		// A stream whose first request names no node has the empty one,
		// which the limits and the identity check see.
		node = &core.Node{}
		st.setNode(node)
	}
	url, err := st.typeURL(req.GetTypeUrl())
	if err != nil {
		return err
	}
	req.TypeUrl = url
	st.shareNames(url, req.GetResourceNames())
	subscribed, err := s.request(clientRequest{
		stream: st.key.id, node: node, typeURL: url, names: req.GetResourceNames(),
		version: req.GetVersionInfo(), nonce: req.GetResponseNonce(), nack: req.GetErrorDetail(),
	})
	if err != nil {
		return err
	}
	initial := req.GetResponseNonce() == ""
	s.mu.Lock()
	defer s.mu.Unlock()
	st.mu.Lock()
	ts := st.typeState(url)
	if ts == nil {
		ts = st.addType(url)
		ts.sub = newSotwSubscription(req.GetResourceNames(), subscribed)
	} else {
		if ts.nonce != "" && req.GetResponseNonce() != ts.nonce {
			// The client state took the request's names (and let go of
			// what they drop): the stream keeps what it sent as names and
			// versions, not as entries the client state no longer holds.
			ts.sub.unshare()
			st.mu.Unlock()
			if s.log.Enabled(context.Background(), slog.LevelDebug) {
				s.log.Debug("xds: ignoring a request whose nonce is not the latest sent for its type", "client", logID(st.nodeID()),
					"stream", st.key.name(), "type", s.tracker.shortType(url), "nonce", req.GetResponseNonce(), "latest", ts.nonce)
			}
			return nil
		}
		// A response the type's watch built since the request was read
		// was not sent: the request replaces it.
		s.finish(ts.watch)
		ts.pending = nil
		if req.GetErrorDetail() != nil {
			ts.sub.unshare()
		}
		ts.sub.setSotw(req.GetResourceNames(), subscribed)
	}
	st.mu.Unlock()
	if ts.typ < 0 {
		// A type meshpilot does not serve (secrets, runtime, ...): say
		// once that there is nothing, rather than end the stream.
		if initial {
			st.enqueue(ts, &response{sotw: &discovery.DiscoveryResponse{VersionInfo: s.nextVersion(), TypeUrl: url}})
		}
		return nil
	}
	s.startWatch(&watch{typ: ts.typ, client: st.client, stream: st, ts: ts, initial: initial})
	return nil
}

// shareNames makes a state-of-the-world request's names the cache's
// strings where the cache holds their resources: a request read from
// the wire has its own copy of every name, which the stream would keep
// (a kilobyte for a client of five services) while every client of the
// same resources can share one. Only a request that changes the type's
// subscription: an ACK repeats the names, which the client state makes
// share the stream's (clients.go).
func (st *xdsStream) shareNames(url string, names []string) {
	typ, ok := st.srv.typeOf(url)
	if !ok || len(names) == 0 {
		return
	}
	st.mu.Lock()
	ts := st.typeState(url)
	same := ts != nil && slices.Equal(ts.sub.names, names)
	st.mu.Unlock()
	if same {
		return
	}
	s := st.srv
	s.mu.Lock()
	s.cache.shareNames(typ, names)
	s.mu.Unlock()
}

// deltaRequest handles a delta request.
func (st *xdsStream) deltaRequest(req *discovery.DeltaDiscoveryRequest) error {
	s := st.srv
	url, err := st.typeURL(req.GetTypeUrl())
	if err != nil {
		return err
	}
	req.TypeUrl = url
	if _, err := s.request(clientRequest{
		stream: st.key.id, delta: true, node: req.GetNode(), typeURL: url,
		names: req.GetResourceNamesSubscribe(), unsubscribe: req.GetResourceNamesUnsubscribe(),
		nonce: req.GetResponseNonce(), nack: req.GetErrorDetail(),
	}); err != nil {
		return err
	}
	if req.GetNode() != nil {
		st.setNode(req.GetNode())
	}
	for {
		s.mu.Lock()
		st.mu.Lock()
		ts := st.typeState(url)
		if ts != nil && ts.pending != nil {
			// The type's watch answered since the request was read: that
			// response goes first.
			st.mu.Unlock()
			s.mu.Unlock()
			if !st.sendAll() {
				return errStreamEnded
			}
			continue
		}
		if ts == nil {
			ts = st.addType(url)
			ts.sub = newDeltaSubscription(req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe(), req.GetInitialResourceVersions())
		} else {
			s.finish(ts.watch)
			if req.GetErrorDetail() != nil {
				ts.sub.unshare()
			}
			ts.sub.updateDelta(req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe())
		}
		st.mu.Unlock()
		if ts.typ >= 0 { // nothing to send of other types, ever
			s.startWatch(&watch{typ: ts.typ, client: st.currentClient(), stream: st, ts: ts, delta: true, initial: req.GetResponseNonce() == ""})
		}
		s.mu.Unlock()
		return nil
	}
}

// typeState finds a type's state. st.mu is held.
func (st *xdsStream) typeState(url string) *typeState {
	for _, ts := range st.types {
		if ts.url == url {
			return ts
		}
	}
	return nil
}

// addType adds a type's state. st.mu is held.
func (st *xdsStream) addType(url string) *typeState {
	typ, ok := st.srv.typeOf(url)
	if !ok {
		typ = -1
	}
	ts := &typeState{url: url, typ: typ, order: sendOrder(url)}
	st.types = append(st.types, ts)
	return ts
}

// enqueue puts a type's response in its slot and starts the sender if
// none runs. The caller holds Server.mu when a watch answers.
func (st *xdsStream) enqueue(ts *typeState, r *response) {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return
	}
	ts.pending = r
	start := !st.sending
	st.sending = true
	st.mu.Unlock()
	if start {
		go st.sendPending()
	}
}

// next takes the first pending response in send order, gives it its
// nonce and makes what it carries the type's returned resources, as of
// now: a state-of-the-world request that answers it must carry its
// nonce. st.mu is held.
func (st *xdsStream) next() (*typeState, *response) {
	var first *typeState
	for _, ts := range st.types {
		if ts.pending != nil && (first == nil || ts.order < first.order) {
			first = ts
		}
	}
	if first == nil {
		return nil, nil
	}
	r := first.pending
	first.pending = nil
	st.nonce++
	first.nonce = strconv.FormatInt(st.nonce, 10)
	r.setNonce(first.nonce)
	first.sub.setReturned(r.returned, r.holds)
	return first, r
}

// sendPending is the sender: it sends the pending responses until none
// is left, or the stream ends, and then stops being the sender.
func (st *xdsStream) sendPending() {
	st.sendAll()
	st.mu.Lock()
	st.sending = false
	st.idle.Broadcast()
	st.mu.Unlock()
}

// sendAll sends the pending responses until none is left; false when a
// send failed, which ends the stream. Only the sender calls it.
func (st *xdsStream) sendAll() bool {
	for {
		st.mu.Lock()
		if st.closed {
			st.mu.Unlock()
			return false
		}
		ts, r := st.next()
		st.mu.Unlock()
		if r == nil {
			return true
		}
		st.srv.tracker.sent(st.key.id, st.key.delta, ts.url, &sentResponse{
			Sent:   Sent{Version: r.version(), Nonce: ts.nonceOf(r), Time: time.Now()},
			change: r.change, resources: r.holds,
		})
		if err := st.out.SendMsg(r.message()); err != nil {
			// The stream is ending (its receive fails too), or was ended
			// by the send timeout.
			st.mu.Lock()
			st.closed = true
			st.dropPending()
			st.mu.Unlock()
			return false
		}
	}
}

// handle handles one request as the stream's sender: it waits for a
// running sender to finish, so that a client that does not read has its
// requests wait unread, and then sends what the request's watches
// answer itself, with no goroutine of its own.
func (st *xdsStream) handle(request func() error) error {
	st.mu.Lock()
	for st.sending && !st.closed {
		st.idle.Wait()
	}
	if st.closed {
		st.mu.Unlock()
		return errStreamEnded
	}
	st.sending = true
	st.mu.Unlock()
	err := request()
	if err != nil {
		st.mu.Lock()
		st.sending = false
		st.idle.Broadcast()
		st.mu.Unlock()
		return err
	}
	st.sendPending()
	return nil
}

// nonceOf is r's nonce, set by next.
func (ts *typeState) nonceOf(r *response) string {
	if r.sotw != nil {
		return r.sotw.GetNonce()
	}
	return r.delta.GetNonce()
}

// dropPending forgets the unsent responses. st.mu is held.
func (st *xdsStream) dropPending() {
	for _, ts := range st.types {
		ts.pending = nil
	}
}

// close ends the stream: its watches are cancelled, its unsent responses
// dropped, and it returns once no send is under way, since a handler
// that returns ends its stream under a send.
func (st *xdsStream) close() {
	s := st.srv
	s.mu.Lock()
	st.mu.Lock()
	st.closed = true
	st.dropPending()
	for _, ts := range st.types {
		s.finish(ts.watch)
	}
	st.mu.Unlock()
	s.mu.Unlock()
	st.mu.Lock()
	for st.sending {
		st.idle.Wait()
	}
	st.mu.Unlock()
	s.closed(st.key)
}
