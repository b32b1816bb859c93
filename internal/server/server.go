// Package server assembles meshpilot: the registries that fill the model,
// through one aggregate, the debouncer, the xDS server on gRPC and the HTTP
// port. The serve command,
// the demo and tests start meshpilot through it.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"golang.org/x/net/netutil"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/debug"
	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/metrics"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/multicluster/clusterstate"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/xds"
)

// Options configure a Server.
type Options struct {
	// Sources are the registries that fill the model, by precedence: the
	// server serves their aggregate (see package aggregate for how the
	// sources' services merge). At least one.
	Sources []aggregate.Source
	// DomainSuffix of hostnames; "cluster.local" when empty.
	DomainSuffix string
	// ClusterID names the local cluster (--cluster-id): endpoints of
	// sources that set none, and clients without CLUSTER_ID, are in it;
	// model.DefaultClusterID when empty.
	ClusterID string
	// XDSAddr is the gRPC listen address, e.g. ":15010".
	XDSAddr string
	// HTTPAddr serves /healthz, /readyz, /metrics, REST-JSON discovery and,
	// without DebugAddr, the /debug/ pages; e.g. ":15014".
	HTTPAddr string
	// DebugAddr, when set, serves the /debug/ pages (and pprof) on a port
	// of their own instead of HTTPAddr (e.g. "127.0.0.1:9876"). Unless
	// DebugAllowRemote, it must be a loopback address, and the pages
	// answer only callers on loopback wherever they are served.
	DebugAddr string
	// DebugAllowRemote serves the debug pages to callers that are not on
	// loopback, and lets DebugAddr listen on any address. They show
	// every service and any client's config to whoever reaches them.
	DebugAllowRemote bool
	// HTTPMaxConnections caps the connections the HTTP port (and the
	// debug port) hold open at once; beyond it new ones wait to be
	// accepted. DefaultHTTPMaxConnections when zero.
	HTTPMaxConnections int
	// DrainDuration is how long existing xDS streams are still served
	// after Run's context ends: meanwhile /readyz fails and new streams
	// are refused. Draining ends early once no stream is left. Zero closes
	// streams at once.
	DrainDuration time.Duration
	// MaxConnectionAge closes each xDS connection after about this long
	// (gRPC keepalive, +/-10% jitter), and MaxConnectionAgeGrace later
	// still if streams are open (DefaultMaxConnectionAgeGrace when zero:
	// xDS streams never end by themselves), so that clients reconnect and
	// spread over replicas after a scale-out. Zero means no limit.
	MaxConnectionAge, MaxConnectionAgeGrace time.Duration
	// MaxClients, when above zero, caps the xDS streams this replica
	// serves: beyond it a new stream is refused at once with
	// ResourceExhausted, so that the client reconnects through the Service
	// to another replica. Zero means no cap.
	MaxClients int
	// MaxRequestNames bounds the resource names of one xDS request
	// (xds.Options.MaxRequestNames); xds.DefaultMaxRequestNames when
	// zero.
	MaxRequestNames int
	// MaxNewStreamsPerSecond, when above zero, paces new xDS streams
	// (xds.Options.MaxNewStreamsPerSecond). Zero means no limit.
	MaxNewStreamsPerSecond float64
	// MaxStreamsPerConnection bounds the streams one xDS connection may
	// have open at once (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS);
	// DefaultMaxStreamsPerConnection when zero.
	MaxStreamsPerConnection uint32
	// StreamSendTimeout ends an xDS stream whose response cannot be
	// written within it (xds.Options.StreamSendTimeout);
	// xds.DefaultStreamSendTimeout when zero.
	StreamSendTimeout time.Duration
	// Metrics receives the server's metrics; New makes a set when nil.
	// Pass one to share it with the registries (kube.Options.QueueMetrics
	// and OnInformerEvent, from WorkqueueProviderFor and
	// InformerEventsFor of each registry's cluster).
	Metrics *metrics.Metrics
	// XDSCert and XDSKey enable TLS on the xDS port; XDSClientCA also
	// requires and verifies client certificates (mTLS), and serves a
	// client only as a node of the namespace of its certificate's SPIFFE
	// ID (xds.Options.RequireIdentity). The files are
	// read again when they change (their folders are watched, and read
	// every DefaultTLSReloadInterval): new connections get the new
	// certificate and CA, open ones go on.
	XDSCert, XDSKey, XDSClientCA string
	// TLSReloadInterval is how often those files are read again without
	// an event of their folders (a file behind a symlink to another
	// folder changes without one); DefaultTLSReloadInterval when zero.
	TLSReloadInterval time.Duration
	// Mesh follows the mesh-wide settings (MeshConfig); Istio's defaults
	// when nil. Run runs it; a change is pushed as the keys of the parts
	// that changed (model.MeshKeys).
	Mesh *meshconfig.Watcher
	// Policies, when set, holds the DestinationRules generators apply; a
	// change is pushed as the model.DestinationRuleKey of its host.
	Policies PolicySource
	// ConfigStatus, when set, is what became of each Istio object, shown
	// on /debug/configz and counted by the config_objects metric.
	ConfigStatus *configstatus.Reporter
	// Consistency, when set, audits the Kubernetes registry for
	// /debug/consistencyz.
	Consistency debug.Consistency
	// Routes, when set, holds the VirtualServices generators apply; a
	// change is pushed as the model.VirtualServiceKey of its hosts.
	Routes RouteSource
	// Security, when set, holds the PeerAuthentications and
	// AuthorizationPolicies gRPC servers' listeners apply; a change is
	// pushed as the model.KindSecurity keys of the workloads it selects.
	Security SecuritySource
	// Clusters, when set, lists the clusters read (the local one first)
	// on /debug/clusterz.
	Clusters func() []clusterstate.Cluster
	// Debounce shapes pushes.
	Debounce push.Options
	Logger   *slog.Logger
}

