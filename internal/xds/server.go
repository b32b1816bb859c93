package xds

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"path"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
)

// Options configure a Server.
type Options struct {
	// Discovery is the model served. Required.
	Discovery model.ServiceDiscovery
	// DomainSuffix is the cluster domain; "cluster.local" when empty.
	DomainSuffix string
	// Ready reports whether the model is complete. Until it is, new xDS
	// streams fail with Unavailable and REST requests with 503. Nil means
	// always ready.
	Ready func() bool
	// Logger receives NACKs and errors; slog.Default() when nil.
	Logger *slog.Logger
	// Observer, when set, is told of every response, ACK and NACK.
	Observer Observer
}

// Server serves the model over xDS: ADS (state of the world and delta),
// the per-type discovery services, and REST-JSON.
//
// It uses go-control-plane's gRPC server for the protocol and is itself
// the cache behind it: resources are generated per client on demand
// (listener names are relative to the client's namespace), each resource
// is marshalled once per content and shared by all clients, and watches
// are indexed by the hostnames they depend on so that a change wakes only
// the clients subscribed to what changed. A response is handed to a
// client's stream without blocking: the protocol allows one outstanding
// response per stream and type, so a client that does not read simply
// gets the latest state when it next asks.
//
// Concurrency: Register and RESTHandler are called once, before serving.
// Push may be called from any goroutine at any time; calls are
// serialised. All methods are safe for concurrent use.
type Server struct {
	opts   Options
	gen    *Generator
	log    *slog.Logger
	xds    serverv3.Server
	prefix string
	seq    atomic.Uint64

	mu sync.Mutex
	// entries caches generated resources by type and what they depend
	// on (see get).
	entries [numTypes]map[entryKey]*entry
	// entriesByHost finds the entries generated from a hostname.
	entriesByHost map[model.Hostname]map[*entry]typeIndex
	// watchesByHost holds route, cluster and endpoint watches by the
	// hostname in their names; watchesByLabel holds listener watches by
	// the first label of their names; wildcard holds wildcard watches.
	watchesByHost  map[model.Hostname]map[*watch]struct{}
	watchesByLabel map[string]map[*watch]struct{}
	wildcard       [numTypes]map[*watch]struct{}
	marshals       uint64 // see Stats.Marshals
	nacks          atomic.Uint64

	tracker *clientTracker
}

// streamKey names a stream: go-control-plane numbers state-of-the-world
// and delta streams separately.
type streamKey struct {
	id    int64
	delta bool
}

var errNotReady = status.Error(codes.Unavailable, "meshpilot: the service model is not synced yet")

func (s *Server) open(_ context.Context, id int64, delta bool) error {
	if !s.ready() {
		return errNotReady
	}
	s.tracker.open(id, delta)
	return nil
}

// request records who is on a stream and what it asks for, and logs and
// counts NACKs.
func (s *Server) request(id int64, delta bool, node *core.Node, typeURL string, names, unsubscribe []string, version, nonce string, nack *statuspb.Status) {
	r := s.tracker.request(id, delta, node, typeURL, names, unsubscribe, nonce, nack)
	if r.nack {
		s.nacks.Add(1)
		s.log.Warn("xds: client rejected configuration", "client", r.nodeID, "stream", id, "type", shortType(typeURL),
			"version", version, "nonce", nonce, "error", nack.GetMessage())
	}
}

// Clients lists the connected xDS streams, ordered by node id, with their
// per-type sync state.
func (s *Server) Clients() []ClientInfo { return s.tracker.list() }

// ClientCounts returns how many streams gRPC clients and other (Envoy)
// clients hold open.
func (s *Server) ClientCounts() (grpcClients, envoyClients int) { return s.tracker.counts() }

// watch is one open request of one stream for one type: the stream waits
// for at most one response to it.
type watch struct {
	typ      typeIndex
	client   Client
	sub      cache.Subscription
	req      *discovery.DiscoveryRequest // sotw
	ch       chan cache.Response
	dreq     *discovery.DeltaDiscoveryRequest // delta
	dch      chan cache.DeltaResponse
	hosts    []model.Hostname
	labels   []string
	wildcard bool
	done     bool
}

