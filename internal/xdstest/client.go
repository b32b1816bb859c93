package xdstest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Options configures a Client.
type Options struct {
	// Node goes with the stream's first request. Required.
	Node *core.Node
	// Delta opens a delta (incremental) ADS stream rather than a state of
	// the world one.
	Delta bool
	// AutoACK makes the client ACK every response as it arrives, before
	// Next returns it, and NACK one whose resources do not decode.
	AutoACK bool
	// Paused keeps Open from starting the receive loop: the caller reads
	// with Receive, or calls Start.
	Paused bool
	// Forget keeps no resources: Held, Names, WaitFor and the typed
	// accessors see none. For callers that keep what they need themselves
	// (meshbench's thousands of clients would otherwise each hold every
	// resource decoded).
	Forget bool
	// Raw leaves every resource as it came: a Response's Resources carry
	// Raw and no Message (nor, on a state of the world stream, a Name,
	// which only decoding finds), and its Err stays nil. For callers that
	// read the few fields they need from the bytes themselves
	// (meshbench's clients); it needs Forget, since a client holds
	// resources by name.
	Raw bool
	// Wait bounds each wait of a TestClient; DefaultWait when zero.
	Wait time.Duration
}

// Client is one ADS stream. See the package documentation.
//
// Concurrency: every method may be called from any goroutine, except
// Receive, which reads the stream and so must not run concurrently with
// itself or with the receive loop.
type Client struct {
	opts   Options
	cancel context.CancelFunc
	// One of them is set, by Options.Delta.
	sotw  discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	delta discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient

	// sendMu serialises requests: a gRPC stream takes one Send at a time,
	// and a request is built and sent under it, so that an ACK sent by the
	// receive loop cannot carry a subscription older than one the caller
	// sent just before.
	sendMu sync.Mutex
	// nodeSent: the node went with a request. Guarded by sendMu.
	nodeSent bool

	started atomic.Bool   // the receive loop runs
	notify  chan struct{} // capacity 1: a response was queued
	done    chan struct{} // closed once the stream ended (err is set)

	// mu guards types, queue, changed and err. It is never held while
	// sending or receiving; when both are taken, sendMu comes first.
	mu    sync.Mutex
	types []*typeState // a handful: a slice is smaller and as quick as a map
	queue []*Response  // read by the receive loop, not yet taken by Next
	// changed, made by Await, is closed whenever what the client holds,
	// or the stream's end, changes (and made again by the next Await):
	// a client nobody waits on allocates nothing per response.
	changed chan struct{}
	err     error
}

// typeState is what a Client knows of one type URL.
type typeState struct {
	typeURL string
	// subs are the subscribed names, in the order first subscribed. A
	// slice set here is never modified, so requests share it.
	subs      []string
	requested bool   // a request of this type went out
	acked     string // version of the last ACKed response
	nonce     string // nonce of the last response received
	held      map[string]Resource
}

// errClosed ends a stream that Close ended.
var errClosed = errors.New("xdstest: the client was closed")

// Open opens an ADS stream on cc; it ends with ctx or Close. Unless
// o.Paused, the receive loop starts at once.
func Open(ctx context.Context, cc grpc.ClientConnInterface, o Options) (*Client, error) {
	if o.Node == nil {
		return nil, errors.New("xdstest: Options.Node is required")
	}
	if o.Raw && !o.Forget {
		return nil, errors.New("xdstest: Options.Raw needs Forget: a client holds resources by the names Raw leaves out")
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &Client{opts: o, cancel: cancel, notify: make(chan struct{}, 1), done: make(chan struct{})}
	ads := discovery.NewAggregatedDiscoveryServiceClient(cc)
	var err error
	if o.Delta {
		c.delta, err = ads.DeltaAggregatedResources(ctx)
	} else {
		c.sotw, err = ads.StreamAggregatedResources(ctx)
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("xdstest: opening the ADS stream: %w", err)
	}
	if !o.Paused {
		c.Start()
	}
	return c, nil
}

// Node is the node the client presents.
func (c *Client) Node() *core.Node { return c.opts.Node }

// Close ends the stream. The server sees the client go. The reason is
// set before the stream is cancelled: the receive loop, woken by the
// cancel, would otherwise record "context canceled" first.
func (c *Client) Close() {
	c.end(errClosed)
	c.cancel()
}

// Done is closed once the stream has ended; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the stream ended (the server's status, or the client's
// closing); nil while it is open.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Client) end(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
		c.changedLocked()
	}
	return c.err
}

