package xds

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/translate"
)

// Options configure a Server.
type Options struct {
	// Discovery is the model served. Required.
	Discovery model.ServiceDiscovery
	// Workloads, when set, finds a client's workload by its address, for
	// what the client does not say about itself (its node, its locality).
	Workloads model.WorkloadLookup
	// Inventory, when set, says which namespaces, nodes and clusters
	// exist: a client naming another is served as one naming none
	// (facts.go).
	Inventory model.Inventory
	// DomainSuffix is the cluster domain; "cluster.local" when empty.
	DomainSuffix string
	// LocalClusterID names the cluster meshpilot runs in, which endpoints
	// without a cluster ID and clients without CLUSTER_ID belong to;
	// model.DefaultClusterID when empty.
	LocalClusterID string
	// Mesh, when set, publishes the mesh-wide settings; a change of them
	// is pushed as the keys of the parts that changed (model.MeshKeys).
	// Nil means Istio's defaults.
	Mesh model.MeshWatcher
	// Policies answers which DestinationRule applies to a client's
	// traffic; nil: none. A change is pushed as model.DestinationRuleKey.
	Policies model.PolicyIndex
	// Routes answers which VirtualService applies to a client's traffic
	// to a host; nil: none does.
	Routes model.RouteIndex
	// Security answers which PeerAuthentications and
	// AuthorizationPolicies may apply to a gRPC server's workload; nil:
	// none does. A change is pushed as the policy's keys (its Keys
	// method), which wake only the listeners of the workloads it can
	// select.
	Security model.SecurityIndex
	// Ready reports whether the model is complete. Until it is, new xDS
	// streams fail with Unavailable and REST requests with 503. Nil means
	// always ready.
	Ready func() bool
	// RequireIdentity serves a client only as a node its verified client
	// certificate's SPIFFE ID entitles it to be (identity.go): the
	// namespace the node claims must be the identity's, in the mesh's
	// trust domain or an alias; otherwise its stream ends, or its REST
	// request fails, with PermissionDenied (403). Set it when the
	// listener requires client certificates; a REST request without one
	// is refused.
	RequireIdentity bool
	// MaxClients, when above zero, caps the open xDS streams: a stream
	// beyond it is refused at once with ResourceExhausted, so that the
	// client retries through the Service and reaches another replica.
	MaxClients int
	// MaxNewStreamsPerSecond, when above zero, paces new xDS streams: a
	// stream whose turn does not come within a second is refused with
	// ResourceExhausted (ratelimit.go).
	MaxNewStreamsPerSecond float64
	// MaxRequestNames bounds the resource names of one request (a delta
	// request's subscribe and unsubscribe lists together, and what a
	// delta stream subscribes to of a type), MaxNodeBytes the encoded
	// size of a request's node: a request beyond them ends its stream
	// with InvalidArgument (REST: 400), logged once per client and
	// interval. Zero: DefaultMaxRequestNames, DefaultMaxNodeBytes.
	MaxRequestNames, MaxNodeBytes int
	// StreamSendTimeout ends a stream whose response cannot be written
	// within it (its client does not read); DefaultStreamSendTimeout
	// when zero. The server holds at most one response per type for
	// such a client meanwhile, never a queue of pushes.
	StreamSendTimeout time.Duration
	// Logger receives NACKs and errors; slog.Default() when nil.
	Logger *slog.Logger
	// Observer, when set, is told of every response, ACK and NACK.
	Observer Observer
}

