package xds

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/translate"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// This file holds the model-based test of the stream loop. A reference
// model says what each client must hold by the protocol's rules; random
// interleavings of pushes that touch several types at once,
// subscriptions, ACKs, NACKs, stale nonces, reconnects with
// initial_resource_versions, clients that stop reading and stream ends
// drive the real loop and the real Server (its cache and watch index)
// over generators whose resources the test defines. At each quiescent
// point the properties are checked:
//   - every client holds exactly the model's latest state (within
//     modelBound of the last change), except what a NACK leaves as the
//     protocol says;
//   - what /debug/syncz and config dumps say of each stream agrees with
//     what its client ACKed and NACKed;
//   - a push's responses reach a client clusters before endpoints and
//     listeners before routes, within and across pushes;
//   - never two sends at once on a stream;
//   - nothing is left (goroutines, watches, stream records) once the
//     streams end.

// modelTrace logs what a script does (MESHPILOT_MODEL_TRACE=1).
var modelTrace = os.Getenv("MESHPILOT_MODEL_TRACE") != ""

// modelBound is how long a quiescent point may take to come: every
// client answered and nothing pending. It bounds the time the loop
// takes to deliver, not the test's outcome on a busy machine: a lost
// response never arrives.
const modelBound = 20 * time.Second

// modelNames are the resource names of every type.
var modelNames = []string{"a", "b", "c", "d"}

// modelTypes are the four types as meshpilot serves them: full state
// for listeners and clusters, a wildcard for clusters, routes and
// endpoints (listeners are never a wildcard).
var modelTypes = []translate.ResourceType{
	{URL: resource.ListenerType, Short: "LDS", FullState: true},
	{URL: resource.RouteType, Short: "RDS", Wildcard: true},
	{URL: resource.ClusterType, Short: "CDS", FullState: true, Wildcard: true},
	{URL: resource.EndpointType, Short: "EDS", Wildcard: true},
}

// world is the test's model content: per type, name to generation (a
// resource exists when it has one). The generators read it under the
// server's lock; the test changes it between pushes.
type world struct {
	mu  sync.Mutex
	gen [4]map[string]int
	seq int
}

func newWorld() *world {
	w := &world{}
	for i := range w.gen {
		w.gen[i] = map[string]int{}
	}
	return w
}

func (w *world) get(typ int, name string) (int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g, ok := w.gen[typ][name]
	return g, ok
}

// content is what a resource carries, and so what a client holds of it.
func content(name string, gen int) string { return name + "@" + strconv.Itoa(gen) }

func worldKey(typ int, name string) model.ConfigKey {
	return model.ConfigKey{Kind: model.KindService, Name: modelTypes[typ].Short + "/" + name}
}

// worldGen generates one type from the world.
type worldGen struct {
	typ int
	w   *world
}

func (g *worldGen) Type() translate.ResourceType { return modelTypes[g.typ] }

func (g *worldGen) Generate(_ *translate.Client, name string) translate.Result {
	deps := []model.ConfigKey{worldKey(g.typ, name)}
	gen, ok := g.w.get(g.typ, name)
	if !ok {
		return translate.Result{Deps: deps}
	}
	return translate.Result{Resource: wrapperspb.String(content(name, gen)), Deps: deps}
}

func (g *worldGen) AllNames() []string {
	g.w.mu.Lock()
	defer g.w.mu.Unlock()
	return slices.Sorted(maps.Keys(g.w.gen[g.typ]))
}

// modelStream is the gRPC stream the loop serves, in memory: requests
// the client queued are received in order, and a send is delivered to
// the client's inbox at once, or once the client reads again when it
// has stopped reading.
type modelStream struct {
	grpc.ServerStream
	ctx    context.Context
	cancel context.CancelFunc
	c      *modelClient

	mu       sync.Mutex
	cond     sync.Cond
	requests []proto.Message
	// receiving: the handler waits in RecvMsg with nothing queued.
	receiving bool
	// inSend counts the goroutines in SendMsg.
	inSend atomic.Int32
}

func (m *modelStream) Context() context.Context { return m.ctx }

func (m *modelStream) RecvMsg(v any) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.requests) == 0 {
		if m.ctx.Err() != nil {
			return io.EOF
		}
		m.receiving = true
		m.cond.Wait()
	}
	m.receiving = false
	req := m.requests[0]
	m.requests = m.requests[1:]
	proto.Reset(v.(proto.Message))
	proto.Merge(v.(proto.Message), req)
	return nil
}