// changedLocked wakes Await. Called with mu held.
func (c *Client) changedLocked() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

func (c *Client) state(typeURL string) *typeState {
	for _, st := range c.types {
		if st.typeURL == typeURL {
			return st
		}
	}
	st := &typeState{typeURL: typeURL}
	c.types = append(c.types, st)
	return st
}

// Start starts the receive loop, unless it runs: it reads every response,
// ACKs it with Options.AutoACK, and queues it for Next.
func (c *Client) Start() {
	if c.started.CompareAndSwap(false, true) {
		go c.run()
	}
}

func (c *Client) run() {
	for {
		r, err := c.Receive()
		if err != nil {
			return
		}
		if c.opts.AutoACK {
			// A failed send means a broken stream, which the next Receive
			// reports.
			if r.Err != nil {
				_ = c.NACK(r, r.Err.Error())
			} else {
				_ = c.ACK(r)
			}
		}
		c.mu.Lock()
		c.queue = append(c.queue, r)
		c.mu.Unlock()
		select {
		case c.notify <- struct{}{}:
		default:
		}
	}
}

// Receive reads the next response from the stream, blocking until one
// comes or the stream ends. Only for a paused client; it neither ACKs nor
// queues what it reads.
func (c *Client) Receive() (*Response, error) {
	r := &Response{}
	if err := c.ReceiveInto(r); err != nil {
		return nil, err
	}
	return r, nil
}

// ReceiveInto is Receive into r, whose storage it reuses (see
// Response.Reset): for a caller that is done with one response before it
// reads the next and should not allocate for each (meshbench's clients).
func (c *Client) ReceiveInto(r *Response) error {
	if c.delta != nil {
		m, err := c.delta.Recv()
		if err != nil {
			return c.end(err)
		}
		decodeDelta(r, m, time.Now(), c.opts.Raw)
	} else {
		m, err := c.sotw.Recv()
		if err != nil {
			return c.end(err)
		}
		decodeSotW(r, m, time.Now(), c.opts.Raw)
	}
	c.mu.Lock()
	c.state(r.TypeURL).nonce = r.Nonce
	c.mu.Unlock()
	return nil
}

// Next returns the next response the receive loop read, waiting for one
// until ctx ends. Once the stream has ended and every response read is
// taken, it returns the stream's error.
func (c *Client) Next(ctx context.Context) (*Response, error) {
	if !c.started.Load() {
		return nil, errors.New("xdstest: Next on a paused client: call Start, or Receive")
	}
	for {
		c.mu.Lock()
		if len(c.queue) > 0 {
			r := c.queue[0]
			c.queue[0] = nil
			c.queue = c.queue[1:]
			c.mu.Unlock()
			return r, nil
		}
		err := c.err
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-c.notify:
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Subscribe adds names to the subscription of typeURL and asks for them.
// On a type not yet asked for, no names is a wildcard subscription.
// Names already subscribed send nothing.
func (c *Client) Subscribe(typeURL string, names ...string) error {
	return c.change(typeURL, func(cur []string) []string {
		return dedupe(append(slices.Clone(cur), names...))
	})
}

// Unsubscribe removes names from the subscription of typeURL and drops
// what the client holds of them. On a state of the world stream, an
// empty subscription is a wildcard one to a server that still reads it
// as such.
func (c *Client) Unsubscribe(typeURL string, names ...string) error {
	return c.change(typeURL, func(cur []string) []string {
		return slices.DeleteFunc(slices.Clone(cur), func(n string) bool { return slices.Contains(names, n) })
	})
}

// SetSubscription makes names the whole subscription of typeURL, in one
// request. The client keeps names: the caller must not modify it
// afterwards.
func (c *Client) SetSubscription(typeURL string, names ...string) error {
	return c.change(typeURL, func([]string) []string {
		for i, n := range names {
			if slices.Contains(names[:i], n) {
				return dedupe(names)
			}
		}
		return names
	})
}

// dedupe keeps the first of each name, in order.
func dedupe(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func (c *Client) change(typeURL string, next func(cur []string) []string) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	c.mu.Lock()
	st := c.state(typeURL)
	old, subs := st.subs, next(st.subs)
	if st.requested && slices.Equal(old, subs) {
		c.mu.Unlock()
		return nil
	}
	st.requested, st.subs = true, subs
	var added, removed []string
	for _, n := range subs {
		if !slices.Contains(old, n) {
			added = append(added, n)
		}
	}
	for _, n := range old {
		if !slices.Contains(subs, n) {
			removed = append(removed, n)
			delete(st.held, n)
		}
	}
	if len(removed) > 0 {
		c.changedLocked()
	}
	var req proto.Message
	if c.delta != nil {
		req = &discovery.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: added, ResourceNamesUnsubscribe: removed}
	} else {
		// As grpc-go does: the last ACKed version and the last nonce
		// received, which the server needs to take the request as current.
		req = &discovery.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: subs, VersionInfo: st.acked, ResponseNonce: st.nonce}
	}
	c.mu.Unlock()
	return c.sendLocked(req)
}