// NewServer returns a server for the model.
func NewServer(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		opts:           opts,
		gen:            &Generator{Discovery: opts.Discovery, DomainSuffix: opts.DomainSuffix},
		log:            opts.Logger,
		prefix:         versionPrefix(),
		entriesByHost:  map[model.Hostname]map[*entry]typeIndex{},
		watchesByHost:  map[model.Hostname]map[*watch]struct{}{},
		watchesByLabel: map[string]map[*watch]struct{}{},
		tracker:        newClientTracker(opts.Observer),
	}
	for t := range numTypes {
		s.entries[t] = map[entryKey]*entry{}
		s.wildcard[t] = map[*watch]struct{}{}
	}
	s.xds = serverv3.NewServer(context.Background(), s, serverv3.CallbackFuncs{
		StreamOpenFunc:        func(ctx context.Context, id int64, _ string) error { return s.open(ctx, id, false) },
		DeltaStreamOpenFunc:   func(ctx context.Context, id int64, _ string) error { return s.open(ctx, id, true) },
		StreamClosedFunc:      func(id int64, _ *core.Node) { s.tracker.close(id, false) },
		DeltaStreamClosedFunc: func(id int64, _ *core.Node) { s.tracker.close(id, true) },
		StreamRequestFunc: func(id int64, req *discovery.DiscoveryRequest) error {
			s.request(id, false, req.GetNode(), req.GetTypeUrl(), req.GetResourceNames(), nil,
				req.GetVersionInfo(), req.GetResponseNonce(), req.GetErrorDetail())
			return nil
		},
		StreamDeltaRequestFunc: func(id int64, req *discovery.DeltaDiscoveryRequest) error {
			s.request(id, true, req.GetNode(), req.GetTypeUrl(), req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe(),
				"", req.GetResponseNonce(), req.GetErrorDetail())
			return nil
		},
		StreamResponseFunc: func(ctx context.Context, id int64, _ *discovery.DiscoveryRequest, out *discovery.DiscoveryResponse) {
			s.tracker.sotwSent(ctx, id, out)
		},
		StreamDeltaResponseFunc: func(id int64, _ *discovery.DeltaDiscoveryRequest, out *discovery.DeltaDiscoveryResponse) {
			s.tracker.deltaSentFunc(id, out)
		},
		FetchRequestFunc: func(context.Context, *discovery.DiscoveryRequest) error {
			if !s.ready() {
				return errNotReady
			}
			return nil
		},
	})
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

// Register adds ADS (state of the world and delta) and the per-type
// discovery services to g.
func (s *Server) Register(g *grpc.Server) {
	discovery.RegisterAggregatedDiscoveryServiceServer(g, s.xds)
	listenerservice.RegisterListenerDiscoveryServiceServer(g, s.xds)
	routeservice.RegisterRouteDiscoveryServiceServer(g, s.xds)
	clusterservice.RegisterClusterDiscoveryServiceServer(g, s.xds)
	endpointservice.RegisterEndpointDiscoveryServiceServer(g, s.xds)
}

// RESTHandler serves REST-JSON discovery as Envoy's REST API type expects:
// POST /v3/discovery:clusters, :endpoints, :listeners, :routes with a JSON
// DiscoveryRequest. It answers 304 when the request's version_info is
// current and 503 until the model is ready.
func (s *Server) RESTHandler() http.Handler {
	gw := &serverv3.HTTPGateway{Server: s.xds}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST a DiscoveryRequest", http.StatusMethodNotAllowed)
			return
		}
		switch path.Clean(r.URL.Path) {
		case resource.FetchClusters, resource.FetchEndpoints, resource.FetchListeners, resource.FetchRoutes:
		default:
			http.NotFound(w, r)
			return
		}
		if !s.ready() {
			http.Error(w, "the service model is not synced yet", http.StatusServiceUnavailable)
			return
		}
		body, code, err := gw.ServeHTTP(r)
		if err != nil {
			http.Error(w, err.Error(), code)
			return
		}
		if code != http.StatusOK {
			w.WriteHeader(code)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
}

