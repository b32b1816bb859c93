package xds

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/translate"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// This file holds the stream loop's unit tests against a fake watcher
// (the seam, seam.go) and the regression tests of the review's findings
// against the real Server.

// fakeWatcher is the seam's fake: it keeps the open watches and answers
// them when the test says, as the Server answers a push: under its
// lock, then a kick.
type fakeWatcher struct {
	mu   sync.Mutex
	open map[*watch]bool
}

func newFakeWatcher() *fakeWatcher {
	return &fakeWatcher{open: map[*watch]bool{}}
}

// watch opens w; a first request's watch is answered at once, as the
// Server answers it (the handler sends it).
func (f *fakeWatcher) watch(w *watch) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.open[w] = true
	if w.initial {
		f.answerLocked(w, "v0")
	}
}

func (f *fakeWatcher) cancel(w *watch) {
	if w == nil {
		return
	}
	f.mu.Lock()
	delete(f.open, w)
	f.mu.Unlock()
}

func (f *fakeWatcher) endType(*typeState) {}

func (f *fakeWatcher) shareNames(int, []string) {}

// answer answers w with one resource if it is open; the stream is
// kicked unless kick is false (the caller kicks once for several).
func (f *fakeWatcher) answer(w *watch, name string, kick bool) bool {
	f.mu.Lock()
	ok := f.answerLocked(w, name)
	f.mu.Unlock()
	if ok && kick {
		w.stream.kick()
	}
	return ok
}

func (f *fakeWatcher) answerLocked(w *watch, name string) bool {
	if !f.open[w] {
		return false
	}
	e, err := newEntry(modelTypes[w.typ].URL, name, wrapperspb.String(name), nil)
	if err != nil {
		panic(err)
	}
	delete(f.open, w)
	r := &response{returned: versionMap{{name, e.version}}, holds: []*entry{e}}
	if w.delta {
		r.delta = &discovery.DeltaDiscoveryResponse{TypeUrl: modelTypes[w.typ].URL, SystemVersionInfo: e.version, Resources: []*discovery.Resource{e.deltaForm()}}
	} else {
		r.sotw = &discovery.DiscoveryResponse{TypeUrl: modelTypes[w.typ].URL, VersionInfo: e.version, Resources: anys([]*entry{e})}
	}
	w.answer(r)
	return true
}

func (f *fakeWatcher) openCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.open)
}

// fakeEnv is a stream environment around a fake watcher.
func fakeEnv(f *fakeWatcher) *streamEnv {
	var version atomic.Int64
	return &streamEnv{
		watcher:   f,
		types:     modelTypes,
		limits:    requestLimits{}.withDefaults(),
		log:       discardLogger(),
		clientOf:  translate.ClientFromNode,
		authorize: func(*xdsStream, *core.Node) (string, error) { return "", nil },
		refuse: func(_ *xdsStream, _ *core.Node, _ string, err *limitError) error {
			return err
		},
		nacked:      func(string, streamKey, string, bool, *NACK) {},
		closed:      func(*xdsStream) {},
		nextVersion: func() string { return fmt.Sprint(version.Add(1)) },
	}
}

// recordingStream is a stream whose sends are recorded, and counted
// when two overlap; a send waits for gate when there is one.
type recordingStream struct {
	grpc.ServerStream
	gate chan struct{}
	// entered, when set, is told of each send before it waits for gate.
	entered chan struct{}
	sent    chan *discovery.DiscoveryResponse
	inSend  atomic.Int32
	overlap atomic.Bool
}

func newRecordingStream(gate chan struct{}) *recordingStream {
	return &recordingStream{gate: gate, sent: make(chan *discovery.DiscoveryResponse, 64)}
}

func (r *recordingStream) Context() context.Context { return context.Background() }

func (r *recordingStream) SendMsg(v any) error {
	if r.inSend.Add(1) > 1 {
		r.overlap.Store(true)
	}
	defer r.inSend.Add(-1)
	if r.entered != nil {
		r.entered <- struct{}{}
	}
	if r.gate != nil {
		<-r.gate
	}
	r.sent <- v.(*discovery.DiscoveryResponse)
	return nil
}