func (m *modelStream) SendMsg(v any) error {
	if n := m.inSend.Add(1); n > 1 {
		m.c.h.violation(fmt.Sprintf("client %d: %d sends at once on one stream", m.c.id, n))
	}
	defer m.inSend.Add(-1)
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.paused && m.ctx.Err() == nil {
		c.cond.Wait()
	}
	if m.ctx.Err() != nil {
		return io.EOF
	}
	c.inbox = append(c.inbox, proto.Clone(v.(proto.Message)))
	return nil
}

func (m *modelStream) send(req proto.Message) {
	if modelTrace {
		m.c.h.t.Logf("client %d sends %v", m.c.id, req)
	}
	m.mu.Lock()
	m.requests = append(m.requests, req)
	m.cond.Broadcast()
	m.mu.Unlock()
}

func (m *modelStream) end() {
	m.cancel()
	m.mu.Lock()
	m.cond.Broadcast()
	m.mu.Unlock()
	m.c.mu.Lock()
	m.c.cond.Broadcast()
	m.c.mu.Unlock()
}

// idle: the handler waits for a request and none is queued.
func (m *modelStream) idle() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.receiving && len(m.requests) == 0
}

// clientType is what a client holds and asks of one type.
type clientType struct {
	started  bool
	wildcard bool
	names    map[string]bool
	// held is name to content; versions the versions the server gave
	// (delta, for initial_resource_versions).
	held     map[string]string
	versions map[string]string
	// lastNonce and lastVersion are the latest response's; nonces all
	// the responses'.
	lastNonce, lastVersion string
	nonces                 []string
	// rejectNext: NACK the next response; nacked: the latest response
	// was NACKed, and wouldBe is what the client would hold had it
	// accepted it.
	rejectNext bool
	nacked     bool
	wouldBe    map[string]string
	// nackNames is the subscription when the client NACKed: while it
	// holds, the server must not send the rejected response again, unless
	// the NACK itself told the server of a new subscription
	// (nackNewNames: the client changed its names after the request the
	// rejected response answers, in requests the server ignored as
	// stale). renamed: the names changed since the latest response.
	nackNames    []string
	nackNewNames bool
	renamed      bool
	// acked: the latest response was ACKed.
	acked bool
}

// modelClient is one client: a gRPC client (state of the world, names
// only) or Envoy (state of the world or delta, clusters by wildcard).
type modelClient struct {
	h     *modelHarness
	id    int
	grpc  bool
	delta bool
	node  *core.Node

	st     *xdsStream
	stream *modelStream
	done   chan struct{}

	mu     sync.Mutex
	cond   sync.Cond
	paused bool
	inbox  []proto.Message
	types  [4]*clientType
	// nacks counts the NACKs sent on the current stream, stale ones
	// included.
	nacks uint64
}

type modelHarness struct {
	t       *testing.T
	s       *Server
	w       *world
	clients []*modelClient
	pushes  int

	mu         sync.Mutex
	violations []string
}

// seq is the world's sequence: it moves with each push.
func (h *modelHarness) seq() int {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	return h.w.seq
}

func (h *modelHarness) violation(v string) {
	h.mu.Lock()
	h.violations = append(h.violations, v)
	h.mu.Unlock()
}

func (h *modelHarness) failIfViolated() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.violations) > 0 {
		h.t.Fatalf("%s", strings.Join(h.violations, "\n"))
	}
}

func newModelHarness(t *testing.T, kinds []byte) *modelHarness {
	w := newWorld()
	gens := make([]translate.Generator, len(modelTypes))
	for i := range gens {
		gens[i] = &worldGen{typ: i, w: w}
	}
	h := &modelHarness{t: t, w: w, s: newServer(Options{Discovery: model.NewStore(), Logger: discardLogger()}, gens)}
	for i, k := range kinds {
		c := &modelClient{h: h, id: i}
		switch k % 3 {
		case 0:
			c.grpc = true
			c.node = &core.Node{Id: fmt.Sprint("grpc-", i), UserAgentName: "gRPC Go",
				Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{"GENERATOR": structpb.NewStringValue("grpc"), "NAMESPACE": structpb.NewStringValue("default")}}}
		case 1:
			c.node = &core.Node{Id: fmt.Sprint("sidecar~10.0.0.", i, "~envoy-", i, ".default~default.svc.cluster.local"), UserAgentName: "envoy"}
		case 2:
			c.delta = true
			c.node = &core.Node{Id: fmt.Sprint("sidecar~10.0.0.", i, "~envoy-", i, ".default~default.svc.cluster.local"), UserAgentName: "envoy"}
		}
		c.cond.L = &c.mu
		for j := range c.types {
			c.types[j] = &clientType{names: map[string]bool{}, held: map[string]string{}, versions: map[string]string{}}
		}
		h.clients = append(h.clients, c)
		c.connect()
	}
	return h
}