// NACKs returns how many NACKs clients have sent.
func (s *Server) NACKs() uint64 { return s.nacks.Load() }

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
	st := Stats{Marshals: s.marshals}
	ws := map[*watch]struct{}{}
	for _, m := range s.watchesByHost {
		maps.Copy(ws, m)
	}
	for _, m := range s.watchesByLabel {
		maps.Copy(ws, m)
	}
	for t := range numTypes {
		maps.Copy(ws, s.wildcard[t])
		st.Resources += len(s.entries[t])
	}
	st.Watches = len(ws)
	return st
}

// Push applies a change of the model: it drops what was generated from the
// changed hostnames and re-evaluates the watches that depend on them;
// clients whose resources changed are sent the new ones, others nothing.
// An endpoints-only change touches only ClusterLoadAssignments and their
// subscribers. Push never waits for a client.
func (s *Server) Push(req push.Request) {
	start := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	woken := map[*watch]struct{}{}
	if req.Full {
		for t := range numTypes {
			clear(s.entries[t])
		}
		clear(s.entriesByHost)
		for _, ws := range s.watchesByHost {
			maps.Copy(woken, ws)
		}
		for _, ws := range s.watchesByLabel {
			maps.Copy(woken, ws)
		}
		for t := range numTypes {
			maps.Copy(woken, s.wildcard[t])
		}
	} else {
		for h := range req.Services {
			s.dropEntries(h, false)
			maps.Copy(woken, s.watchesByHost[h])
			maps.Copy(woken, s.watchesByLabel[hostKey(h)])
		}
		for h := range req.EndpointsOnly {
			s.dropEntries(h, true)
			for w := range s.watchesByHost[h] {
				if w.typ == tEndpoint {
					woken[w] = struct{}{}
				}
			}
		}
		if len(req.Services) > 0 {
			for t := range numTypes {
				maps.Copy(woken, s.wildcard[t])
			}
		} else if len(req.EndpointsOnly) > 0 {
			maps.Copy(woken, s.wildcard[tEndpoint])
		}
	}
	sent := 0
	for w := range woken {
		if s.evaluate(w, req.Start) {
			sent++
		}
	}
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("xds: push", "full", req.Full, "services", len(req.Services), "endpointsOnly", len(req.EndpointsOnly),
			"events", req.Events, "watches", len(woken), "sent", sent, "took", time.Since(start))
	}
}

// dropEntries forgets what was generated from h (only endpoints when
// endpointsOnly); it is regenerated when next needed.
func (s *Server) dropEntries(h model.Hostname, endpointsOnly bool) {
	byHost := s.entriesByHost[h]
	for e, t := range byHost {
		if endpointsOnly && t != tEndpoint {
			continue
		}
		delete(byHost, e)
		if s.entries[t][e.key] == e {
			delete(s.entries[t], e.key)
		}
	}
	if len(byHost) == 0 {
		delete(s.entriesByHost, h)
	}
}

// entryKey is what a generated resource depends on besides the model: its
// name; for a listener the hostname the name resolved to in the client's
// namespace; for a ClusterLoadAssignment the client's kind (see
// localityWithoutHealthy). Clients with the same key share the entry. A
// struct, so that a lookup allocates nothing.
type entryKey struct {
	name string
	host model.Hostname
	grpc bool
}

// get returns the entry of a resource for a client, generating it when
// needed. s.mu is held.
func (s *Server) get(t typeIndex, c Client, name string) *entry {
	var key entryKey
	var svc *model.Service
	var port int32
	if t == tListener {
		if e := s.pushedListener(c, name); e != nil {
			return e
		}
		svc, port = resolveListener(s.gen.Discovery, s.gen.suffix(), c.Namespace, name)
		if svc == nil {
			return &entry{name: name, version: absent}
		}
		key = entryKey{name: name, host: svc.Hostname}
	} else {
		h, _, ok := serviceCluster(name)
		if !ok {
			return &entry{name: name, version: absent}
		}
		key = entryKey{name: name, host: h, grpc: t == tEndpoint && !localityWithoutHealthy(c)}
	}
	if e := s.entries[t][key]; e != nil {
		return e
	}
	var m proto.Message
	if t == tListener {
		m = buildListener(name, svc.Hostname, port)
	} else {
		m = s.gen.Generate(typeURLs[t], c, name)
	}
	e := s.build(t, key, m)
	if !e.exists() {
		return e // not cached: absent names cost a lookup, not memory
	}
	s.entries[t][key] = e
	byHost := s.entriesByHost[key.host]
	if byHost == nil {
		byHost = map[*entry]typeIndex{}
		s.entriesByHost[key.host] = byHost
	}
	byHost[e] = t
	return e
}