// loopRequest hands the stream a request as its handler does.
func loopRequest(t testing.TB, st *xdsStream, req *discovery.DiscoveryRequest) {
	t.Helper()
	if err := st.handle(func() error { return st.sotwRequest(req) }); err != nil {
		t.Fatal(err)
	}
}

func receiveWithin(t testing.TB, c chan *discovery.DiscoveryResponse, what string) *discovery.DiscoveryResponse {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(wait):
		t.Fatalf("no response within %v: %s", wait, what)
		return nil
	}
}

// TestLoopNoLostWakeup: answers of two types on one stream, each from
// its own push at the same moment, are both sent, however the sender
// that the first starts and the kick of the second interleave. It
// failed when the sender let go of the stream between finding nothing
// left and saying it stopped: an answer in between started no sender
// and stayed unsent.
func TestLoopNoLostWakeup(t *testing.T) {
	f := newFakeWatcher()
	out := newRecordingStream(nil)
	st := newStream(fakeEnv(f), streamKey{id: 1}, out, "")
	node := &core.Node{Id: "envoy"}
	loopRequest(t, st, &discovery.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterType, ResourceNames: []string{"a"}})
	loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: []string{"a"}})
	cds := receiveWithin(t, out.sent, "first CDS")
	eds := receiveWithin(t, out.sent, "first EDS")
	for i := range 3000 {
		// ACK both: each opens its type's next watch.
		loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"a"}, ResponseNonce: cds.GetNonce()})
		loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: []string{"a"}, ResponseNonce: eds.GetNonce()})
		ws := []*watch{st.typeState(resource.ClusterType).watch, st.typeState(resource.EndpointType).watch}
		var wg sync.WaitGroup
		for j, w := range ws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.answer(w, fmt.Sprint("v", i, j), true)
			}()
		}
		wg.Wait()
		got := map[string]*discovery.DiscoveryResponse{}
		for range 2 {
			r := receiveWithin(t, out.sent, fmt.Sprintf("round %d: both answers", i))
			got[r.GetTypeUrl()] = r
		}
		cds, eds = got[resource.ClusterType], got[resource.EndpointType]
		if cds == nil || eds == nil {
			t.Fatalf("round %d: sent %v", i, got)
		}
	}
	st.close()
}

// TestLoopPushSendsInOrder: the answers of one push are all pending
// before the first is sent, so that they leave clusters first whatever
// order the push walked its watches in.
func TestLoopPushSendsInOrder(t *testing.T) {
	f := newFakeWatcher()
	out := newRecordingStream(nil)
	st := newStream(fakeEnv(f), streamKey{id: 1}, out, "")
	loopRequest(t, st, &discovery.DiscoveryRequest{Node: &core.Node{Id: "envoy"}, TypeUrl: resource.RouteType, ResourceNames: []string{"a"}})
	for _, url := range []string{resource.EndpointType, resource.ListenerType, resource.ClusterType} {
		loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: url, ResourceNames: []string{"a"}})
	}
	nonces := map[string]string{}
	for range 4 {
		r := receiveWithin(t, out.sent, "first answers")
		nonces[r.GetTypeUrl()] = r.GetNonce()
	}
	for url, n := range nonces {
		loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: url, ResourceNames: []string{"a"}, ResponseNonce: n})
	}
	// The push walks its watches routes first, clusters last. An answer
	// starts no sender: the push kicks once all are pending.
	for _, url := range []string{resource.RouteType, resource.ListenerType, resource.EndpointType, resource.ClusterType} {
		f.answer(st.typeState(url).watch, "v2", false)
		st.mu.Lock()
		started := st.sending
		st.mu.Unlock()
		if started {
			t.Fatalf("the %s answer started a sender before the push was done", url)
		}
	}
	st.kick()
	var got []string
	for range 4 {
		got = append(got, receiveWithin(t, out.sent, "the push's answers").GetTypeUrl())
	}
	if want := []string{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType}; !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	st.close()
}