// connect opens the client's stream and subscribes: Envoy to clusters by
// wildcard and listeners, gRPC to listener "a"; a reconnect asks again
// for what the client asked before, a delta client saying what it holds.
func (c *modelClient) connect() {
	h := c.h
	ctx, cancel := context.WithCancel(context.Background())
	ms := &modelStream{ctx: ctx, cancel: cancel, c: c}
	ms.cond.L = &ms.mu
	k := streamKey{delta: c.delta}
	if c.delta {
		k.id = h.s.deltaStreams.Add(1)
	} else {
		k.id = h.s.sotwStreams.Add(1)
	}
	st := newStream(h.s.env, k, ms, "")
	if err := h.s.open(ctx, st); err != nil {
		h.t.Fatalf("open: %v", err)
	}
	c.mu.Lock()
	c.st, c.stream, c.done = st, ms, make(chan struct{})
	c.inbox = nil
	c.paused = false
	c.nacks = 0
	c.mu.Unlock()
	done := c.done
	go func() {
		defer close(done)
		_ = st.run(c.delta)
	}()
	first := true
	for typ, ct := range c.types {
		if !ct.started {
			continue
		}
		ct.lastNonce, ct.nonces, ct.nacked, ct.rejectNext, ct.acked = "", nil, false, false, false
		c.request(typ, first, nil, nil, true)
		first = false
	}
	if first {
		if c.grpc {
			c.subscribe(0, "a")
		} else {
			c.types[2].wildcard = true
			c.types[0].wildcard = true
			c.request(2, true, nil, nil, true)
			c.request(0, false, nil, nil, true)
		}
	}
}

// request sends the client's request of a type: its subscription, and
// the nonce and version of its latest response (none when initial).
// For delta, subscribe and unsubscribe are the request's lists.
func (c *modelClient) request(typ int, withNode bool, subscribe, unsubscribe []string, initial bool) {
	ct := c.types[typ]
	ct.started = true
	url := modelTypes[typ].URL
	var node *core.Node
	if withNode {
		node = c.node
	}
	if c.delta {
		req := &discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: url, ResourceNamesSubscribe: subscribe, ResourceNamesUnsubscribe: unsubscribe}
		if initial {
			if !ct.wildcard {
				req.ResourceNamesSubscribe = slices.Sorted(maps.Keys(ct.names))
			} else if len(ct.names) > 0 {
				req.ResourceNamesSubscribe = append([]string{"*"}, slices.Sorted(maps.Keys(ct.names))...)
			}
			if len(ct.versions) > 0 {
				req.InitialResourceVersions = maps.Clone(ct.versions)
			}
		} else {
			req.ResponseNonce = ct.lastNonce
		}
		c.stream.send(req)
		return
	}
	names := slices.Sorted(maps.Keys(ct.names))
	if ct.wildcard && len(names) > 0 {
		names = append([]string{"*"}, names...)
	}
	req := &discovery.DiscoveryRequest{Node: node, TypeUrl: url, ResourceNames: names}
	if !initial {
		req.ResponseNonce, req.VersionInfo = ct.lastNonce, ct.lastVersion
	}
	c.stream.send(req)
}

// subscribe adds a name. A client asks for endpoints only of a cluster
// it holds and for a route only of a listener it holds, as Envoy and
// gRPC do.
func (c *modelClient) subscribe(typ int, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ct := c.types[typ]
	if ct.names[name] || (ct.wildcard && !c.grpc && modelTypes[typ].Wildcard) {
		return
	}
	switch typ {
	case 1:
		if _, ok := c.types[0].held[name]; !ok {
			return
		}
	case 3:
		if _, ok := c.types[2].held[name]; !ok {
			return
		}
	}
	ct.names[name] = true
	ct.renamed = true
	if c.delta {
		c.request(typ, !ct.started && !c.anyStarted(), []string{name}, nil, false)
		return
	}
	c.request(typ, !c.anyStarted(), nil, nil, !ct.started)
}

func (c *modelClient) anyStarted() bool {
	for _, ct := range c.types {
		if ct.started {
			return true
		}
	}
	return false
}

// unsubscribe drops a name; the client forgets what it held of it.
func (c *modelClient) unsubscribe(typ int, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ct := c.types[typ]
	if !ct.names[name] || !ct.started {
		return
	}
	delete(ct.names, name)
	ct.renamed = true
	if !ct.wildcard || !modelTypes[typ].Wildcard || c.grpc {
		delete(ct.held, name)
		delete(ct.versions, name)
		if ct.wouldBe != nil {
			delete(ct.wouldBe, name)
		}
	}
	if c.delta {
		c.request(typ, false, nil, []string{name}, false)
		return
	}
	c.request(typ, false, nil, nil, false)
}

