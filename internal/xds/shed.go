package xds

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errShed ends a shed stream: Unavailable, as a draining replica's
// streams end, so that grpc-go's xDS client reconnects at once, through
// the Service, and most likely to another replica; it keeps its
// configuration meanwhile.
var errShed = status.Error(codes.Unavailable,
	"meshpilot: this replica holds more than its share of xDS clients; reconnect to another replica")

// SheddableStream is an open ADS stream that Shed can close.
type SheddableStream struct {
	// ID is the server's own number for the stream: go-control-plane's
	// numbers repeat between state-of-the-world and delta streams.
	ID     int64
	Opened time.Time
}

// sheddable is one ADS stream's handle for closing it from outside its
// handler. go-control-plane ends a stream only when the client does or
// the server stops, so the handler runs in a goroutine of its own and
// the gRPC method returns errShed without waiting for it: grpc-go then
// ends the stream, the handler's Recv fails and it returns too.
type sheddable struct {
	id     int64
	opened time.Time
	shedCh chan struct{}
	once   sync.Once

	// mu guards shed and is held across each Send, so that once the
	// method has returned errShed no response is written to the stream.
	mu   sync.Mutex
	shed bool
}

func (h *sheddable) close() { h.once.Do(func() { close(h.shedCh) }) }

func (h *sheddable) send(send func() error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shed {
		return errShed
	}
	return send()
}

// serve runs the handler until it returns or the stream is shed.
func (h *sheddable) serve(handler func() error) error {
	done := make(chan error, 1)
	go func() { done <- handler() }()
	select {
	case err := <-done:
		return err
	case <-h.shedCh:
		h.mu.Lock()
		h.shed = true
		h.mu.Unlock()
		return errShed
	}
}

type sheddableKey struct{}

// shedStreams holds the handles of the open ADS streams. A handle is
// added when the stream is admitted (open, which gets the stream's
// context) and removed when go-control-plane reports it closed.
type shedStreams struct {
	seq atomic.Int64
	mu  sync.Mutex // guards byKey
	// byKey is keyed as the tracker is, by go-control-plane's numbers.
	byKey map[streamKey]*sheddable
}

func (r *shedStreams) handle() *sheddable {
	return &sheddable{id: r.seq.Add(1), opened: time.Now(), shedCh: make(chan struct{})}
}

func (r *shedStreams) add(ctx context.Context, k streamKey) {
	h, ok := ctx.Value(sheddableKey{}).(*sheddable)
	if !ok {
		return // a per-type stream (Envoy without ADS): not shed
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byKey == nil {
		r.byKey = map[streamKey]*sheddable{}
	}
	r.byKey[k] = h
}

func (r *shedStreams) remove(k streamKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byKey, k)
}

// SheddableStreams lists the open ADS streams, the oldest first.
func (s *Server) SheddableStreams() []SheddableStream {
	s.shed.mu.Lock()
	out := make([]SheddableStream, 0, len(s.shed.byKey))
	for _, h := range s.shed.byKey {
		out = append(out, SheddableStream{ID: h.id, Opened: h.opened})
	}
	s.shed.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Shed closes the ADS streams with these ids with Unavailable, so that
// their clients reconnect, and returns how many it found open. A stream
// counts as connected (ClientCounts) until its handler has returned.
func (s *Server) Shed(ids ...int64) int {
	want := make(map[int64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	s.shed.mu.Lock()
	var hs []*sheddable
	for _, h := range s.shed.byKey {
		if want[h.id] {
			hs = append(hs, h)
		}
	}
	s.shed.mu.Unlock()
	for _, h := range hs {
		h.close()
	}
	if len(hs) > 0 {
		s.shedCount.Add(uint64(len(hs)))
		s.log.Debug("xds: shed streams so that their clients reconnect to other replicas", "streams", len(hs))
	}
	return len(hs)
}

// ShedStreams returns how many streams Shed has closed.
func (s *Server) ShedStreams() uint64 { return s.shedCount.Load() }

// adsServer wraps go-control-plane's ADS methods so that each stream
// carries a handle Shed can close it with.
type adsServer struct {
	discovery.AggregatedDiscoveryServiceServer
	shed *shedStreams
}

func (a adsServer) StreamAggregatedResources(st discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	h := a.shed.handle()
	w := &sotwShedStream{AggregatedDiscoveryService_StreamAggregatedResourcesServer: st, h: h,
		ctx: context.WithValue(st.Context(), sheddableKey{}, h)}
	return h.serve(func() error { return a.AggregatedDiscoveryServiceServer.StreamAggregatedResources(w) })
}

func (a adsServer) DeltaAggregatedResources(st discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	h := a.shed.handle()
	w := &deltaShedStream{AggregatedDiscoveryService_DeltaAggregatedResourcesServer: st, h: h,
		ctx: context.WithValue(st.Context(), sheddableKey{}, h)}
	return h.serve(func() error { return a.AggregatedDiscoveryServiceServer.DeltaAggregatedResources(w) })
}

type sotwShedStream struct {
	discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer
	h   *sheddable
	ctx context.Context
}

func (w *sotwShedStream) Context() context.Context { return w.ctx }
func (w *sotwShedStream) Send(r *discovery.DiscoveryResponse) error {
	return w.h.send(func() error { return w.AggregatedDiscoveryService_StreamAggregatedResourcesServer.Send(r) })
}

type deltaShedStream struct {
	discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer
	h   *sheddable
	ctx context.Context
}

func (w *deltaShedStream) Context() context.Context { return w.ctx }
func (w *deltaShedStream) Send(r *discovery.DeltaDiscoveryResponse) error {
	return w.h.send(func() error { return w.AggregatedDiscoveryService_DeltaAggregatedResourcesServer.Send(r) })
}