// TestLoopRequestWaitsForPushSender: a request is handled only once a
// push's sender stops, so that no two sends are ever under way on one
// stream; the request's answer follows the push's.
func TestLoopRequestWaitsForPushSender(t *testing.T) {
	f := newFakeWatcher()
	gate := make(chan struct{})
	out := newRecordingStream(gate)
	st := newStream(fakeEnv(f), streamKey{id: 1}, out, "")
	go func() { gate <- struct{}{} }()
	loopRequest(t, st, &discovery.DiscoveryRequest{Node: &core.Node{Id: "envoy"}, TypeUrl: resource.ClusterType, ResourceNames: []string{"a"}})
	cds := receiveWithin(t, out.sent, "CDS")
	loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"a"}, ResponseNonce: cds.GetNonce()})
	// A push answers; its sender waits in SendMsg for the gate.
	f.answer(st.typeState(resource.ClusterType).watch, "v2", true)
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: []string{"a"}})
	}()
	select {
	case <-handled:
		t.Fatal("a request was handled while a push's send was under way")
	case <-time.After(50 * time.Millisecond):
	}
	gate <- struct{}{}
	gate <- struct{}{}
	<-handled
	first, second := receiveWithin(t, out.sent, "push"), receiveWithin(t, out.sent, "request's answer")
	if first.GetTypeUrl() != resource.ClusterType || second.GetTypeUrl() != resource.EndpointType || out.overlap.Load() {
		t.Fatalf("sent %s then %s, overlapping: %v", first.GetTypeUrl(), second.GetTypeUrl(), out.overlap.Load())
	}
	st.close()
}

// TestLoopStaleACKLeavesStale: an ACK of an older response than the
// type's latest says nothing of the latest: the type stays STALE until
// the latest is ACKed, and the stale request opens no watch.
func TestLoopStaleACKLeavesStale(t *testing.T) {
	f := newFakeWatcher()
	out := newRecordingStream(nil)
	st := newStream(fakeEnv(f), streamKey{id: 1}, out, "")
	loopRequest(t, st, &discovery.DiscoveryRequest{Node: &core.Node{Id: "envoy"}, TypeUrl: resource.ClusterType, ResourceNames: []string{"a"}})
	r1 := receiveWithin(t, out.sent, "first")
	loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"a"}, ResponseNonce: r1.GetNonce()})
	f.answer(st.typeState(resource.ClusterType).watch, "v2", true)
	r2 := receiveWithin(t, out.sent, "pushed")
	status := func() string { return st.info(nil).Types["CDS"].Status }
	if s := status(); s != Stale {
		t.Fatalf("after the push: %s, want %s", s, Stale)
	}
	loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"a"}, ResponseNonce: r1.GetNonce()})
	if s := status(); s != Stale || f.openCount() != 0 || st.info(nil).NACKs != 0 {
		t.Fatalf("after a stale ACK: %s with %d watches and %d NACKs, want %s, none and none", s, f.openCount(), st.info(nil).NACKs, Stale)
	}
	loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"a"}, ResponseNonce: r1.GetNonce(),
		ErrorDetail: &statuspb.Status{Message: "late"}})
	if s := status(); s != Stale || st.info(nil).NACKs != 1 {
		t.Fatalf("after a stale NACK: %s with %d NACKs, want %s and one counted", s, st.info(nil).NACKs, Stale)
	}
	loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"a"}, ResponseNonce: r2.GetNonce()})
	if s := status(); s != Synced || f.openCount() != 1 {
		t.Fatalf("after the ACK: %s with %d watches, want %s and one", s, f.openCount(), Synced)
	}
	st.close()
	if f.openCount() != 0 {
		t.Fatal("a watch is left once the stream closed")
	}
}