// stale sends a request with a nonce that is not the latest, naming
// other names: the server must ignore it.
func (c *modelClient) stale(typ int, pick byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ct := c.types[typ]
	if c.delta || len(ct.nonces) < 2 {
		return
	}
	nonce := ct.nonces[int(pick)%(len(ct.nonces)-1)]
	req := &discovery.DiscoveryRequest{TypeUrl: modelTypes[typ].URL, ResourceNames: []string{modelNames[int(pick)%len(modelNames)]}, ResponseNonce: nonce}
	if pick%2 == 0 {
		req.ErrorDetail = &statuspb.Status{Message: "stale rejection"}
		c.nacks++
	}
	c.stream.send(req)
}

func typeIndex(url string) int {
	for i, t := range modelTypes {
		if t.URL == url {
			return i
		}
	}
	return -1
}

// process reads the client's inbox: each response is applied and ACKed,
// or NACKed and not applied when the client rejects it. It returns the
// types of the responses read, in order.
func (c *modelClient) process() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var read []int
	for len(c.inbox) > 0 {
		m := c.inbox[0]
		c.inbox = c.inbox[1:]
		var typ int
		if c.delta {
			typ = c.applyDelta(m.(*discovery.DeltaDiscoveryResponse))
		} else {
			typ = c.applySotw(m.(*discovery.DiscoveryResponse))
		}
		if typ >= 0 {
			read = append(read, typ)
		}
	}
	return read
}

func decode(t *testing.T, v []byte) string {
	var s wrapperspb.StringValue
	if err := proto.Unmarshal(v, &s); err != nil {
		t.Fatalf("a resource does not decode: %v", err)
	}
	return s.GetValue()
}

func nameOf(content string) string { return content[:strings.IndexByte(content, '@')] }

func (c *modelClient) applySotw(r *discovery.DiscoveryResponse) int {
	typ := typeIndex(r.GetTypeUrl())
	if modelTrace {
		var got []string
		for _, a := range r.GetResources() {
			got = append(got, decode(c.h.t, a.GetValue()))
		}
		c.h.t.Logf("client %d got %s nonce %s %v (reject %v)", c.id, r.GetTypeUrl()[strings.LastIndexByte(r.GetTypeUrl(), '.')+1:], r.GetNonce(), got, typ >= 0 && c.types[typ].rejectNext)
	}
	if typ < 0 {
		c.h.violation(fmt.Sprintf("client %d: a response of type %q", c.id, r.GetTypeUrl()))
		return -1
	}
	ct := c.types[typ]
	ct.lastNonce, ct.lastVersion = r.GetNonce(), r.GetVersionInfo()
	ct.nonces = append(ct.nonces, r.GetNonce())
	next := maps.Clone(ct.held)
	full := modelTypes[typ].FullState || (ct.wildcard && modelTypes[typ].Wildcard && !c.grpc)
	if full {
		next = map[string]string{}
	}
	for _, a := range r.GetResources() {
		v := decode(c.h.t, a.GetValue())
		n := nameOf(v)
		if !ct.names[n] && !(ct.wildcard && modelTypes[typ].Wildcard && !c.grpc) {
			// A response under way when the client dropped the name: the
			// client ignores it, as grpc-go and Envoy ignore what they do
			// not watch.
			continue
		}
		next[n] = v
	}
	c.answer(typ, next, nil)
	return typ
}

func (c *modelClient) applyDelta(r *discovery.DeltaDiscoveryResponse) int {
	typ := typeIndex(r.GetTypeUrl())
	if typ < 0 {
		c.h.violation(fmt.Sprintf("client %d: a response of type %q", c.id, r.GetTypeUrl()))
		return -1
	}
	ct := c.types[typ]
	ct.lastNonce = r.GetNonce()
	ct.nonces = append(ct.nonces, r.GetNonce())
	next := maps.Clone(ct.held)
	versions := maps.Clone(ct.versions)
	wildcard := ct.wildcard && modelTypes[typ].Wildcard
	for _, res := range r.GetResources() {
		v := decode(c.h.t, res.GetResource().GetValue())
		n := nameOf(v)
		if n != res.GetName() {
			c.h.violation(fmt.Sprintf("client %d: resource named %q carries %q", c.id, res.GetName(), v))
		}
		if !wildcard && !ct.names[n] {
			continue // under way when the client dropped it
		}
		next[n] = v
		versions[n] = res.GetVersion()
	}
	for _, n := range r.GetRemovedResources() {
		delete(next, n)
		delete(versions, n)
	}
	c.answer(typ, next, versions)
	return typ
}