// Server serves the model over xDS: ADS (state of the world and delta),
// the per-type discovery services, and REST-JSON.
//
// It is split by job: the stream loop speaks the protocol (ads.go
// registers the services, stream.go runs each stream, subscription.go
// keeps what a stream subscribes to and was sent); watches (sotw.go,
// delta.go) and fetches (rest.go) are answered from resources that one
// Generator per type builds on demand (generator.go), held in a
// resourceCache (cache.go) and marshalled once per content and client
// variant; waiting watches sit in a watchIndex (watches.go) under the
// model keys their resources were built from, so that a push wakes only
// the clients whose resources changed. A response is handed to a
// client's stream without blocking: the protocol allows one outstanding
// response per stream and type, so a client that does not read simply
// gets the latest state when it next asks, and a response that cannot be
// written within StreamSendTimeout ends its stream (sendtimeout.go).
//
// Concurrency: Register and RESTHandler are called once, before serving.
// Push may be called from any goroutine at any time; calls are
// serialised. All methods are safe for concurrent use.
type Server struct {
	opts  Options
	log   *slog.Logger
	types []translate.ResourceType
	// streams are the open streams; env is what their loop needs.
	streams streamSet
	env     *streamEnv
	// prefix and seq make response versions unique across restarts.
	prefix string
	seq    atomic.Uint64
	nacks  atomic.Uint64
	// nackLog says which NACKs to log: one line per client and interval.
	nackLog *clientLog
	// refused counts streams refused at open; newStreams paces them
	// (nil: no limit).
	refused    *refusals
	newStreams *streamRate
	// limits bound each request; refusedRequests counts those beyond
	// them and refusedLog says which to log.
	limits          requestLimits
	refusedRequests atomic.Uint64
	refusedLog      *clientLog
	// identities holds each stream's client identity under
	// Options.RequireIdentity; identityLog says which refusals to log.
	identities  streamIdentities
	identityLog *clientLog
	// permissionDenied counts the streams and REST requests refused so.
	permissionDenied atomic.Uint64
	// shed holds the client connections Shed can close, and shedCount
	// counts the streams that were open on those it closed.
	shed      shedConns
	shedCount atomic.Uint64
	// sendTimeout is Options.StreamSendTimeout or its default;
	// sendTimeouts counts the streams it ended.
	sendTimeout  time.Duration
	sendTimeouts atomic.Uint64

	// mu guards the cache and the watch index, and every watch's
	// mutable fields: a push drops what changed and re-evaluates the
	// watches that depended on it as one step, so that no watch is
	// answered from a half-applied change.
	mu      sync.Mutex
	cache   *resourceCache
	watches *watchIndex
	// pushes counts the pushes applied, so that what was generated
	// without mu is discarded when a push came in between (watch).
	pushes uint64
	// generating holds the resources watches generate without mu, each
	// with what is closed once it is in the cache (or abandoned), so
	// that watches of clients arriving together wait for one generation
	// of a resource instead of each making its own.
	generating map[generating]chan struct{}

	// sotwStreams and deltaStreams number the streams of each kind.
	sotwStreams, deltaStreams atomic.Int64
}

// NewServer returns a server for the model.
func NewServer(opts Options) *Server {
	return newServer(opts, translate.Generators(translate.GeneratorOptions{Discovery: opts.Discovery, DomainSuffix: opts.DomainSuffix, LocalClusterID: opts.LocalClusterID, Mesh: opts.Mesh, Policies: opts.Policies, Routes: opts.Routes, Security: opts.Security}))
}

// newServer returns a server of the resources gens build.
func newServer(opts Options, gens []translate.Generator) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		opts:        opts,
		log:         opts.Logger,
		prefix:      versionPrefix(),
		watches:     newWatchIndex(),
		nackLog:     newClientLog(clientLogEvery, clientLogMax),
		refused:     &refusals{log: opts.Logger, every: refusalLogEvery},
		newStreams:  newStreamRate(opts.MaxNewStreamsPerSecond, opts.Logger),
		limits:      requestLimits{names: opts.MaxRequestNames, nodeBytes: opts.MaxNodeBytes}.withDefaults(),
		refusedLog:  newClientLog(clientLogEvery, clientLogMax),
		identityLog: newClientLog(clientLogEvery, clientLogMax),
		sendTimeout: cmp.Or(opts.StreamSendTimeout, DefaultStreamSendTimeout),
	}
	for _, g := range gens {
		s.types = append(s.types, g.Type())
	}
	s.cache = newResourceCache(gens, func(t translate.ResourceType, name string, err error) {
		s.log.Error("xds: cannot marshal resource", "type", t.Short, "name", name, "err", err)
	})
	s.env = &streamEnv{
		watcher:     s,
		types:       s.types,
		limits:      s.limits,
		log:         s.log,
		observer:    opts.Observer,
		clientOf:    s.client,
		authorize:   s.authorizeStream,
		refuse:      s.refuseStream,
		nacked:      s.nacked,
		closed:      func(st *xdsStream) { s.closed(st.key) },
		nextVersion: s.nextVersion,
	}
	return s
}

// versionPrefix makes versions unique across restarts: the start time and
// random bits.
func versionPrefix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatInt(time.Now().UnixMilli(), 36) + hex.EncodeToString(b[:])
}

func (s *Server) ready() bool { return s.opts.Ready == nil || s.opts.Ready() }

func (s *Server) nextVersion() string {
	return s.prefix + "-" + strconv.FormatUint(s.seq.Add(1), 10)
}

// client reads who is asking from its node, and fills in what the node
// leaves out from the workload behind its address, as Istio reads a
// proxy's node and locality from its pod: grpc-go sends the bootstrap's
// locality, which is often empty, and node metadata only if the bootstrap
// has it. The workload's labels replace the node's LABELS, as istiod's
// SetWorkloadLabels does: a Pod's labels are the API server's word, the
// node's only the client's.
func (s *Server) client(n *core.Node) translate.Client {
	c := translate.ClientFromNode(n)
	// One name for the local cluster, so that clients that name it and
	// clients that do not share what varies by cluster.
	c.ClusterID = cmp.Or(c.ClusterID, s.opts.LocalClusterID, model.DefaultClusterID)
	s.knownFacts(&c)
	if s.opts.Workloads == nil {
		return c
	}
	for _, ip := range c.IPs {
		w := s.opts.Workloads.WorkloadByIP(ip)
		if w == nil {
			continue
		}
		if c.NodeName == "" {
			c.NodeName = w.NodeName
		}
		if c.Locality == (model.Locality{}) {
			c.Locality = w.Locality
		}
		if w.Labels != nil {
			c.SetLabels(w.Labels)
		}
		break
	}
	return c
}