// TestLoopCloseEndsStuckSender: closing a stream whose push sender is
// stuck in a send (its client does not read) returns once the send
// fails, and leaves no watch open.
func TestLoopCloseEndsStuckSender(t *testing.T) {
	f := newFakeWatcher()
	ctx, cancel := context.WithCancel(context.Background())
	out := &blockingStream{ctx: ctx, entered: make(chan struct{}, 2)}
	st := newStream(fakeEnv(f), streamKey{id: 1}, out, "")
	out.release = make(chan struct{}, 1)
	out.release <- struct{}{}
	loopRequest(t, st, &discovery.DiscoveryRequest{Node: &core.Node{Id: "envoy"}, TypeUrl: resource.ClusterType, ResourceNames: []string{"a"}})
	loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"a"}, ResponseNonce: "1"})
	f.answer(st.typeState(resource.ClusterType).watch, "v2", true) // its send blocks
	<-out.entered
	<-out.entered
	closed := make(chan struct{})
	go func() { st.close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("close returned while a send was under way")
	case <-time.After(50 * time.Millisecond):
	}
	cancel() // the stream ends: the send fails
	select {
	case <-closed:
	case <-time.After(wait):
		t.Fatal("close never returned")
	}
	if f.openCount() != 0 {
		t.Fatal("a watch is left once the stream closed")
	}
}

// blockingStream's sends wait for release or for its context's end.
type blockingStream struct {
	grpc.ServerStream
	ctx     context.Context
	release chan struct{}
	// entered is told of each send that starts.
	entered chan struct{}
}

func (b *blockingStream) Context() context.Context { return b.ctx }

func (b *blockingStream) SendMsg(any) error {
	b.entered <- struct{}{}
	select {
	case <-b.release:
		return nil
	case <-b.ctx.Done():
		return b.ctx.Err()
	}
}

// TestWarmingClusterGetsEndpoints: a CDS change to a cluster whose
// endpoints did not change makes Envoy warm the cluster and ask for its
// endpoints again with the nonce it ACKed; it is answered at once,
// rather than waiting out its initial_fetch_timeout. gRPC clients, which
// never ask so, are not sent the endpoints again.
func TestWarmingClusterGetsEndpoints(t *testing.T) {
	for _, grpcClient := range []bool{false, true} {
		t.Run(fmt.Sprint("grpc=", grpcClient), func(t *testing.T) {
			store := baseStore()
			ts := startServer(t, store)
			node := envoyNode("envoy")
			if grpcClient {
				node = grpcNode("grpc", "default")
			}
			c := openADS(t, dial(t, ts.addr), node)
			c.Subscribe(resource.ClusterType, reviews)
			c.ACK(c.Next())
			c.Subscribe(resource.EndpointType, reviews)
			eds := c.Next()
			c.ACK(eds)
			// The protocol changes: the cluster does, its endpoints not.
			svc := service("reviews", "default", 9080)
			svc.Ports[0].Protocol = model.HTTP
			store.Update(svc, endpoints(9080, model.Healthy, "10.0.0.1", "10.0.0.2"))
			cds := c.Next()
			if cds.TypeURL != resource.ClusterType {
				t.Fatalf("after the change: %s, want CDS alone", cds.TypeURL)
			}
			c.ACK(cds)
			// Envoy's warming request: the same names, the last EDS nonce.
			c.Send(&discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: []string{reviews}, VersionInfo: eds.Version, ResponseNonce: eds.Nonce})
			// A request answered for sure comes next: requests are handled,
			// and their answers sent, in order.
			c.Subscribe(resource.ClusterType, reviews, ratings)
			r := c.Next()
			if grpcClient {
				if r.TypeURL != resource.ClusterType {
					t.Fatalf("a gRPC client was sent %s again", r.TypeURL)
				}
				return
			}
			if r.TypeURL != resource.EndpointType || len(r.Resources) != 1 || r.Resources[0].Name != reviews {
				t.Fatalf("got %s %v, want the warming cluster's endpoints", r.TypeURL, r.Resources)
			}
		})
	}
}