// pushedListener returns the cached listener of the service a name
// resolves to, as the last push of that service left it, or nil. Other
// resources are found in the cache by name; a listener's key needs the
// resolution, and resolving against the model would show a change before
// its push: a Service deleted and created again within one debounce
// window, whose push is held back for the create to follow, would reach a
// client whose request is answered meanwhile (it ACKs, it subscribes to
// another listener) as a deletion. The candidates are tried in order, as
// resolveListener does: one that is in the model but not in the cache
// ends the search, and the model decides. s.mu is held.
func (s *Server) pushedListener(c Client, name string) *entry {
	host, _, ok := model.SplitHostPort(name)
	if !ok {
		return nil
	}
	for _, cand := range model.HostnameCandidates(host, c.Namespace, s.gen.suffix()) {
		if e := s.entries[tListener][entryKey{name: name, host: cand}]; e != nil {
			return e
		}
		if s.gen.Discovery.GetService(cand) != nil {
			return nil
		}
	}
	return nil
}

// build marshals a generated resource into an entry. s.mu is held.
func (s *Server) build(t typeIndex, key entryKey, m proto.Message) *entry {
	if m != nil {
		s.marshals++
	}
	e, err := newEntry(typeURLs[t], key.name, key.host, m)
	if err != nil {
		s.log.Error("xds: cannot marshal resource", "type", t.short(), "name", key.name, "err", err)
		return &entry{name: key.name, host: key.host, version: absent}
	}
	e.key = key
	return e
}

// names returns what a watch covers: its subscribed names, and for a
// wildcard subscription everything of the type too. A name subscribed
// explicitly stays covered when its resource goes, so that a wildcard
// client that named it is told of the removal.
func (s *Server) names(w *watch) []string {
	subscribed := w.sub.SubscribedResources()
	if !w.wildcard {
		return slices.Sorted(maps.Keys(subscribed))
	}
	all := s.wildcardNames(w.typ)
	if len(subscribed) == 0 {
		return all
	}
	seen := make(map[string]struct{}, len(all))
	for _, n := range all {
		seen[n] = struct{}{}
	}
	for n := range subscribed {
		if _, ok := seen[n]; !ok {
			all = append(all, n)
		}
	}
	return all
}

// wildcardNames lists everything of a type a wildcard subscription gets.
func (s *Server) wildcardNames(t typeIndex) []string {
	switch t {
	case tCluster, tRoute:
		return s.gen.ClusterNames()
	case tEndpoint:
		return s.gen.EndpointNames()
	}
	return nil
}

// isWildcard: only non-gRPC clients may subscribe to everything; a gRPC
// client that names nothing gets nothing. Listeners are never wildcard:
// meshpilot generates API listeners for gRPC clients only, so Envoy's
// wildcard LDS gets an empty set.
func isWildcard(t typeIndex, c Client, sub cache.Subscription) bool {
	return sub.IsWildcard() && !c.GRPC && t != tListener
}

// evaluate answers a watch if the client lacks something; otherwise it
// leaves the watch waiting. s.mu is held.
//
// change is when the model change that led here reached meshpilot (zero
// when the evaluation is not caused by a push); it travels with the
// response so that convergence can be measured.
func (s *Server) evaluate(w *watch, change time.Time) (sent bool) {
	if w.done {
		return false
	}
	if w.ch != nil {
		if r := s.sotw(w, change); r != nil {
			s.finish(w)
			select {
			case w.ch <- r:
			default: // cannot happen: one response per watch
				s.log.Error("xds: response dropped", "client", w.client.ID, "type", w.typ.short())
			}
			return true
		}
		return false
	}
	if r := s.delta(w, change); r != nil {
		s.finish(w)
		select {
		case w.dch <- r:
		default:
			s.log.Error("xds: delta response dropped", "client", w.client.ID, "type", w.typ.short())
		}
		return true
	}
	return false
}