// typeOf finds a served type by URL.
func (s *Server) typeOf(url string) (int, bool) { return s.env.typeOf(url) }

// typeLabel names a type URL in logs and metrics: its short name, or
// otherType.
func (s *Server) typeLabel(url string) string {
	if t, ok := s.typeOf(url); ok {
		return s.types[t].Short
	}
	return otherType
}

// NACKs returns how many NACKs clients have sent.
func (s *Server) NACKs() uint64 { return s.nacks.Load() }

// RefusedStreams returns how many new streams were refused, by reason.
func (s *Server) RefusedStreams() RefusedStreams { return s.refused.counts() }

// Stats describes the server's shared state.
type Stats struct {
	// Watches is the number of open requests waiting for a change.
	Watches int
	// Resources is the number of generated resources held.
	Resources int
	// Marshals counts the resources marshalled since the server started:
	// once per content and variant, however many clients get it.
	Marshals uint64
}

// Stats returns the current figures.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := map[*registration]struct{}{}
	s.watches.all(rs)
	waiting := 0
	for r := range rs {
		if r.current != nil {
			waiting++
		}
	}
	return Stats{Watches: waiting, Resources: s.cache.len(), Marshals: s.cache.marshals}
}

// Push applies a change of the model: it drops what was generated from the
// changed model keys and re-evaluates the watches that depend on them;
// clients whose resources changed are sent the new ones, others nothing.
// An endpoints-only change touches only what was built from endpoints
// (ClusterLoadAssignments) and their subscribers. Push never waits for a
// client.
func (s *Server) Push(req push.Request) {
	start := time.Now()
	s.mu.Lock()
	s.pushes++
	woken := map[*registration]struct{}{}
	if req.Full {
		s.cache.dropAll()
		s.watches.all(woken)
	} else {
		var kinds kindSet
		req.Keys(func(k model.ConfigKey) {
			kinds.add(k.Kind)
			s.cache.drop(k)
			s.watches.collect(k, woken)
		})
		s.watches.collectWildcard(kinds, woken)
	}
	var answered []*xdsStream
	for r := range woken {
		// A registration whose last watch was answered waits for the
		// client's next request, which is evaluated afresh.
		if w := r.current; w != nil && s.evaluate(w, req.Start) {
			answered = append(answered, w.stream)
		}
	}
	s.mu.Unlock()
	// Every answer of the push is pending before the first is sent, so
	// that each stream sends them in send order (clusters before their
	// endpoints, listeners before their routes).
	for _, st := range answered {
		st.kick()
	}
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("xds: push", "full", req.Full, "services", len(req.Services), "endpointsOnly", len(req.EndpointsOnly),
			"events", req.Events, "watches", len(woken), "sent", len(answered), "took", time.Since(start))
	}
}

// watch implements watcher: it answers w at once when the client lacks
// something, else indexes it to wait for a change. The stream's handler
// is its sender and sends the answer itself.
//
// What the client asks for and the cache lacks is generated first,
// without the lock: the lock serialises every stream's evaluations and
// every push, and generating (a thousand clients converging on as many
// services, each resource new) is most of their work, which would then
// run on one core however many the machine has. A push between that
// generation and the evaluation discards it, and the evaluation
// generates under the lock as before, so that no answer is built from
// a model older than the last push's. A resource another watch is
// generating meanwhile is waited for, not generated twice: clients that
// arrive together ask for the same resources.
func (s *Server) watch(w *watch) {
	s.mu.Lock()
	w.wildcard = isWildcard(s.types[w.typ], w.client, w.ts.sub.wildcard)
	mine, theirs := s.missing(w)
	if len(mine)+len(theirs) > 0 {
		seq := s.pushes
		s.mu.Unlock()
		p := &prepared{typ: w.typ, client: w.client, byName: make(map[string]preparedEntry, len(mine))}
		for _, n := range mine {
			r, e := s.cache.generate(w.typ, w.client, n)
			p.byName[n] = preparedEntry{result: r, entry: e}
		}
		s.mu.Lock()
		if len(mine) > 0 {
			// Into the cache at once, for the other watches waiting for
			// these names; p keeps the entries alive until evaluated.
			if s.pushes == seq {
				s.cache.prepared = p
				for _, n := range mine {
					s.cache.get(w.typ, w.client, n)
				}
				s.cache.prepared = nil
			}
			s.release(w.typ, mine)
		}
		if len(theirs) > 0 {
			// Another watch generates these: wait for it rather than
			// generate them twice. It never waits while it holds names,
			// so no two watches wait for each other.
			s.mu.Unlock()
			for _, done := range theirs {
				<-done
			}
			s.mu.Lock()
		}
	}
	s.evaluate(w, time.Time{})
	s.mu.Unlock()
}