// RouteSource is a model.RouteIndex that reports its changes.
type RouteSource interface {
	model.RouteIndex
	AppendEventHandler(model.EventHandler)
}

// SecuritySource is a model.SecurityIndex that reports its changes.
type SecuritySource interface {
	model.SecurityIndex
	AppendEventHandler(model.EventHandler)
}

// PolicySource is a model.PolicyIndex that reports its changes.
type PolicySource interface {
	model.PolicyIndex
	AppendEventHandler(model.EventHandler)
}

// DefaultMaxConnectionAgeGrace is how long streams may go on after
// MaxConnectionAge when Options give no grace.
const DefaultMaxConnectionAgeGrace = 10 * time.Second

// DefaultMaxStreamsPerConnection is how many streams one xDS connection
// may have open at once when Options give no other figure. A client
// needs one: grpc-go's xDS client opens one ADS stream per xDS server,
// Envoy one ADS stream (or one per type, five or six, without ADS); a
// process with several xDS channel targets, or meshbench's ten clients to
// a connection, a few more. 100 leaves ample room for those and is the
// least HTTP/2 recommends a server allow (RFC 9113, 6.5.2), while one
// connection can no longer hold tens of thousands of streams (20 000 of
// them on one connection held 290 MB): the streams of a process are
// bounded by its connections, and those by --max-clients. grpc-go waits
// for a stream of the connection to end before it opens another beyond
// the limit; a client that opens one anyway has it reset
// (REFUSED_STREAM).
const DefaultMaxStreamsPerConnection = 100

// DefaultHTTPMaxConnections is the HTTP port's connection cap when
// Options give none: Prometheus, the kubelet's probes, a few people and
// REST-JSON clients need far fewer, while every connection costs a
// goroutine and buffers.
const DefaultHTTPMaxConnections = 1024

// The HTTP servers' timeouts. A request (headers and body: a REST-JSON
// DiscoveryRequest or nothing) must arrive within httpReadTimeout, and a
// response be written within httpWriteTimeout, which is longer than
// pprof's default 30 s profile (pprof refuses a profile at least as long
// as the server's write timeout); an idle keep-alive connection is closed
// after httpIdleTimeout, so that idle clients do not hold the connection
// cap.
const (
	httpReadHeaderTimeout = 10 * time.Second
	httpReadTimeout       = 30 * time.Second
	httpWriteTimeout      = 2 * time.Minute
	httpIdleTimeout       = 2 * time.Minute
)

// newHTTPServer is an HTTP server of h with the timeouts above.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: httpReadHeaderTimeout, ReadTimeout: httpReadTimeout,
		WriteTimeout: httpWriteTimeout, IdleTimeout: httpIdleTimeout}
}

// Server is a running meshpilot. Its addresses are known once New returns
// (listeners are bound there), so callers may pass ":0".
type Server struct {
	opts Options
	// registry is the aggregate of Options.Sources.
	registry *aggregate.Controller
	mesh     *meshconfig.Watcher
	log      *slog.Logger
	xds      *xds.Server
	grpc     *grpc.Server
	http     *http.Server
	xdsLis   net.Listener
	httpLis  net.Listener
	debounce *push.Debouncer
	metrics  *metrics.Metrics
	// tls serves the xDS port's certificate and client CA from their
	// files; nil without TLS.
	tls *tlsFiles
	// debugHTTP and debugLis serve /debug/ when DebugAddr is set.
	debugHTTP *http.Server
	debugLis  net.Listener
	// draining is set when shutdown begins: readiness fails and new xDS
	// streams are refused.
	draining atomic.Bool
}