// ACK accepts r: the client holds what it says and tells the server.
func (c *Client) ACK(r *Response) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	c.mu.Lock()
	st := c.state(r.TypeURL)
	st.acked = r.Version
	if !c.opts.Forget {
		c.apply(st, r)
	}
	c.changedLocked()
	var req proto.Message
	if c.delta != nil {
		req = &discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeURL, ResponseNonce: r.Nonce}
	} else {
		req = &discovery.DiscoveryRequest{TypeUrl: r.TypeURL, ResourceNames: st.subs, VersionInfo: r.Version, ResponseNonce: r.Nonce}
	}
	c.mu.Unlock()
	return c.sendLocked(req)
}

// NACK rejects r with detail as the error: the client keeps what it held
// and, on a state of the world stream, repeats the version it last ACKed.
func (c *Client) NACK(r *Response, detail string) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	nack := &statuspb.Status{Code: int32(codes.InvalidArgument), Message: detail}
	var req proto.Message
	if c.delta != nil {
		req = &discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeURL, ResponseNonce: r.Nonce, ErrorDetail: nack}
	} else {
		c.mu.Lock()
		st := c.state(r.TypeURL)
		req = &discovery.DiscoveryRequest{TypeUrl: r.TypeURL, ResourceNames: st.subs, VersionInfo: st.acked,
			ResponseNonce: r.Nonce, ErrorDetail: nack}
		c.mu.Unlock()
	}
	return c.sendLocked(req)
}

// apply makes st hold what r says. Called with mu held.
func (c *Client) apply(st *typeState, r *Response) {
	if c.delta == nil && fullState(r.TypeURL) {
		clear(st.held)
	}
	if st.held == nil {
		st.held = map[string]Resource{}
	}
	for _, res := range r.Resources {
		st.held[res.Name] = res
	}
	for _, n := range r.Removed {
		delete(st.held, n)
	}
}

// Send sends req on a state of the world stream as written, for what a
// well-behaved client never does; the client's subscriptions and versions
// do not change. The node is added if req is the stream's first request
// and has none.
func (c *Client) Send(req *discovery.DiscoveryRequest) error {
	if c.sotw == nil {
		return errors.New("xdstest: Send on a delta stream: use SendDelta")
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.sendLocked(proto.Clone(req))
}

// SendDelta is Send for a delta stream.
func (c *Client) SendDelta(req *discovery.DeltaDiscoveryRequest) error {
	if c.delta == nil {
		return errors.New("xdstest: SendDelta on a state of the world stream: use Send")
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.sendLocked(proto.Clone(req))
}

// sendLocked sends req, adding the node to the stream's first request.
// Called with sendMu held.
func (c *Client) sendLocked(req proto.Message) error {
	var err error
	var typeURL string
	switch req := req.(type) {
	case *discovery.DiscoveryRequest:
		if !c.nodeSent && req.Node == nil {
			req.Node = c.opts.Node
		}
		typeURL = req.GetTypeUrl()
		err = c.sotw.Send(req)
	case *discovery.DeltaDiscoveryRequest:
		if !c.nodeSent && req.Node == nil {
			req.Node = c.opts.Node
		}
		typeURL = req.GetTypeUrl()
		err = c.delta.Send(req)
	}
	c.nodeSent = true
	if err != nil {
		return fmt.Errorf("xdstest: sending a %s request: %w", shortType(typeURL), err)
	}
	return nil
}