// missing lists the names w covers whose resource for w's client the
// cache does not hold: mine, which w now generates (no other watch is
// generating them), and theirs, which another watch is generating, as
// what is closed when it is done. None for a wildcard watch, whose names
// are the whole type's and mostly held. s.mu is held.
func (s *Server) missing(w *watch) (mine []string, theirs []chan struct{}) {
	if w.wildcard {
		return nil, nil
	}
	for _, n := range w.ts.sub.names {
		if s.cache.peek(w.typ, w.client, n) != nil {
			continue
		}
		k := generating{w.typ, n}
		if done, ok := s.generating[k]; ok {
			theirs = append(theirs, done)
			continue
		}
		if s.generating == nil {
			s.generating = map[generating]chan struct{}{}
		}
		s.generating[k] = make(chan struct{})
		mine = append(mine, n)
	}
	return mine, theirs
}

// release says that names are generated (or abandoned): the watches
// waiting for them go on. s.mu is held.
func (s *Server) release(typ int, names []string) {
	for _, n := range names {
		k := generating{typ, n}
		close(s.generating[k])
		delete(s.generating, k)
	}
}

// generating names a resource a watch generates outside the lock.
type generating struct {
	typ  int
	name string
}

// cancel implements watcher.
func (s *Server) cancel(w *watch) {
	if w == nil {
		return
	}
	s.mu.Lock()
	s.finish(w)
	s.mu.Unlock()
}

// endType implements watcher: the type's registration leaves the index.
func (s *Server) endType(ts *typeState) {
	s.mu.Lock()
	if ts.reg != nil {
		s.watches.remove(ts.reg)
		ts.reg = nil
	}
	s.mu.Unlock()
}

// shareNames implements watcher: the names take the cache's strings.
func (s *Server) shareNames(typ int, names []string) {
	s.mu.Lock()
	s.cache.shareNames(typ, names)
	s.mu.Unlock()
}

// isWildcard: only non-gRPC clients may subscribe to everything, and
// only to types that have a wildcard; a gRPC client that names nothing
// gets nothing.
func isWildcard(t translate.ResourceType, c *translate.Client, subscribed bool) bool {
	return subscribed && t.Wildcard && !c.GRPC
}

// evaluate answers a watch if the client lacks something; otherwise it
// leaves the watch waiting, indexed under what it now depends on. s.mu
// is held.
//
// change is when the model change that led here reached meshpilot (zero
// when the evaluation is not caused by a push); it travels with the
// response so that convergence can be measured.
func (s *Server) evaluate(w *watch, change time.Time) (sent bool) {
	if w.done {
		return false
	}
	deps := depCollector{kindsOnly: w.wildcard}
	var r *response
	if w.delta {
		r = s.delta(w, change, &deps)
	} else {
		r = s.sotw(w, change, &deps)
	}
	if r != nil {
		s.finish(w)
		w.answer(r)
		return true
	}
	s.reindex(w, &deps)
	return false
}

// reindex files a waiting watch under the keys its latest evaluation
// found: it takes over its type's registration, which is refiled only
// when they differ from those it is filed under.
func (s *Server) reindex(w *watch, deps *depCollector) {
	if w.wildcard {
		deps.kinds.add(model.KindService)
	}
	r := w.ts.reg
	if r == nil {
		r = &registration{}
		w.ts.reg = r
	}
	r.current = w
	if r.indexed && r.wildcard == w.wildcard && r.kinds == deps.kinds && sameDeps(r.deps, deps.lists) {
		return
	}
	s.watches.remove(r)
	r.deps, r.kinds, r.wildcard = slices.Clip(deps.lists), deps.kinds, w.wildcard
	s.watches.add(r)
}

// finish ends a watch for good (nil: none); its type's registration
// stays filed for the next. s.mu is held.
func (s *Server) finish(w *watch) {
	if w == nil || w.done {
		return
	}
	w.done = true
	if r := w.ts.reg; r != nil && r.current == w {
		r.current = nil
	}
}

// resource returns the entry of a resource for a client, generating it
// when needed, and adds what it depends on to deps (nil: not wanted).
// s.mu is held.
func (s *Server) resource(typ int, c *translate.Client, name string, deps *depCollector) *entry {
	e := s.cache.get(typ, c, name)
	if deps != nil {
		deps.add(e.deps)
	}
	return e
}