// New binds the listeners and builds the server; Run serves.
func New(opts Options) (*Server, error) {
	registry, err := aggregate.New(aggregate.Options{Sources: opts.Sources})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New()
	}
	if opts.Mesh == nil {
		opts.Mesh = meshconfig.Default()
	}
	s := &Server{opts: opts, registry: registry, mesh: opts.Mesh, log: opts.Logger, metrics: opts.Metrics}
	s.xds = xds.NewServer(xds.Options{
		Discovery:      model.WithExportDefaults(registry, opts.Mesh),
		Workloads:      registry,
		Inventory:      registry,
		DomainSuffix:   opts.DomainSuffix,
		LocalClusterID: opts.ClusterID,
		Mesh:           opts.Mesh,
		Policies:       policyIndex(opts.Policies),
		Routes:         routeIndex(opts.Routes),
		Security:       securityIndex(opts.Security),
		Ready:          s.ready,
		MaxClients:     opts.MaxClients,
		// A client CA makes every client present a certificate: its
		// SPIFFE ID then says which namespace's node it may be.
		RequireIdentity: opts.XDSClientCA != "",
		Logger:          opts.Logger,
		Observer:        opts.Metrics,

		MaxRequestNames:   opts.MaxRequestNames,
		StreamSendTimeout: opts.StreamSendTimeout,

		MaxNewStreamsPerSecond: opts.MaxNewStreamsPerSecond,
	})
	s.metrics.WatchRegistry(s.registrySizes)
	s.metrics.WatchClients(s.xds.ClientCounts)
	s.metrics.WatchSyncStates(s.xds.SyncCounts)
	s.metrics.WatchRefusedStreams(func() (notReady, maxClients, rateLimited uint64) {
		r := s.xds.RefusedStreams()
		return r.NotReady, r.MaxClients, r.RateLimited
	})
	s.metrics.WatchShedStreams(s.xds.ShedStreams)
	s.metrics.WatchHostileClients(s.xds.RefusedRequests, s.xds.SendTimeouts)
	s.metrics.WatchPermissionDenied(s.xds.PermissionDenied)
	s.metrics.WatchConfigObjects(opts.ConfigStatus)
	s.debounce = push.NewDebouncer(opts.Debounce, s.push)
	registry.ReportPortConflicts(s.logPortConflict)
	registry.AppendEventHandler(s.onEvent)
	opts.Mesh.AppendEventHandler(s.onEvent)
	if opts.Policies != nil {
		opts.Policies.AppendEventHandler(s.onEvent)
	}
	if opts.Routes != nil {
		opts.Routes.AppendEventHandler(s.onEvent)
	}
	if opts.Security != nil {
		opts.Security.AppendEventHandler(s.onEvent)
	}

	grpcOpts := []grpc.ServerOption{
		grpc.MaxConcurrentStreams(cmp.Or(opts.MaxStreamsPerConnection, DefaultMaxStreamsPerConnection)),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 15 * time.Second, PermitWithoutStream: true}),
	}
	// The receive limit and windows, and small per-connection buffers
	// (xds/grpcoptions.go).
	grpcOpts = append(grpcOpts, xds.GRPCServerOptions()...)
	if opts.MaxConnectionAge > 0 {
		if opts.MaxConnectionAgeGrace <= 0 {
			opts.MaxConnectionAgeGrace = DefaultMaxConnectionAgeGrace
		}
		grpcOpts = append(grpcOpts, grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionAge:      opts.MaxConnectionAge,
			MaxConnectionAgeGrace: opts.MaxConnectionAgeGrace,
		}))
	}
	if opts.XDSCert != "" || opts.XDSKey != "" || opts.XDSClientCA != "" {
		s.tls, err = loadTLSFiles(tlsFilesOptions{Cert: opts.XDSCert, Key: opts.XDSKey, ClientCA: opts.XDSClientCA,
			Interval: opts.TLSReloadInterval, Log: opts.Logger})
		if err != nil {
			return nil, err
		}
		grpcOpts = append(grpcOpts, grpc.Creds(credentials.NewTLS(s.tls.serverConfig())))
		s.metrics.WatchServingCertificate(s.tls.served)
	}
	s.grpc = grpc.NewServer(grpcOpts...)
	s.xds.Register(s.grpc)

	if opts.DebugAddr != "" {
		if err := debug.CheckAddr(opts.DebugAddr, opts.DebugAllowRemote); err != nil {
			return nil, err
		}
	}
	maxConns := cmp.Or(opts.HTTPMaxConnections, DefaultHTTPMaxConnections)
	if s.xdsLis, err = net.Listen("tcp", opts.XDSAddr); err != nil {
		return nil, fmt.Errorf("listening for xDS on %s: %w", opts.XDSAddr, err)
	}
	if s.httpLis, err = net.Listen("tcp", opts.HTTPAddr); err != nil {
		s.xdsLis.Close()
		return nil, fmt.Errorf("listening for HTTP on %s: %w", opts.HTTPAddr, err)
	}
	if opts.DebugAddr != "" {
		if s.debugLis, err = net.Listen("tcp", opts.DebugAddr); err != nil {
			s.xdsLis.Close()
			s.httpLis.Close()
			return nil, fmt.Errorf("listening for debug pages on %s: %w", opts.DebugAddr, err)
		}
		s.debugLis = netutil.LimitListener(s.debugLis, maxConns)
		mux := http.NewServeMux()
		debug.Register(mux, s.debugOptions())
		s.debugHTTP = newHTTPServer(mux)
	}
	s.httpLis = netutil.LimitListener(s.httpLis, maxConns)
	s.http = newHTTPServer(s.httpHandler())
	return s, nil
}