// answer ACKs a response and holds next, or NACKs it when the client
// rejects it.
func (c *modelClient) answer(typ int, next, versions map[string]string) {
	ct := c.types[typ]
	if ct.nacked && !ct.nackNewNames && maps.Equal(next, ct.wouldBe) && slices.Equal(ct.nackNames, slices.Sorted(maps.Keys(ct.names))) {
		c.h.violation(fmt.Sprintf("client %d %s: the response it rejected was sent again: %v", c.id, modelTypes[typ].Short, next))
	}
	if ct.rejectNext {
		ct.rejectNext = false
		c.nacks++
		ct.nacked, ct.acked, ct.wouldBe = true, false, next
		ct.nackNames = slices.Sorted(maps.Keys(ct.names))
		ct.nackNewNames = ct.renamed
		ct.renamed = false
		if c.delta {
			c.stream.send(&discovery.DeltaDiscoveryRequest{TypeUrl: modelTypes[typ].URL, ResponseNonce: ct.lastNonce, ErrorDetail: &statuspb.Status{Message: "rejected"}})
			return
		}
		names := slices.Sorted(maps.Keys(ct.names))
		if ct.wildcard && len(names) > 0 {
			names = append([]string{"*"}, names...)
		}
		c.stream.send(&discovery.DiscoveryRequest{TypeUrl: modelTypes[typ].URL, ResourceNames: names, ResponseNonce: ct.lastNonce,
			VersionInfo: ct.lastVersion, ErrorDetail: &statuspb.Status{Message: "rejected"}})
		return
	}
	ct.renamed = false
	ct.held = next
	if versions != nil {
		ct.versions = versions
	}
	ct.nacked, ct.acked, ct.wouldBe = false, true, nil
	c.request(typ, false, nil, nil, false)
}

