package xds

import (
	"slices"
	"strconv"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/meshpilot/meshpilot/internal/translate"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// This file is the stream loop: the protocol of one xDS stream, state of
// the world or delta, ADS or one type's service. docs/architecture.md
// tells the same with the rest of the server.
//
// An idle stream costs one goroutine, grpc-go's handler, which receives.
// A request updates the type's subscription and opens the type's watch
// through the stream's watcher (seam.go); a watch that answers puts its
// response in the type's one pending slot and nothing else. One sender
// at a time sends every pending response, clusters first, then
// endpoints, listeners and routes (make before break, as istiod
// pushes), and stops when none is left:
//   - the handler, while it handles a request: what the request's watch
//     answers at once goes out with no goroutine started;
//   - else a goroutine that kick starts. The watcher kicks a stream once
//     every watch a push wakes has answered, so that a push's responses
//     are all pending before the first goes out and leave in send order.
//
// The sender stops by clearing sending in the same critical section in
// which it found nothing pending: an answer that comes after it sees
// sending false and its kick starts a sender. grpc-go allows one
// goroutine in SendMsg while another is in RecvMsg; sending makes sure
// no two are ever in SendMsg.
//
// A type has at most one response outstanding: a watch answers once,
// and the next watch of the type opens on the client's next request. A
// request is handled once no send is under way: a client that does not
// read its responses has its requests wait unread too (at most
// ReceiveWindow of them), as a stream whose send is stuck should.
//
// The rules are the xDS protocol's, as go-control-plane and istiod apply
// them:
//   - State of the world: a request whose nonce is not the latest sent
//     for its type is stale and ignored (the protocol's resource
//     updates). One with the latest nonce answers the latest response:
//     an ACK makes what it carried held, a NACK (error_detail) goes back
//     to what was held before it, and the same rejected response is not
//     sent again until something in it changes. It drops the type's
//     unsent response and opens a new watch.
//   - Delta: nonces answer the latest response the same way, but a
//     request with another nonce is not stale: it changes the
//     subscription. Names subscribed again are sent again; names that do
//     not exist are reported removed.
//   - A cluster a CDS response changes has its endpoints forgotten for an
//     Envoy client: Envoy warms the cluster and asks for its
//     ClusterLoadAssignment again with the nonce it ACKed, and waits for
//     the answer (the protocol's resource warming).
//   - A stream's node is its first request's: later nodes are ignored,
//     as istiod ignores them (the client, its workload and its identity
//     are read once). A first request that names none has the empty one.
//   - ADS requests must name their type (InvalidArgument); a per-type
//     service's requests default to its type.
//
// Lock order: the watcher's lock (Server.mu) before a stream's mu. The
// loop never holds mu while it calls the watcher.

// xdsStream is one open stream: its protocol state, and the record
// /debug/syncz, the ACK/NACK metrics and config dumps read (record.go).
type xdsStream struct {
	env *streamEnv
	key streamKey
	out grpc.ServerStream
	// defaultType is the per-type service's type URL; empty for ADS.
	defaultType string
	connected   time.Time

	// client is the handler goroutine's alone: what the stream's node
	// says of the client (never changed, shared by the stream's
	// watches); nil until the first request. The stream keeps no node:
	// its metadata would cost a kilobyte per stream.
	client *translate.Client

	// mu guards what follows, and every typeState's fields but watch.
	// A watch reads its type's subscription under the watcher's lock
	// without mu: the subscription changes only on the handler
	// goroutine, after the type's watch is cancelled, and at a send,
	// after the watch answered.
	mu    sync.Mutex
	types []*typeState
	// nonce counts the responses sent.
	nonce int64
	// sending: a sender runs (the handler, or a goroutine kick
	// started); idle is signalled when it stops.
	sending bool
	idle    sync.Cond
	// closed: the stream ended; nothing more is sent.
	closed bool
	// The client as its node describes it, set once by the first
	// request, and its NACKs.
	nodeID     string
	namespace  string
	cluster    string
	grpcClient bool
	identity   string
	nacks      uint64
	lastNACK   string
}

// typeState is one type's protocol state on a stream.
type typeState struct {
	url string
	// label names the type in metrics and logs: its short name, or
	// otherType for a type meshpilot does not serve.
	label string
	// typ is the type's generator index; -1 for a type meshpilot does
	// not serve.
	typ   int
	order int
	// started: a request of the type was handled.
	started bool
	sub     subscription
	// nonce is the latest response's of the type; pending the response
	// built and not sent yet.
	nonce   string
	pending *response
	// awaiting: the latest response was sent and the client has not
	// answered it; inflight is what the client holds once it accepts
	// it, change when the model change that caused it came (zero if
	// none).
	awaiting bool
	inflight []*entry
	change   time.Time
	// held is what the client holds of the type: the resources of the
	// responses it accepted. It keeps their cache entries alive (cache.go).
	held []*entry
	// forget lists the names whose sent versions the next request of
	// the type drops (clusters Envoy warms).
	forget []string
	// The type's sync state, as /debug/syncz shows it.
	lastSent, lastACK *Sent
	lastNACK          *NACK
	// watch is the type's latest watch; the handler goroutine's alone.
	watch *watch
	// reg is the watcher's filing of the type's watches: the watcher's
	// alone, under its lock; the stream never reads it.
	reg *registration
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

// run serves the stream until its client ends it, a request is refused,
// or a send fails. The stream is open (Server.open admitted it).
func (st *xdsStream) run(delta bool) error {
	defer st.close()
	for {
		var err error
		if delta {
			req := &discovery.DeltaDiscoveryRequest{}
			if st.out.RecvMsg(req) != nil {
				return nil
			}
			err = st.handle(func() error { return st.deltaRequest(req) })
		} else {
			req := &discovery.DiscoveryRequest{}
			if st.out.RecvMsg(req) != nil {
				return nil
			}
			err = st.handle(func() error { return st.sotwRequest(req) })
		}
		if err != nil {
			return err
		}
	}
}

func newStream(env *streamEnv, k streamKey, out grpc.ServerStream, defaultType string) *xdsStream {
	st := &xdsStream{env: env, key: k, out: out, defaultType: defaultType, connected: time.Now()}
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

// admit checks a request against the limits and, on the stream's first
// request, makes its node the stream's once the client is found entitled
// to it (identity.go). initial counts a delta request's
// initial_resource_versions.
func (st *xdsStream) admit(node *core.Node, url string, names, unsubscribe []string, initial int) error {
	first := st.client == nil
	if !first {
		node = nil // ignored: the stream has its node
	}
	if err := st.env.limits.check(names, unsubscribe, node); err != nil {
		return st.env.refuse(st, node, url, err)
	}
	if initial > 0 {
		if err := st.env.limits.checkSubscribed(len(names) + initial); err != nil {
			return st.env.refuse(st, node, url, err)
		}
	}
	if err := st.env.limits.checkType(url, st.typeState(url) != nil, len(st.types)); err != nil {
		return st.env.refuse(st, node, url, err)
	}
	if !first {
		return nil
	}
	identity, err := st.env.authorize(st, node)
	if err != nil {
		return err
	}
	if node == nil {
		node = &core.Node{}
	}
	c := st.env.clientOf(node)
	st.client = &c
	st.mu.Lock()
	st.nodeID, st.namespace, st.grpcClient = c.ID, c.Namespace, c.GRPC
	// The cluster the node names, not the one it is served as: /debug/syncz
	// tells them apart.
	st.cluster = node.GetMetadata().GetFields()["CLUSTER_ID"].GetStringValue()
	st.identity = identity
	st.mu.Unlock()
	return nil
}

// nodeIDOf is the id of the stream's node, for logs; "" before the
// first request.
func (st *xdsStream) nodeIDOf() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.nodeID
}

// typeFor finds or adds a type's state; only the handler adds.
func (st *xdsStream) typeFor(url string) *typeState {
	st.mu.Lock()
	defer st.mu.Unlock()
	if ts := st.typeState(url); ts != nil {
		return ts
	}
	typ, ok := st.env.typeOf(url)
	label := otherType
	if ok {
		label = st.env.types[typ].Short
	} else {
		typ = -1
	}
	ts := &typeState{url: url, label: label, typ: typ, order: sendOrder(url)}
	st.types = append(st.types, ts)
	return ts
}

// typeState finds a type's state. st.mu is held, or the caller is the
// handler.
func (st *xdsStream) typeState(url string) *typeState {
	for _, ts := range st.types {
		if ts.url == url {
			return ts
		}
	}
	return nil
}

// sotwRequest handles a state-of-the-world request.
func (st *xdsStream) sotwRequest(req *discovery.DiscoveryRequest) error {
	url, err := st.typeURL(req.GetTypeUrl())
	if err != nil {
		return err
	}
	names := req.GetResourceNames()
	if err := st.admit(req.GetNode(), url, names, nil, 0); err != nil {
		return err
	}
	ts := st.typeFor(url)
	nonce := req.GetResponseNonce()
	st.mu.Lock()
	stale := ts.nonce != "" && nonce != ts.nonce
	st.mu.Unlock()
	if stale {
		st.staleRequest(ts, req.GetVersionInfo(), nonce, req.GetErrorDetail() != nil, req.GetErrorDetail().GetMessage())
		return nil
	}
	if ts.typ >= 0 && len(names) > 0 && (!ts.started || !slices.Equal(ts.sub.names, names)) {
		// A request that changes the subscription shares the cache's
		// strings of its names (Server.shareNames): a request read from
		// the wire has its own copy of each, which the stream would keep.
		st.env.watcher.shareNames(ts.typ, names)
	}
	st.env.watcher.cancel(ts.watch)
	ts.watch = nil
	initial := nonce == ""
	st.mu.Lock()
	// A response the type's watch built since the request was read was
	// not sent: the request replaces it.
	ts.pending = nil
	st.answered(ts, req.GetVersionInfo(), nonce, req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	if !ts.started {
		ts.started = true
		ts.sub = newSotwSubscription(names, nil)
	} else {
		before := ts.sub.names
		ts.sub.setSotw(names, nil)
		if !st.coversAll(ts) && !slices.Equal(before, ts.sub.names) {
			// What the client no longer subscribes to leaves the cache
			// when no other client holds it, without waiting for the next
			// response, which may never come.
			ts.held = subscribedOnly(ts.held, ts.sub.names)
			ts.inflight = subscribedOnly(ts.inflight, ts.sub.names)
		}
	}
	st.applyForget(ts)
	st.mu.Unlock()
	if ts.typ < 0 {
		// A type meshpilot does not serve (secrets, runtime, ...): say
		// once that there is nothing, rather than end the stream.
		if initial {
			st.mu.Lock()
			ts.pending = &response{sotw: &discovery.DiscoveryResponse{VersionInfo: st.env.nextVersion(), TypeUrl: url}}
			st.mu.Unlock()
		}
		return nil
	}
	ts.watch = &watch{typ: ts.typ, client: st.client, stream: st, ts: ts, initial: initial}
	st.env.watcher.watch(ts.watch)
	return nil
}

// deltaRequest handles a delta request.
func (st *xdsStream) deltaRequest(req *discovery.DeltaDiscoveryRequest) error {
	url, err := st.typeURL(req.GetTypeUrl())
	if err != nil {
		return err
	}
	subscribe, unsubscribe := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	if err := st.admit(req.GetNode(), url, subscribe, unsubscribe, len(req.GetInitialResourceVersions())); err != nil {
		return err
	}
	ts := st.typeFor(url)
	nonce := req.GetResponseNonce()
	st.env.watcher.cancel(ts.watch)
	ts.watch = nil
	st.mu.Lock()
	// A response the type's watch built since the request was read was
	// not sent: the stream's record says what was, and the new watch
	// builds the next response from it.
	ts.pending = nil
	if nonce != "" && nonce == ts.nonce {
		st.answered(ts, "", nonce, req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	} else if req.GetErrorDetail() != nil {
		st.mu.Unlock()
		st.staleRequest(ts, "", nonce, true, req.GetErrorDetail().GetMessage())
		st.mu.Lock()
	}
	if !ts.started {
		ts.started = true
		ts.sub = newDeltaSubscription(subscribe, unsubscribe, req.GetInitialResourceVersions())
	} else {
		ts.sub.resubscribe(subscribe)
		ts.sub.updateDelta(subscribe, unsubscribe)
		if len(unsubscribe) > 0 && !st.coversAll(ts) {
			ts.held = subscribedOnly(ts.held, ts.sub.names)
			ts.inflight = subscribedOnly(ts.inflight, ts.sub.names)
		}
	}
	st.applyForget(ts)
	subscribed := len(ts.sub.names)
	st.mu.Unlock()
	if err := st.env.limits.checkSubscribed(subscribed); err != nil {
		return st.env.refuse(st, nil, url, err)
	}
	if ts.typ < 0 {
		return nil // nothing to send of other types, ever
	}
	ts.watch = &watch{typ: ts.typ, client: st.client, stream: st, ts: ts, delta: true, initial: nonce == ""}
	st.env.watcher.watch(ts.watch)
	return nil
}

// coversAll: the type's subscription is to everything of it, which only
// a client other than gRPC has, of a type with a wildcard. st.mu is held.
func (st *xdsStream) coversAll(ts *typeState) bool {
	return ts.sub.wildcard && ts.typ >= 0 && st.env.types[ts.typ].Wildcard && !st.grpcClient
}

// answered applies a request that answers the type's latest response
// (its nonce): an ACK, or a NACK when rejected. st.mu is held.
func (st *xdsStream) answered(ts *typeState, version, nonce, errText string, rejected bool) {
	if !ts.awaiting || nonce == "" || nonce != ts.nonce {
		return
	}
	ts.awaiting = false
	sent := ts.lastSent
	if rejected {
		ts.sub.nacked()
		ts.inflight = nil
		st.recordNACK(ts, &NACK{Version: sent.Version, Nonce: nonce, Error: errText, Time: time.Now()}, false)
		return
	}
	ts.sub.acked()
	ts.held, ts.inflight = ts.inflight, nil
	ts.lastACK = sent
	var since time.Duration
	if !ts.change.IsZero() {
		since = time.Since(ts.change)
	}
	st.env.observeACK(ts.label, st.grpcClient, since)
}

// staleRequest handles a request that answers no response of the
// latest: nothing changes, but a NACK is still counted and logged.
func (st *xdsStream) staleRequest(ts *typeState, version, nonce string, rejected bool, errText string) {
	if e := st.env.log; st.env.debugEnabled() {
		st.mu.Lock()
		latest := ts.nonce
		st.mu.Unlock()
		e.Debug("xds: ignoring a request whose nonce is not the latest sent for its type", "client", logID(st.nodeIDOf()),
			"stream", st.key.name(), "type", ts.label, "nonce", truncate(nonce, logIDMax), "latest", latest)
	}
	if !rejected || nonce == "" {
		return
	}
	st.mu.Lock()
	st.recordNACK(ts, &NACK{Version: version, Nonce: nonce, Error: errText, Time: time.Now()}, true)
	st.mu.Unlock()
}

// recordNACK records and reports a NACK. Its text is the client's, as
// long as the client likes: it is kept and logged truncated. A stale
// one, of an older response than the type's latest, is counted and
// logged but says nothing of the type's state. st.mu is held.
func (st *xdsStream) recordNACK(ts *typeState, n *NACK, stale bool) {
	n.Error = truncate(n.Error, MaxNACKBytes)
	n.Nonce = truncate(n.Nonce, logIDMax)
	n.Version = truncate(n.Version, logIDMax)
	if !stale {
		ts.lastNACK = n
	}
	st.nacks++
	st.lastNACK = n.Error
	st.env.nacked(st.nodeID, st.key, ts.label, st.grpcClient, n)
}

// applyForget drops what the type's next watch must send again. st.mu
// is held.
func (st *xdsStream) applyForget(ts *typeState) {
	if len(ts.forget) == 0 {
		return
	}
	ts.sub.forget(ts.forget)
	ts.forget = nil
}

// answer puts a watch's response in its type's slot; the watcher kicks
// the stream once its push is done (kick). Called with the watcher's
// lock held, before the watch is cancelled.
func (w *watch) answer(r *response) {
	st := w.stream
	st.mu.Lock()
	if !st.closed {
		w.ts.pending = r
	}
	st.mu.Unlock()
}

// kick starts a sender if responses are pending and none runs.
func (st *xdsStream) kick() {
	st.mu.Lock()
	start := !st.sending && !st.closed && st.hasPending()
	if start {
		st.sending = true
	}
	st.mu.Unlock()
	if start {
		go st.sendLoop()
	}
}

// hasPending: a response waits to be sent. st.mu is held.
func (st *xdsStream) hasPending() bool {
	for _, ts := range st.types {
		if ts.pending != nil {
			return true
		}
	}
	return false
}

// next takes the first pending response in send order, gives it its
// nonce and records it as sent: what it carries is what the stream was
// sent of its type, until the client rejects it. st.mu is held.
func (st *xdsStream) next() (*typeState, *response) {
	if st.closed {
		return nil, nil
	}
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
	switch {
	case first.url == resource.ClusterType && !st.grpcClient:
		st.forgetEndpoints(first, r)
	case len(first.forget) > 0:
		// Endpoints sent after the cluster changed: Envoy has them.
		first.forget = slices.DeleteFunc(first.forget, func(n string) bool {
			_, ok := r.returned.get(n)
			return ok
		})
	}
	first.sub.sentResponse(r.returned, r.holds)
	first.awaiting = true
	first.inflight, first.change = r.holds, r.change
	first.lastSent = &Sent{Version: r.version(), Nonce: first.nonce, Time: time.Now()}
	return first, r
}

// forgetEndpoints marks the clusters a CDS response adds or changes for
// the stream's endpoints to send again: Envoy warms a changed cluster
// and completes only when a ClusterLoadAssignment for it arrives, even
// an unchanged one (the protocol's resource warming; istiod answers
// there too). Applied by the next EDS request, which is Envoy's request
// for the warming cluster. st.mu is held.
func (st *xdsStream) forgetEndpoints(cds *typeState, r *response) {
	eds := st.typeState(resource.EndpointType)
	if eds == nil || (len(eds.sub.returned) == 0 && len(eds.sub.sent) == 0) {
		return // no endpoints sent: nothing to forget, and no walk of every cluster
	}
	for _, e := range r.holds {
		if v, ok := cds.sub.returnedVersion(e.name); ok && v == e.version {
			continue
		}
		if _, ok := eds.sub.returnedVersion(e.name); ok {
			eds.forget = append(eds.forget, e.name)
		}
	}
}

// sendLoop is the sender: it sends the pending responses until none is
// left, or the stream ends, and then stops being the sender in the same
// critical section in which it found nothing left.
func (st *xdsStream) sendLoop() {
	for {
		st.mu.Lock()
		ts, r := st.next()
		if r == nil {
			st.sending = false
			st.idle.Broadcast()
			st.mu.Unlock()
			return
		}
		grpcClient := st.grpcClient
		st.mu.Unlock()
		var since time.Duration
		if !r.change.IsZero() {
			since = time.Since(r.change)
		}
		st.env.observeSent(ts.label, grpcClient, since)
		if err := st.out.SendMsg(r.message()); err != nil {
			// The stream is ending (its receive fails too), or was ended
			// by the send timeout.
			st.mu.Lock()
			st.closed = true
			st.dropPending()
			st.sending = false
			st.idle.Broadcast()
			st.mu.Unlock()
			return
		}
	}
}

// handle handles one request as the stream's sender: it waits for a
// running sender to finish, so that a client that does not read has its
// requests wait unread, and then sends what the request's watch answers
// itself, with no goroutine of its own.
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
	if err := request(); err != nil {
		st.mu.Lock()
		st.sending = false
		st.idle.Broadcast()
		st.mu.Unlock()
		return err
	}
	st.sendLoop()
	return nil
}

// dropPending forgets the unsent responses. st.mu is held.
func (st *xdsStream) dropPending() {
	for _, ts := range st.types {
		ts.pending = nil
	}
}

// close ends the stream: its watches are cancelled, its unsent responses
// dropped, what it held let go, and it returns once no send is under
// way, since a handler that returns ends its stream under a send.
// Called on the handler goroutine.
func (st *xdsStream) close() {
	st.mu.Lock()
	st.closed = true
	st.dropPending()
	st.mu.Unlock()
	for _, ts := range st.types {
		st.env.watcher.cancel(ts.watch)
		st.env.watcher.endType(ts)
		ts.watch = nil
	}
	st.mu.Lock()
	for st.sending {
		st.idle.Wait()
	}
	for _, ts := range st.types {
		ts.held, ts.inflight = nil, nil
		ts.sub = subscription{}
	}
	st.mu.Unlock()
	st.env.closed(st)
}

// truncate bounds a client's text as kept and logged.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "...(truncated)"
}