// ready: the model and the mesh settings are complete and the server is
// not draining.
func (s *Server) ready() bool { return s.synced() && !s.draining.Load() }

func (s *Server) synced() bool { return s.registry.HasSynced() && s.mesh.HasSynced() }

func (s *Server) debugOptions() debug.Options {
	return debug.Options{Discovery: s.registry, XDS: s.xds, Mesh: func() meshconfig.Status { return s.mesh.Status(s.opts.DomainSuffix) }, Objects: s.opts.ConfigStatus.List,
		PortConflicts: s.registry.PortConflicts, LocalClusterID: s.localClusterID(),
		Consistency: s.opts.Consistency, Clusters: s.opts.Clusters, AllowRemote: s.opts.DebugAllowRemote}
}

// localClusterID is Options.ClusterID or its default.
func (s *Server) localClusterID() string { return cmp.Or(s.opts.ClusterID, model.DefaultClusterID) }

// registrySizes counts what each cluster's registries hold, for the
// registry size gauges.
func (s *Server) registrySizes() map[string]metrics.Size {
	out := map[string]metrics.Size{}
	for _, src := range s.registry.SourceSizes() {
		c := aggregate.SourceCluster(src.Source, s.localClusterID())
		out[c] = metrics.Size{Services: out[c].Services + src.Services, Endpoints: out[c].Endpoints + src.Endpoints}
	}
	return out
}

// logPortConflict logs a port conflict once when it appears or changes,
// and once when it ends; /debug/configz lists those in force.
func (s *Server) logPortConflict(c aggregate.PortConflict, ended bool) {
	if ended {
		s.log.Info("the ports of a service agree again between its sources", "service", c.Hostname)
		return
	}
	s.log.Warn("the ports of a service differ between clusters or sources; the first definition is served (see /debug/configz)",
		"service", c.Hostname, "why", c.Why(func(source string) string { return aggregate.SourceLabel(source, s.localClusterID()) }))
}

// DebugAddr is the address of the debug port; empty when the debug pages
// are served on the HTTP port.
func (s *Server) DebugAddr() string {
	if s.debugLis == nil {
		return ""
	}
	return s.debugLis.Addr().String()
}

// Registry returns the aggregate of the sources: the model the server
// serves.
func (s *Server) Registry() *aggregate.Controller { return s.registry }

// Metrics returns the server's metrics.
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// XDSAddr is the address the xDS server listens on.
func (s *Server) XDSAddr() string { return s.xdsLis.Addr().String() }

// HTTPAddr is the address of the HTTP port.
func (s *Server) HTTPAddr() string { return s.httpLis.Addr().String() }

// XDS returns the xDS server, for tests and debug handlers.
func (s *Server) XDS() *xds.Server { return s.xds }

func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if s.draining.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		if !s.synced() {
			http.Error(w, "the service model or the mesh config is not synced yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", s.metrics.Handler())
	if s.debugHTTP == nil {
		debug.Register(mux, s.debugOptions())
	}
	rest := s.xds.RESTHandler()
	mux.Handle("/v3/discovery:clusters", rest)
	mux.Handle("/v3/discovery:endpoints", rest)
	mux.Handle("/v3/discovery:listeners", rest)
	mux.Handle("/v3/discovery:routes", rest)
	return mux
}