// TestPushSendsClustersFirst: a push that changes a cluster and its
// endpoints sends the cluster first, each time: the sender starts once
// the whole push is pending, not at its first answer (which was EDS in
// about one push of five).
func TestPushSendsClustersFirst(t *testing.T) {
	store := baseStore()
	s := NewServer(Options{Discovery: store, Logger: discardLogger()})
	c := openMemStream(t, s)
	defer c.close()
	c.request(t, &discovery.DiscoveryRequest{Node: envoyNode("e"), TypeUrl: resource.ClusterType, ResourceNames: []string{reviews}})
	cds := <-c.sent
	c.request(t, &discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: []string{reviews}})
	eds := <-c.sent
	hostname := model.ServiceHostname("reviews", "default", "")
	for i := range 40 {
		c.ack(t, cds, []string{reviews})
		c.ack(t, eds, []string{reviews})
		svc := service("reviews", "default", 9080)
		if i%2 == 0 {
			svc.Ports[0].Protocol = model.HTTP
		}
		store.Update(svc, endpoints(9080, model.Healthy, fmt.Sprint("10.0.0.", i+1)))
		var req push.Request
		req.Add(model.Event{Kind: model.ServiceChanged, Hostname: hostname}, timeNow())
		s.Push(req)
		first, second := <-c.sent, <-c.sent
		if first.GetTypeUrl() != resource.ClusterType || second.GetTypeUrl() != resource.EndpointType {
			t.Fatalf("push %d: sent %s then %s, want CDS then EDS", i, first.GetTypeUrl(), second.GetTypeUrl())
		}
		cds, eds = first, second
	}
}

// TestDeltaAbsentAndResubscribed: a delta client that subscribes to a
// name that does not exist is told so in removed_resources, once; one
// that subscribes again to what it holds is sent it again (the
// incremental protocol's subscription rules).
func TestDeltaAbsentAndResubscribed(t *testing.T) {
	ts := startServer(t, baseStore())
	d := openDelta(t, dial(t, ts.addr), envoyNode("delta"))
	const missing = "outbound|9080||missing.default.svc.cluster.local"
	d.SendDelta(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{reviews, missing}})
	r := d.Next()
	if len(r.Resources) != 1 || r.Resources[0].Name != reviews || !slices.Equal(r.Removed, []string{missing}) {
		t.Fatalf("got %v removed %v, want %s and %s removed", r.Resources, r.Removed, reviews, missing)
	}
	d.ACK(r)
	d.SendDelta(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{reviews}, ResponseNonce: r.Nonce})
	r = d.Next()
	if len(r.Resources) != 1 || r.Resources[0].Name != reviews || len(r.Removed) != 0 {
		t.Fatalf("re-subscribed: got %v removed %v, want %s again", r.Resources, r.Removed, reviews)
	}
	d.ACK(r)
	// The missing name was reported; it is not again, until it appears.
	ts.store.Update(service("missing", "default", 9080), endpoints(9080, model.Healthy, "10.0.9.1"))
	r = d.Next()
	if len(r.Resources) != 1 || r.Resources[0].Name != missing || len(r.Removed) != 0 {
		t.Fatalf("once it exists: got %v removed %v, want %s", r.Resources, r.Removed, missing)
	}
}

// TestStreamKeepsFirstNode: a stream's node is its first request's. A
// later request naming another is served as the first (as istiod does),
// and an Envoy that repeats its node on every request has its workload
// looked up once.
func TestStreamKeepsFirstNode(t *testing.T) {
	var lookups atomic.Int64
	ts := startServer(t, baseStore(), func(o *Options) {
		o.Workloads = countingWorkloads{&lookups}
	})
	const first = "sidecar~10.0.0.7~first.default~default.svc.cluster.local"
	c := openADS(t, dial(t, ts.addr), envoyNode(first))
	c.Subscribe(resource.ClusterType, reviews)
	r := c.Next()
	for i := range 5 {
		c.Send(&discovery.DiscoveryRequest{Node: envoyNode(fmt.Sprint("sidecar~10.0.1.", i, "~other.default~default.svc.cluster.local")), TypeUrl: resource.ClusterType, ResourceNames: []string{reviews}, ResponseNonce: r.Nonce, VersionInfo: r.Version})
	}
	c.Send(&discovery.DiscoveryRequest{Node: grpcNode("grpc", "other"), TypeUrl: resource.EndpointType, ResourceNames: []string{reviews}})
	c.ACK(c.Next())
	cs := awaitClient(t, ts.Server, "the EDS ACK", func(ci ClientInfo) bool { return ci.Types["EDS"] != nil && ci.Types["EDS"].Status == Synced })
	if cs.NodeID != first || cs.GRPC {
		t.Fatalf("the stream's node is %q (gRPC %v), want the first", cs.NodeID, cs.GRPC)
	}
	if n := lookups.Load(); n != 1 {
		t.Fatalf("%d workload lookups, want 1", n)
	}
}