// quiesce lets every client read, answer and read again until no stream
// sends or has anything pending and no client has anything unread;
// responses read go to batch, by client.
func (h *modelHarness) quiesce(batch map[int][]int) {
	h.t.Helper()
	for _, c := range h.clients {
		c.resume()
	}
	deadline := time.Now().Add(modelBound)
	for {
		progress := false
		for _, c := range h.clients {
			if read := c.process(); len(read) > 0 {
				progress = true
				if batch != nil {
					batch[c.id] = append(batch[c.id], read...)
				}
			}
		}
		if !progress && h.idle() {
			for _, c := range h.clients {
				c.mu.Lock()
				n := len(c.inbox)
				c.mu.Unlock()
				if n > 0 {
					h.t.Fatalf("quiescent with client %d's %d responses unread: %s", c.id, n, h.describe())
				}
			}
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no quiescent point within %v: %s", modelBound, h.describe())
		}
		if !progress {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// idle: every open stream waits for a request with nothing pending or
// being sent, and no client has anything unread.
func (h *modelHarness) idle() bool {
	for _, c := range h.clients {
		if c.stream == nil || c.stream.ctx.Err() != nil {
			continue
		}
		// The handler and the sender first: once both wait, nothing more
		// reaches the inbox until the client acts.
		if !c.stream.idle() {
			return false
		}
		st := c.st
		st.mu.Lock()
		busy := st.sending || st.hasPending()
		st.mu.Unlock()
		if busy || !c.stream.idle() {
			return false
		}
		c.mu.Lock()
		unread := len(c.inbox)
		c.mu.Unlock()
		if unread > 0 {
			return false
		}
	}
	return true
}

func (h *modelHarness) describe() string {
	var b strings.Builder
	for _, c := range h.clients {
		if c.stream == nil || c.stream.ctx.Err() != nil {
			continue
		}
		st := c.st
		st.mu.Lock()
		fmt.Fprintf(&b, "\nclient %d: sending %v, handler idle %v, inbox %d;", c.id, st.sending, c.stream.idle(), len(c.inbox))
		for _, ts := range st.types {
			fmt.Fprintf(&b, " %s pending %v awaiting %v;", ts.label, ts.pending != nil, ts.awaiting)
		}
		st.mu.Unlock()
	}
	return b.String()
}

func (c *modelClient) pause() {
	c.mu.Lock()
	c.paused = true
	c.mu.Unlock()
}

func (c *modelClient) resume() {
	c.mu.Lock()
	c.paused = false
	c.cond.Broadcast()
	c.mu.Unlock()
}

// end closes the client's stream and waits for its handler to return.
func (c *modelClient) end() {
	if c.stream == nil || c.stream.ctx.Err() != nil {
		return
	}
	c.stream.end()
	<-c.done
}

// push changes the world and pushes the change. Each change is a byte:
// the type, the name, and whether the resource goes; a cluster and its
// endpoints, or a listener and its route, change together when the
// byte says so, as a service's do.
func (h *modelHarness) push(changes []byte) {
	h.pushes++
	if modelTrace {
		h.t.Logf("push %v", changes)
	}
	var req push.Request
	req.Configs = map[model.ConfigKey]struct{}{}
	req.Start = time.Now()
	h.w.mu.Lock()
	h.w.seq++
	change := func(typ int, name string, remove bool) {
		if remove {
			delete(h.w.gen[typ], name)
		} else {
			h.w.gen[typ][name] = h.w.seq
		}
		req.Configs[worldKey(typ, name)] = struct{}{}
	}
	for _, b := range changes {
		typ, name, remove := int(b&3), modelNames[int(b>>2)&3], b&0x30 == 0x30
		change(typ, name, remove)
		if b&0x40 != 0 {
			change(typ^1, name, remove) // LDS with RDS, CDS with EDS
		}
	}
	h.w.mu.Unlock()
	h.s.Push(req)
}

// expected is what a client must hold of a type now.
func (h *modelHarness) expected(c *modelClient, typ int) map[string]string {
	ct := c.types[typ]
	out := map[string]string{}
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	wildcard := ct.wildcard && modelTypes[typ].Wildcard && !c.grpc
	for n, g := range h.w.gen[typ] {
		if wildcard || ct.names[n] {
			out[n] = content(n, g)
		}
	}
	return out
}

// check compares each client with the model, and each stream's record
// with what its client did.
func (h *modelHarness) check() {
	h.t.Helper()
	h.failIfViolated()
	for _, c := range h.clients {
		if c.stream == nil || c.stream.ctx.Err() != nil {
			continue
		}
		infos := h.s.ConfigDump(c.node.GetId())
		if len(infos) != 1 {
			h.t.Fatalf("client %d: %d streams in the config dump, want 1", c.id, len(infos))
		}
		info := infos[0]
		if info.NACKs != c.nacks {
			h.t.Fatalf("client %d sent %d NACKs, the record says %d", c.id, c.nacks, info.NACKs)
		}
		for typ, ct := range c.types {
			if !ct.started {
				continue
			}
			want := h.expected(c, typ)
			got := ct.held
			nonFull := !c.delta && !modelTypes[typ].FullState && !(ct.wildcard && modelTypes[typ].Wildcard && !c.grpc)
			if nonFull {
				// A state-of-the-world response of routes or endpoints
				// carries what changed; one that goes is not said to.
				got = maps.Clone(got)
				for n := range got {
					if _, ok := want[n]; !ok {
						delete(got, n)
					}
				}
			}
			if ct.nacked {
				wouldBe := ct.wouldBe
				if nonFull {
					wouldBe = maps.Clone(wouldBe)
					for n := range wouldBe {
						if _, ok := want[n]; !ok {
							delete(wouldBe, n)
						}
					}
				}
				if maps.Equal(got, want) {
					continue // what it held before the NACK is the latest
				}
				if maps.Equal(wouldBe, want) {
					// Nothing changed since the NACK: the rejected
					// response is not sent again, the client holds what
					// it held.
					if s := info.Types[modelTypes[typ].Short]; s == nil || s.Status != NACKed {
						h.t.Fatalf("client %d %s: the latest response was NACKed, the record says %+v", c.id, modelTypes[typ].Short, s)
					}
					continue
				}
				h.t.Fatalf("client %d %s: NACKed %v, and the model changed since to %v, but nothing was sent", c.id, modelTypes[typ].Short, wouldBe, want)
			}
			if !maps.Equal(got, want) {
				h.t.Fatalf("client %d %s (subscribed %v, wildcard %v): holds %v, want %v", c.id, modelTypes[typ].Short,
					slices.Sorted(maps.Keys(ct.names)), ct.wildcard, got, want)
			}
			s := info.Types[modelTypes[typ].Short]
			if ct.acked && (s == nil || s.Status != Synced || s.LastSent.Nonce != ct.lastNonce) {
				h.t.Fatalf("client %d %s: ACKed nonce %s, the record says %+v", c.id, modelTypes[typ].Short, ct.lastNonce, s)
			}
			if ct.acked {
				dumped := map[string]string{}
				for _, a := range info.Resources[modelTypes[typ].Short] {
					v := decode(h.t, a.GetValue())
					if _, ok := want[nameOf(v)]; ok || !nonFull {
						dumped[nameOf(v)] = v
					}
				}
				if !maps.Equal(dumped, got) {
					h.t.Fatalf("client %d %s: the config dump says %v, the client holds %v", c.id, modelTypes[typ].Short, dumped, got)
				}
			}
		}
	}
}

// checkOrder: what a client read of one push, or after it stopped
// reading, came in send order, clusters before endpoints and listeners
// before routes. Its first response may have been taken before the
// others were pending (a stream that stopped reading holds it).
func (h *modelHarness) checkOrder(batch map[int][]int, skipFirst bool) {
	h.t.Helper()
	for id, types := range batch {
		if skipFirst && len(types) > 0 {
			types = types[1:]
		}
		order := make([]int, len(types))
		for i, t := range types {
			order[i] = sendOrder(modelTypes[t].URL)
		}
		if !sort.IntsAreSorted(order) {
			names := make([]string, len(types))
			for i, t := range types {
				names[i] = modelTypes[t].Short
			}
			h.t.Fatalf("client %d read %v, not clusters, endpoints, listeners, routes", id, names)
		}
	}
}

// onlyPushed reads what a quiescent client is sent by one push, before
// it answers any of it.
func (h *modelHarness) onlyPushed(changes []byte) map[int][]int {
	h.push(changes)
	h.awaitSenders()
	return h.unread()
}

// awaitSenders waits until no stream sends or has anything pending.
func (h *modelHarness) awaitSenders() {
	h.t.Helper()
	deadline := time.Now().Add(modelBound)
	for !h.sendersDone() {
		if time.Now().After(deadline) {
			h.t.Fatalf("sends never ended: %s", h.describe())
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// unread lists the types of what each client has not read yet.
func (h *modelHarness) unread() map[int][]int {
	batch := map[int][]int{}
	for _, c := range h.clients {
		c.mu.Lock()
		for _, m := range c.inbox {
			batch[c.id] = append(batch[c.id], typeIndex(m.(interface{ GetTypeUrl() string }).GetTypeUrl()))
		}
		c.mu.Unlock()
	}
	return batch
}

func (h *modelHarness) sendersDone() bool {
	for _, c := range h.clients {
		if c.stream == nil || c.stream.ctx.Err() != nil {
			continue
		}
		st := c.st
		st.mu.Lock()
		busy := st.sending || st.hasPending()
		st.mu.Unlock()
		if busy {
			return false
		}
	}
	return true
}

// closeAll ends every stream and checks that nothing is left.
func (h *modelHarness) closeAll(goroutines int) {
	h.t.Helper()
	for _, c := range h.clients {
		c.end()
	}
	if st := h.s.Stats(); st.Watches != 0 {
		h.t.Fatalf("%d watches left once every stream ended", st.Watches)
	}
	if n := registrations(h.s); n != 0 {
		h.t.Fatalf("%d registrations left in the watch index once every stream ended", n)
	}
	if n := len(h.s.Clients()); n != 0 {
		h.t.Fatalf("%d stream records left once every stream ended", n)
	}
	deadline := time.Now().Add(modelBound)
	for runtime.NumGoroutine() > goroutines {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			h.t.Fatalf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), goroutines, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
	h.failIfViolated()
}

// byteReader hands out the fuzzer's bytes.
type byteReader struct {
	b []byte
}

func (r *byteReader) next() (byte, bool) {
	if len(r.b) == 0 {
		return 0, false
	}
	b := r.b[0]
	r.b = r.b[1:]
	return b, true
}

func (r *byteReader) must() byte {
	b, _ := r.next()
	return b
}

// playModel plays one script: its first byte picks the clients' kinds,
// then each op is a byte and its operands.
func playModel(t *testing.T, script []byte) {
	goroutines := runtime.NumGoroutine()
	r := &byteReader{b: script}
	k := r.must()
	kinds := []byte{0, 1, 2}
	if k&0x80 != 0 {
		kinds = []byte{k % 3, (k / 3) % 3}
	}
	h := newModelHarness(t, kinds)
	defer func() {
		for _, c := range h.clients {
			c.end()
		}
	}()
	h.quiesce(nil)
	h.check()
	for ops := 0; ops < 64; ops++ {
		op, ok := r.next()
		if !ok {
			break
		}
		c := h.clients[int(r.must())%len(h.clients)]
		arg := r.must()
		typ := int(arg & 3)
		name := modelNames[int(arg>>2)&3]
		if modelTrace {
			t.Logf("op %d client %d type %d name %s", op%12, c.id, typ, name)
		}
		switch op % 12 {
		case 0: // a push, while clients do what they do
			n := int(arg%3) + 1
			changes := make([]byte, n)
			for i := range changes {
				changes[i] = r.must()
			}
			h.push(changes)
		case 1: // a push to quiescent clients: read before they answer
			h.quiesce(nil)
			h.check()
			h.checkOrder(h.onlyPushed([]byte{arg, r.must()}), false)
			h.quiesce(nil)
			h.check()
		case 2:
			if c.stream.ctx.Err() == nil {
				c.subscribe(typ, name)
			}
		case 3:
			if c.stream.ctx.Err() == nil {
				c.unsubscribe(typ, name)
			}
		case 4:
			c.mu.Lock()
			c.types[typ].rejectNext = true
			c.mu.Unlock()
		case 5:
			if c.stream.ctx.Err() == nil {
				c.stale(typ, arg)
			}
		case 6:
			c.pause()
		case 7:
			// A client that stops reading while pushes go on: once it
			// reads again, what it is sent comes in send order.
			h.quiesce(nil)
			h.check()
			c.pause()
			h.push([]byte{arg, r.must()})
			h.push([]byte{r.must()})
			c.resume()
			h.awaitSenders()
			h.checkOrder(h.unread(), true)
		case 8:
			c.process()
		case 9: // reconnect: the stream ends, the client connects again
			c.end()
			c.connect()
		case 10:
			c.end()
		case 11:
			h.quiesce(nil)
			h.check()
		}
		h.failIfViolated()
	}
	for _, c := range h.clients {
		if c.stream.ctx.Err() != nil {
			c.connect()
		}
	}
	h.quiesce(nil)
	h.check()
	// One more change of everything: every client that rejected its
	// latest response is sent the latest.
	all := []byte{}
	for i := range modelNames {
		all = append(all, byte(i<<2)|0x40, byte(i<<2)|0x42)
	}
	h.push(all)
	h.quiesce(nil)
	h.check()
	h.closeAll(goroutines)
}

// modelSeeds exercise each op at least once; the fuzzer goes on from
// them.
var modelSeeds = [][]byte{
	{0},
	// Envoy and gRPC clients, a cluster and its endpoints appear, are
	// subscribed to, change, go.
	{0, 0, 0, 0x42, 11, 0, 0, 2, 1, 3, 2, 2, 3, 1, 0, 0x42, 0x42, 11, 1, 0, 0, 0x40, 0, 0, 0, 0x72, 11, 0, 0},
	// NACKs, then a change.
	{0, 0, 0, 0x42, 11, 0, 0, 2, 1, 3, 4, 1, 3, 4, 2, 2, 1, 0, 0x42, 0x43, 11, 0, 0, 1, 0, 0x43, 0x47, 11, 0, 0},
	// Stale nonces, reconnects with what the client holds.
	{0, 0, 0, 0x42, 1, 0, 0x46, 0x42, 11, 0, 0, 5, 0, 2, 5, 1, 3, 9, 2, 0, 9, 1, 0, 9, 0, 0, 1, 0, 0x42, 0x46, 11, 0, 0},
	// Clients that stop reading through pushes, and streams that end.
	{0, 0, 0, 0x42, 6, 1, 0, 0, 0, 2, 0x46, 0x42, 7, 2, 0x42, 0x46, 0x4a, 7, 1, 0x43, 0x47, 0x42, 10, 0, 0, 6, 2, 0, 0, 2, 0x4a, 0x4e, 8, 2, 0, 11, 0, 0},
	// Listeners and routes for a gRPC client; unsubscribing.
	{0x80, 0, 0, 0x40, 11, 0, 0, 2, 0, 1, 1, 0, 0x40, 0x44, 2, 0, 5, 3, 0, 1, 3, 0, 0, 11, 0, 0},
}

// FuzzStreamModel checks the stream loop against the model (see the top
// of this file). Its seeds run with the package's tests; run it longer
// with `go test ./internal/xds -run '^$' -fuzz FuzzStreamModel`.
func FuzzStreamModel(f *testing.F) {
	for _, s := range modelSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		playModel(t, script)
	})
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestStreamModelRandom plays scripts drawn from a fixed seed, so that
// every run of the package's tests, not only a fuzzing session, covers
// many interleavings. Scripts are biased toward the ops that change
// what clients hold (pushes, subscriptions, NACKs).
func TestStreamModelRandom(t *testing.T) {
	scripts := 150
	if testing.Short() {
		scripts = 20
	}
	rng := rand.New(rand.NewPCG(12, 2026))
	for i := range scripts {
		script := []byte{byte(rng.IntN(256))}
		for range 40 {
			op := []byte{0, 0, 2, 2, 2, 3, 4, 4, 5, 6, 7, 8, 9, 10, 11, 1}[rng.IntN(16)]
			script = append(script, op, byte(rng.IntN(3)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)))
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("script %v", script)
				}
			}()
			playModel(t, script)
		})
	}
}