// routeIndex keeps a nil RouteSource a nil interface.
func routeIndex(r RouteSource) model.RouteIndex {
	if r == nil {
		return nil
	}
	return r
}

// securityIndex keeps a nil SecuritySource a nil interface.
func securityIndex(s SecuritySource) model.SecurityIndex {
	if s == nil {
		return nil
	}
	return s
}

// policyIndex keeps a nil PolicySource a nil interface.
func policyIndex(p PolicySource) model.PolicyIndex {
	if p == nil {
		return nil
	}
	return p
}

func (s *Server) onEvent(ev model.Event) {
	// The events of the initial build describe the first model, which no
	// client has seen: streams and REST requests are refused until it is
	// complete, and resources are generated on request. Pushing them would
	// only hold back the first real change behind a debounce window.
	if !s.synced() {
		return
	}
	switch ev.Kind {
	case model.ConfigChanged:
		s.log.Info("config changed", "key", ev.Config)
	case model.EndpointsChanged:
		s.log.Debug("endpoints changed", "service", ev.Hostname)
	case model.ServiceDeleted:
		s.log.Info("service deleted", "service", ev.Hostname)
	default:
		s.log.Info("service changed", "service", ev.Hostname)
	}
	s.debounce.Handle(ev)
}

func (s *Server) push(req push.Request) {
	start := time.Now()
	s.xds.Push(req)
	s.metrics.Pushed(req.Events, time.Since(start))
	s.metrics.Triggered(req.Kinds())
	s.log.Debug("pushed", "services", len(req.Services), "endpointsOnly", len(req.EndpointsOnly),
		"events", req.Events, "sinceFirstEvent", time.Since(req.Start), "took", time.Since(start))
}

// Run serves until ctx ends, then shuts down: /readyz fails and new xDS
// streams are refused at once, existing streams are still served (pushes
// included) for DrainDuration or until none is left, then every listener
// closes. It returns the first error of the registry or a listener.
func (s *Server) Run(ctx context.Context) error {
	// The registry and the debouncer outlive ctx: draining streams still
	// get changes.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	errs := make(chan error, 6)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.registry.Run(runCtx); err != nil {
			errs <- fmt.Errorf("registry: %w", err)
		}
	})
	wg.Go(func() { s.debounce.Run(runCtx) })
	wg.Go(func() {
		if err := s.mesh.Run(runCtx); err != nil {
			errs <- fmt.Errorf("mesh config: %w", err)
		}
	})
	wg.Go(func() {
		if err := s.grpc.Serve(s.xds.Listener(s.xdsLis)); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			errs <- fmt.Errorf("xDS server: %w", err)
		}
	})
	wg.Go(func() {
		if err := s.http.Serve(s.httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("HTTP server: %w", err)
		}
	})
	if s.tls != nil {
		wg.Go(func() { s.tls.follow(runCtx) })
	}
	if s.debugHTTP != nil {
		wg.Go(func() {
			if err := s.debugHTTP.Serve(s.debugLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("debug HTTP server: %w", err)
			}
		})
	}
	s.log.Info("meshpilot serving", "xds", s.XDSAddr(), "http", s.HTTPAddr(), "debug", s.DebugAddr(), "sources", s.registry.Sources())

	var err error
	select {
	case <-ctx.Done():
		err = s.drain(errs)
	case err = <-errs:
	}
	s.draining.Store(true)
	cancel()
	s.grpc.Stop()
	shutdownCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
	_ = s.http.Shutdown(shutdownCtx)
	if s.debugHTTP != nil {
		_ = s.debugHTTP.Shutdown(shutdownCtx)
	}
	done()
	wg.Wait()
	return err
}

// drain refuses new streams and serves the open ones for DrainDuration or
// until they are gone. It returns early with an error of a listener.
func (s *Server) drain(errs <-chan error) error {
	s.draining.Store(true)
	g, e := s.xds.ClientCounts()
	if s.opts.DrainDuration <= 0 || g+e == 0 {
		return nil
	}
	s.log.Info("draining: new xDS streams are refused, open ones are served until they close or the drain ends",
		"streams", g+e, "drainDuration", s.opts.DrainDuration)
	deadline := time.NewTimer(s.opts.DrainDuration)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			g, e := s.xds.ClientCounts()
			s.log.Info("drain over: closing the remaining xDS streams", "streams", g+e)
			return nil
		case err := <-errs:
			return err
		case <-tick.C:
			if g, e := s.xds.ClientCounts(); g+e == 0 {
				s.log.Info("drained: no xDS stream left")
				return nil
			}
		}
	}
}