type countingWorkloads struct{ n *atomic.Int64 }

func (c countingWorkloads) WorkloadByIP(string) *model.Workload {
	c.n.Add(1)
	return nil
}

// TestHostileStreamBounds: what a client sends that a stream would keep
// is bounded: a type URL's length, the types of one stream, a delta
// stream's initial_resource_versions; an unknown type is reported under
// one label, and a NACK's text is kept and logged truncated, its lines
// at most one per client and interval.
func TestHostileStreamBounds(t *testing.T) {
	obs := newRecordingObserver()
	ts := startServer(t, baseStore(), func(o *Options) { o.Observer = obs })
	cc := dial(t, ts.addr)

	long := openADS(t, cc, envoyNode("long-type"))
	_ = long.Client.Send(&discovery.DiscoveryRequest{TypeUrl: "type.googleapis.com/" + strings.Repeat("x", MaxTypeURLBytes)})
	if err := long.ExpectEnd(wait); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "bytes of type URL") {
		t.Fatalf("a long type URL: %v", err)
	}

	many := openADS(t, cc, envoyNode("many-types"))
	for i := range MaxTypesPerStream {
		many.Send(&discovery.DiscoveryRequest{TypeUrl: fmt.Sprint("type.googleapis.com/unknown.", i)})
		many.Next()
	}
	_ = many.Client.Send(&discovery.DiscoveryRequest{TypeUrl: "type.googleapis.com/one.too.many"})
	if err := many.ExpectEnd(wait); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "types on the stream") {
		t.Fatalf("type %d on a stream: %v", MaxTypesPerStream+1, err)
	}
	sent, _, _, _, _ := obs.snapshot()
	for typ := range sent {
		if typ != otherType && !slices.Contains([]string{"LDS", "RDS", "CDS", "EDS"}, typ) {
			t.Errorf("a metric label %q", typ)
		}
	}
	if sent[otherType] != MaxTypesPerStream {
		t.Errorf("%d responses of unknown types under %q, want %d", sent[otherType], otherType, MaxTypesPerStream)
	}

	d := openDelta(t, cc, envoyNode("initial-versions"))
	initial := map[string]string{}
	for i := range DefaultMaxRequestNames {
		initial[fmt.Sprint("name-", i)] = "v"
	}
	_ = d.Client.SendDelta(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{reviews}, InitialResourceVersions: initial})
	if err := d.ExpectEnd(wait); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("%d initial versions: %v", len(initial), err)
	}

	n := openADS(t, cc, grpcNode("nacker", "default"))
	n.Subscribe(resource.EndpointType, reviews)
	r := n.Next()
	huge := strings.Repeat("e", 1<<20)
	n.NACK(r, huge)
	ci := awaitClient(t, ts.Server, "the NACK", func(ci ClientInfo) bool { return ci.NodeID == "nacker" && ci.NACKs == 1 })
	if len(ci.LastNACK) > MaxNACKBytes+32 || len(ci.Types["EDS"].LastNACK.Error) > MaxNACKBytes+32 {
		t.Fatalf("a NACK's text kept at %d bytes", len(ci.LastNACK))
	}
	for i := range 3 {
		ts.store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, fmt.Sprint("10.0.0.", 50+i)))
		n.NACK(n.Next(), huge)
	}
	awaitClient(t, ts.Server, "four NACKs", func(ci ClientInfo) bool { return ci.NodeID == "nacker" && ci.NACKs == 4 })
	logs := ts.logs.String()
	if lines := strings.Count(logs, "client rejected configuration"); lines != 1 {
		t.Errorf("%d NACK lines for one client, want 1", lines)
	}
	if len(logs) > 64<<10 {
		t.Errorf("the log holds %d bytes", len(logs))
	}
}