// sotw builds the state-of-the-world response a watch needs, or nil when
// the client has everything. Listener and cluster responses carry every
// subscribed resource (a missing one means deleted); route and endpoint
// responses carry only those that changed.
func (s *Server) sotw(w *watch, change time.Time) *sotwResponse {
	returned := w.sub.ReturnedResources()
	names := s.names(w)
	full := w.typ == tListener || w.typ == tCluster || w.wildcard
	initial := w.req.GetResponseNonce() == ""
	changed := initial
	next := make(map[string]string, len(names))
	var res []*anypb.Any
	all := make([]*anypb.Any, 0, len(names)) // kept as what the client holds: one allocation
	for _, n := range names {
		e := s.get(w.typ, w.client, n)
		prev, had := returned[n]
		if e.exists() {
			all = append(all, e.any)
			if prev != e.version {
				changed = true
				res = append(res, e.any)
			}
		} else if full && had && prev != absent {
			changed = true // deleted
		} else if full && !had {
			changed = true // asked for, does not exist: say so at once
		}
		if e.exists() || full {
			next[n] = e.version
		} else if had {
			next[n] = prev
		}
	}
	if w.wildcard {
		for n := range returned {
			if _, ok := next[n]; !ok {
				changed = true // gone from the wildcard set
			}
		}
	}
	if !changed {
		return nil
	}
	if full || initial {
		res = all
	}
	return &sotwResponse{
		req: w.req,
		out: &discovery.DiscoveryResponse{
			VersionInfo: s.nextVersion(),
			Resources:   res,
			TypeUrl:     w.req.GetTypeUrl(),
		},
		returned: next,
		change:   change,
		holds:    all,
	}
}

// delta builds the incremental response a watch needs, or nil.
func (s *Server) delta(w *watch, change time.Time) *deltaResponse {
	returned := w.sub.ReturnedResources()
	names := s.names(w)
	next := maps.Clone(returned)
	if next == nil {
		next = map[string]string{}
	}
	var res []*discovery.Resource
	var removed []string
	var holds []*anypb.Any
	covered := make(map[string]struct{}, len(names))
	for _, n := range names {
		covered[n] = struct{}{}
		e := s.get(w.typ, w.client, n)
		prev, had := returned[n]
		if e.exists() {
			holds = append(holds, e.any)
		}
		switch {
		case e.exists() && prev != e.version:
			res = append(res, e.delta)
			next[n] = e.version
		case !e.exists() && had && prev != "":
			removed = append(removed, n)
			delete(next, n)
		}
	}
	if w.wildcard {
		// Names the client holds that left the wildcard set. An empty
		// version is a name it unsubscribed while subscribed to the
		// wildcard: go-control-plane marks it so that the client is told
		// whether it still exists, and here it does not.
		for n := range returned {
			if _, ok := covered[n]; !ok {
				removed = append(removed, n)
				delete(next, n)
			}
		}
	}
	// The first request of a wildcard subscription is answered even with
	// nothing in it: Envoy waits for that answer (up to its
	// initial_fetch_timeout) before it finishes starting. That holds for
	// listeners too, which meshpilot never serves to Envoy. go-control-plane
	// knows a first request by its empty nonce, as its own caches do.
	initialWildcard := w.sub.IsWildcard() && w.dreq.GetResponseNonce() == ""
	if len(res) == 0 && len(removed) == 0 && !initialWildcard {
		return nil
	}
	slices.Sort(removed)
	r := &deltaResponse{
		req: w.dreq,
		out: &discovery.DeltaDiscoveryResponse{
			SystemVersionInfo: s.nextVersion(),
			Resources:         res,
			RemovedResources:  removed,
			TypeUrl:           w.dreq.GetTypeUrl(),
		},
		returned: next,
	}
	s.tracker.deltaBuilt(r.out, change, holds)
	return r
}

// index registers a waiting watch under what it depends on.
func (s *Server) index(w *watch) {
	if w.wildcard {
		s.wildcard[w.typ][w] = struct{}{}
	}
	seenH := map[model.Hostname]struct{}{}
	seenL := map[string]struct{}{}
	for n := range w.sub.SubscribedResources() {
		if w.typ == tListener {
			l := listenerKey(n)
			if _, ok := seenL[l]; ok {
				continue
			}
			seenL[l] = struct{}{}
			w.labels = append(w.labels, l)
			add(s.watchesByLabel, l, w)
			continue
		}
		h, _, ok := serviceCluster(n)
		if !ok {
			continue
		}
		if _, ok := seenH[h]; ok {
			continue
		}
		seenH[h] = struct{}{}
		w.hosts = append(w.hosts, h)
		add(s.watchesByHost, h, w)
	}
}