// TestPerTypeDeltaAndFetch: the per-type services' delta streams and
// unary fetches, which the README lists, serve their type.
func TestPerTypeDeltaAndFetch(t *testing.T) {
	ts := startServer(t, baseStore())
	cc := dial(t, ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	node := grpcNode("per-type", "default")
	type deltaStream interface {
		Send(*discovery.DeltaDiscoveryRequest) error
		Recv() (*discovery.DeltaDiscoveryResponse, error)
	}
	type fetch func(context.Context, *discovery.DiscoveryRequest, ...grpc.CallOption) (*discovery.DiscoveryResponse, error)
	cases := []struct {
		url   string
		name  string
		delta func() (deltaStream, error)
		fetch fetch
	}{
		{resource.ListenerType, "reviews:9080", func() (deltaStream, error) {
			return listenerservice.NewListenerDiscoveryServiceClient(cc).DeltaListeners(ctx)
		}, listenerservice.NewListenerDiscoveryServiceClient(cc).FetchListeners},
		{resource.RouteType, reviews, func() (deltaStream, error) { return routeservice.NewRouteDiscoveryServiceClient(cc).DeltaRoutes(ctx) },
			routeservice.NewRouteDiscoveryServiceClient(cc).FetchRoutes},
		{resource.ClusterType, reviews, func() (deltaStream, error) {
			return clusterservice.NewClusterDiscoveryServiceClient(cc).DeltaClusters(ctx)
		}, clusterservice.NewClusterDiscoveryServiceClient(cc).FetchClusters},
		{resource.EndpointType, reviews, func() (deltaStream, error) {
			return endpointservice.NewEndpointDiscoveryServiceClient(cc).DeltaEndpoints(ctx)
		}, endpointservice.NewEndpointDiscoveryServiceClient(cc).FetchEndpoints},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			st, err := c.delta()
			if err != nil {
				t.Fatal(err)
			}
			// No type URL: the service's own.
			if err := st.Send(&discovery.DeltaDiscoveryRequest{Node: node, ResourceNamesSubscribe: []string{c.name}}); err != nil {
				t.Fatal(err)
			}
			r, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if r.GetTypeUrl() != c.url || len(r.GetResources()) != 1 || r.GetResources()[0].GetName() != c.name {
				t.Fatalf("delta: %s %v", r.GetTypeUrl(), r.GetResources())
			}
			got, err := c.fetch(ctx, &discovery.DiscoveryRequest{Node: node, ResourceNames: []string{c.name}})
			if err != nil {
				t.Fatal(err)
			}
			if got.GetTypeUrl() != c.url || len(got.GetResources()) != 1 {
				t.Fatalf("fetch: %s, %d resources", got.GetTypeUrl(), len(got.GetResources()))
			}
			again, err := c.fetch(ctx, &discovery.DiscoveryRequest{Node: node, ResourceNames: []string{c.name}, VersionInfo: got.GetVersionInfo()})
			if err == nil {
				t.Fatalf("a fetch of the current version answered %v", again)
			}
		})
	}
}

// TestLoopNoLostWakeupOrdered replays the lost wakeup's interleaving on
// purpose: the sender, back from a send, waits for the stream's lock,
// and behind it a push's answer and then its kick. The mutex hands the
// lock over in that order once it is in starvation mode (sync.Mutex).
// The sender finds nothing left; were it to let go of the lock before
// saying it stopped, the answer would fill a slot and the kick find the
// sender still running. The answer must still be sent: the sender stops in the
// critical section in which it found nothing, so the kick finds it
// stopped and starts another.
func TestLoopNoLostWakeupOrdered(t *testing.T) {
	f := newFakeWatcher()
	gate := make(chan struct{}, 8)
	out := newRecordingStream(gate)
	st := newStream(fakeEnv(f), streamKey{id: 1}, out, "")
	gate <- struct{}{}
	gate <- struct{}{}
	loopRequest(t, st, &discovery.DiscoveryRequest{Node: &core.Node{Id: "envoy"}, TypeUrl: resource.ClusterType, ResourceNames: []string{"a"}})
	loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: []string{"a"}})
	cds, eds := <-out.sent, <-out.sent
	loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"a"}, ResponseNonce: cds.GetNonce()})
	loopRequest(t, st, &discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: []string{"a"}, ResponseNonce: eds.GetNonce()})
	cdsWatch, edsWatch := st.typeState(resource.ClusterType).watch, st.typeState(resource.EndpointType).watch

	out.entered = make(chan struct{}, 8)
	f.answer(cdsWatch, "v1", true) // a sender starts; its send waits for the gate
	<-out.entered
	st.mu.Lock()
	gate <- struct{}{} // the send returns; the sender waits for the lock
	time.Sleep(5 * time.Millisecond)
	go f.answer(edsWatch, "v1", false) // waits for the lock behind the sender
	time.Sleep(5 * time.Millisecond)
	go st.kick() // and behind the answer
	time.Sleep(5 * time.Millisecond)
	// Let go and take the lock back at once: the sender, woken after
	// waiting more than a millisecond, finds it taken and puts the mutex
	// in starvation mode, in which each unlock hands the lock to the
	// next waiter in line: the sender, then the answer, then the kick,
	// and only then the sender again if it lets go in between.
	st.mu.Unlock()
	st.mu.Lock()
	time.Sleep(2 * time.Millisecond)
	st.mu.Unlock()

	gate <- struct{}{}
	if r := receiveWithin(t, out.sent, "the pushed CDS"); r.GetTypeUrl() != resource.ClusterType {
		t.Fatalf("sent %s, want CDS", r.GetTypeUrl())
	}
	if r := receiveWithin(t, out.sent, "the EDS answered while the sender stopped"); r.GetTypeUrl() != resource.EndpointType {
		t.Fatalf("sent %s, want EDS", r.GetTypeUrl())
	}
	st.close()
}

// TestLoopRequestDropsUnsentAnswer: a response a push built while the
// stream's handler was about to handle a request is not sent: the
// request changes what the client asks for (here it drops the name the
// response carries), and the type's new watch answers from the new
// subscription. Both kinds of stream.
func TestLoopRequestDropsUnsentAnswer(t *testing.T) {
	for _, delta := range []bool{false, true} {
		t.Run(fmt.Sprint("delta=", delta), func(t *testing.T) {
			f := newFakeWatcher()
			out := newRecordingStream(nil)
			st := newStream(fakeEnv(f), streamKey{id: 1, delta: delta}, out, "")
			var sent chan any
			if delta {
				sent = make(chan any, 8)
				st.out = deltaRecorder{recordingStream: out, sent: sent}
			}
			request := func(names, unsubscribe []string, nonce string, before func()) {
				t.Helper()
				err := st.handle(func() error {
					if before != nil {
						before()
					}
					if delta {
						return st.deltaRequest(&discovery.DeltaDiscoveryRequest{Node: &core.Node{Id: "envoy"}, TypeUrl: resource.EndpointType,
							ResourceNamesSubscribe: names, ResourceNamesUnsubscribe: unsubscribe, ResponseNonce: nonce})
					}
					return st.sotwRequest(&discovery.DiscoveryRequest{Node: &core.Node{Id: "envoy"}, TypeUrl: resource.EndpointType, ResourceNames: names, ResponseNonce: nonce})
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			nonceOf := func() string {
				if delta {
					return (<-sent).(*discovery.DeltaDiscoveryResponse).GetNonce()
				}
				return receiveWithin(t, out.sent, "first").GetNonce()
			}
			request([]string{"a", "b"}, nil, "", nil)
			n := nonceOf()
			request([]string{"a", "b"}, nil, n, nil)
			w := st.typeState(resource.EndpointType).watch
			// A push answers with "a" just before the request that drops it.
			if delta {
				request(nil, []string{"a"}, n, func() { f.answer(w, "a", false) })
			} else {
				request([]string{"b"}, nil, n, func() { f.answer(w, "a", false) })
			}
			st.close()
			if delta && len(sent) != 0 || !delta && len(out.sent) != 0 {
				t.Fatal("the response built before the request was sent after it")
			}
		})
	}
}

// deltaRecorder records the delta responses a stream sends.
type deltaRecorder struct {
	*recordingStream
	sent chan any
}

func (d deltaRecorder) SendMsg(v any) error {
	if r, ok := v.(*discovery.DeltaDiscoveryResponse); ok {
		d.sent <- r
		return nil
	}
	return d.recordingStream.SendMsg(v)
}