func add[K comparable](m map[K]map[*watch]struct{}, k K, w *watch) {
	ws := m[k]
	if ws == nil {
		ws = map[*watch]struct{}{}
		m[k] = ws
	}
	ws[w] = struct{}{}
}

func remove[K comparable](m map[K]map[*watch]struct{}, k K, w *watch) {
	if ws := m[k]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(m, k)
		}
	}
}

// finish takes a watch out of every index. s.mu is held.
func (s *Server) finish(w *watch) {
	if w.done {
		return
	}
	w.done = true
	for _, h := range w.hosts {
		remove(s.watchesByHost, h, w)
	}
	for _, l := range w.labels {
		remove(s.watchesByLabel, l, w)
	}
	delete(s.wildcard[w.typ], w)
}

func (s *Server) cancel(w *watch) func() {
	return func() {
		s.mu.Lock()
		s.finish(w)
		s.mu.Unlock()
	}
}

// CreateWatch implements go-control-plane's cache.ConfigWatcher for
// state-of-the-world streams.
func (s *Server) CreateWatch(req *cache.Request, sub cache.Subscription, ch chan cache.Response) (func(), error) {
	t, ok := typeOf(req.GetTypeUrl())
	if !ok {
		// A type meshpilot does not serve (secrets, runtime, ...): say
		// once that there is nothing, rather than end the stream.
		if req.GetResponseNonce() == "" {
			ch <- &sotwResponse{req: req, out: &discovery.DiscoveryResponse{
				VersionInfo: s.nextVersion(), TypeUrl: req.GetTypeUrl(),
			}, returned: map[string]string{}}
		}
		return func() {}, nil
	}
	return s.startWatch(&watch{typ: t, client: ClientFromNode(req.GetNode()), sub: sub, req: req, ch: ch}), nil
}

// CreateDeltaWatch implements go-control-plane's cache.ConfigWatcher for
// delta streams.
func (s *Server) CreateDeltaWatch(req *cache.DeltaRequest, sub cache.Subscription, ch chan cache.DeltaResponse) (func(), error) {
	t, ok := typeOf(req.GetTypeUrl())
	if !ok {
		return func() {}, nil // nothing to send, ever
	}
	return s.startWatch(&watch{typ: t, client: ClientFromNode(req.GetNode()), sub: sub, dreq: req, dch: ch}), nil
}

// startWatch answers a new watch at once when the client lacks something,
// else indexes it to wait for a change; it returns the cancel function.
func (s *Server) startWatch(w *watch) func() {
	w.wildcard = isWildcard(w.typ, w.client, w.sub)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evaluate(w, time.Time{})
	if !w.done {
		s.index(w)
	}
	return s.cancel(w)
}

// Fetch implements go-control-plane's cache.ConfigFetcher for REST: the
// named resources (everything, for a non-gRPC client naming none), with a
// version derived from their content.
func (s *Server) Fetch(_ context.Context, req *cache.Request) (cache.Response, error) {
	t, ok := typeOf(req.GetTypeUrl())
	if !ok {
		return nil, fmt.Errorf("meshpilot does not serve %q", req.GetTypeUrl())
	}
	c := ClientFromNode(req.GetNode())
	names := req.GetResourceNames()
	if len(names) == 0 && !c.GRPC && t != tListener {
		names = s.wildcardNames(t)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var res []*anypb.Any
	returned := map[string]string{}
	sum := newVersionHash()
	for _, n := range names {
		e := s.get(t, c, n)
		if e.exists() {
			res = append(res, e.any)
			returned[n] = e.version
			sum.add(n, e.version)
		}
	}
	version := s.prefix + "-" + sum.String()
	if req.GetVersionInfo() == version {
		return nil, &types.SkipFetchError{}
	}
	return &sotwResponse{
		req:      req,
		out:      &discovery.DiscoveryResponse{VersionInfo: version, Resources: res, TypeUrl: req.GetTypeUrl()},
		returned: returned,
	}, nil
}

var _ cache.Cache = (*Server)(nil)
