package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/meshpilot/meshpilot/internal/cli"
	"github.com/meshpilot/meshpilot/internal/debug"
	"github.com/meshpilot/meshpilot/internal/gwstatus"
	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/kubeclient"
	"github.com/meshpilot/meshpilot/internal/memlimit"
	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/metrics"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/multicluster"
	"github.com/meshpilot/meshpilot/internal/multicluster/clusterstate"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/registry/file"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/replicas"
	"github.com/meshpilot/meshpilot/internal/server"
	"github.com/meshpilot/meshpilot/internal/xds"
)

type serveFlags struct {
	from               string
	kubeconfig         string
	namespaces         []string
	discoverySelectors []string
	domainSuffix       string
	xdsAddr, httpAddr  string
	xdsCert, xdsKey    string
	xdsClientCA        string
	debounceAfter      time.Duration
	debounceMax        time.Duration
	debounceLeading    bool
	workers            int
	debugAddr          string
	debugAllowRemote   bool
	drainDuration      time.Duration
	maxConnAge         time.Duration
	maxConnAgeGrace    time.Duration
	maxClients         int
	maxRequestNames    int
	maxStreamsPerConn  uint32
	maxNewStreamsRate  float64
	streamSendTimeout  time.Duration
	meshConfig         string
	systemNamespace    string
	clusterID          string
	remoteSyncTimeout  time.Duration
	// insecureKubeconfigOptions are the remote kubeconfig credentials
	// allowed although they run commands or read files of meshpilot's.
	insecureKubeconfigOptions []string
	balance                   bool
	systemNamespaceSet        bool // --system-namespace given, not its default
	balanceTolerance          float64
	shedRate                  float64
	auditInterval             time.Duration
	balanceInterval           time.Duration
	shedMinAge                time.Duration
	memoryLimitRatio          float64
	// gatewayControllerName is the controllerName of the route status
	// entries meshpilot writes.
	gatewayControllerName string
}

func newServeCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Watch a Kubernetes cluster and serve its services over xDS",
		Long: `serve watches Services, EndpointSlices, Pods, Nodes and Namespaces of a
Kubernetes cluster and serves them over xDS
(ADS state of the world and delta, per-type services, REST-JSON) to
proxyless gRPC clients and Envoy. Every change is pushed, debounced, to the
clients that need it.

The cluster comes from --kubeconfig, else $KUBECONFIG, else ~/.kube/config,
else the in-cluster service account.

With --from DIR, serve reads Kubernetes manifests (Namespace, Service,
EndpointSlice, Pod, Node, and Istio's DestinationRule, VirtualService,
ServiceEntry and WorkloadEntry; YAML or JSON) from DIR and its subfolders
instead of a cluster, and follows every saved change. A broken file is
logged with its document and field; its last good content stays in force.
An Istio object refused as it would be in a cluster is reported with its
file, line and document.

Mesh-wide settings come, in Istio's MeshConfig format, from --mesh-config
FILE or else, from a cluster, from the "mesh" key of ConfigMap "istio" in
--system-namespace; changes are applied live, and a broken config is
logged with its source and field while the last good one stays in force.
/debug/configz shows the config in force and the fields meshpilot ignores.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "", "serve the Kubernetes manifests of this folder (and its subfolders) instead of a cluster; changes are followed")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	fl.StringSliceVar(&f.namespaces, "namespaces", nil, "watch only these namespaces (comma separated; default all); a remote Secret's annotation meshpilot.io/namespaces, in the same form, replaces it for its clusters")
	fl.StringArrayVar(&f.discoverySelectors, "discovery-selectors", nil,
		"namespace label selector, e.g. 'env=prod,team in (a,b)'; repeatable, a namespace matching any is watched, as is one matching MeshConfig's discoverySelectors (both apply within --namespaces); follows label and MeshConfig changes; a remote Secret's annotation meshpilot.io/discovery-selectors, one selector per line, replaces it for its clusters")
	fl.StringVar(&f.domainSuffix, "domain-suffix", model.DefaultDomainSuffix, "cluster domain that ends every service hostname")
	fl.StringVar(&f.xdsAddr, "xds-addr", ":15010", "gRPC xDS listen address")
	fl.StringVar(&f.httpAddr, "http-addr", ":15014", "HTTP listen address for /healthz, /readyz, /metrics, REST-JSON discovery and (without --debug-addr) /debug/, which answers only loopback callers unless --debug-allow-remote")
	fl.StringVar(&f.debugAddr, "debug-addr", "", "serve /debug/ (registryz, endpointz, syncz, config_dump, pprof) on this address instead of --http-addr, e.g. 127.0.0.1:9876; a loopback address unless --debug-allow-remote")
	fl.BoolVar(&f.debugAllowRemote, "debug-allow-remote", false, "serve /debug/ to callers that are not on loopback, and let --debug-addr listen on any address: the pages then show every service and any client's config, unauthenticated, to whoever reaches the port; without it they answer only loopback (kubectl port-forward) and others get 403")
	fl.DurationVar(&f.drainDuration, "drain-duration", 5*time.Second, "on SIGTERM, how long open xDS streams are still served (readiness fails, new streams are refused) before they are closed")
	fl.DurationVar(&f.maxConnAge, "max-connection-age", 30*time.Minute, "close each xDS connection after about this long so that clients reconnect and spread over replicas; 0 means never")
	fl.DurationVar(&f.maxConnAgeGrace, "max-connection-age-grace", server.DefaultMaxConnectionAgeGrace, "after --max-connection-age, how long open streams may go on before the connection is closed")
	fl.IntVar(&f.maxClients, "max-clients", 0, "most xDS streams this replica serves; beyond it a new stream is refused at once (RESOURCE_EXHAUSTED) so that the client reconnects to another replica; 0 means no cap")
	fl.IntVar(&f.maxRequestNames, "max-request-names", xds.DefaultMaxRequestNames, "most resource names one xDS request may carry (a delta request's subscribe and unsubscribe lists together, and what a delta stream subscribes to of one type); a request beyond it ends its stream with INVALID_ARGUMENT (REST: 400), logged once per client")
	fl.Uint32Var(&f.maxStreamsPerConn, "max-streams-per-connection", server.DefaultMaxStreamsPerConnection, "most xDS streams one client connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); a gRPC client waits for one to end before it opens another, a client that opens one anyway has it reset")
	fl.Float64Var(&f.maxNewStreamsRate, "max-new-streams-per-second", xds.DefaultMaxNewStreamsPerSecond, "most new xDS streams this replica takes a second, evenly paced; a stream that gets no turn within a second is refused (RESOURCE_EXHAUSTED) and its client retries, perhaps on another replica; 0 means no limit")
	fl.DurationVar(&f.streamSendTimeout, "stream-send-timeout", xds.DefaultStreamSendTimeout, "end an xDS stream whose response cannot be written within this long (its client does not read: flow control is exhausted) with DEADLINE_EXCEEDED, logged with the client and type; until then the server holds at most one response per type for it")
	fl.BoolVar(&f.balance, "balance", false, "publish this replica's xDS client count in a Lease of --system-namespace (or the Pod's namespace) and shed the clients it holds beyond its fair share (all replicas' clients / live replicas) so that they reconnect to other replicas")
	fl.Float64Var(&f.balanceTolerance, "balance-tolerance", replicas.DefaultTolerance, "with --balance, how far above the fair share a replica may hold clients before it sheds (0.2: 20 %)")
	fl.Float64Var(&f.shedRate, "shed-rate", replicas.DefaultShedRate, "with --balance, the most xDS streams shed per second (a client's connection is closed, with all its streams)")
	fl.DurationVar(&f.balanceInterval, "balance-interval", replicas.DefaultPeriod, "with --balance, how often the replica renews its Lease with its client count; a replica not renewed for three intervals counts as gone")
	fl.DurationVar(&f.shedMinAge, "shed-min-age", replicas.DefaultMinAge, "with --balance, a client connection whose newest stream opened less than this ago is never shed, so that a client just accepted is not bounced again")
	fl.StringVar(&f.xdsCert, "xds-cert", "", "TLS certificate file for the xDS port; read again when it changes (new connections get the new one, open streams go on)")
	fl.StringVar(&f.xdsKey, "xds-key", "", "TLS key file for the xDS port; read again with --xds-cert")
	fl.StringVar(&f.xdsClientCA, "xds-client-ca", "", "CA file: require and verify client certificates on the xDS port (mTLS); a client is then served only as a node of the namespace of its certificate's SPIFFE ID (spiffe://<trust domain>/ns/<ns>/sa/<sa>), else refused with PermissionDenied; read again when it changes")
	fl.DurationVar(&f.debounceAfter, "debounce-after", push.DefaultDebounceAfter, "with --debounce-leading-edge the shortest time between two pushes, else the quiet period that ends a burst; a deletion (a Service deleted or left without endpoints) always waits this long, so that a delete and create within it (kubectl replace --force, a Helm upgrade) never reach clients as a deletion")
	fl.DurationVar(&f.debounceMax, "debounce-max", push.DefaultDebounceMax, "without --debounce-leading-edge: longest a change waits for a quiet period during a steady stream of changes; always: longest a stream of deletions holds a push back")
	fl.BoolVar(&f.debounceLeading, "debounce-leading-edge", true, "push an isolated change at once and then at most once per --debounce-after, merging what came meanwhile; false: wait for a quiet period of --debounce-after (at most --debounce-max) before every push, as Istio does")
	fl.IntVar(&f.workers, "workers", 2, "goroutines rebuilding services after Kubernetes events")
	fl.StringVar(&f.meshConfig, "mesh-config", "", "Istio MeshConfig file (YAML or JSON) of mesh-wide settings, followed live; default: the ConfigMap istio of --system-namespace (from a cluster), else Istio's defaults")
	fl.StringVar(&f.systemNamespace, "system-namespace", "meshpilot-system", "namespace of ConfigMap istio, whose key mesh holds the MeshConfig (without --mesh-config), and of the remote clusters' Secrets (labelled istio/multiCluster=true)")
	fl.StringVar(&f.clusterID, "cluster-id", "Kubernetes", "ID of the local cluster (Istio's default); a remote Secret naming it is refused")
	fl.DurationVar(&f.remoteSyncTimeout, "remote-sync-timeout", multicluster.DefaultSyncTimeout, "how long a remote cluster's new kubeconfig may take to sync before the previous one is kept; a new remote cluster not synced by then is logged (nothing waits for it)")
	fl.StringSliceVar(&f.insecureKubeconfigOptions, "insecure-multicluster-kubeconfig-options", nil,
		"remote Secrets' kubeconfig credentials to allow although whoever can write a Secret of --system-namespace then runs a command (exec) or sends a file of meshpilot's, such as its own service-account token, to a server of their choice (tokenFile, clientCertificate, clientKey), or uses an auth provider other than oidc (gcp, azure, openstack); comma separated, as istiod's PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS; default none: such a kubeconfig is refused and logged")
	fl.StringVar(&f.gatewayControllerName, "gateway-controller-name", gwstatus.DefaultControllerName, "controllerName of the status.parents entries meshpilot writes on the HTTPRoutes and GRPCRoutes attached to Services (the Gateway API's mesh profile); the replica holding the Lease "+gwstatus.DefaultLeaseName+" of --system-namespace (or the Pod's namespace) alone writes them")
	fl.DurationVar(&f.auditInterval, "audit-interval", 0, "every this long (jittered), compare the informer caches with a fresh LIST and the model with one rebuilt from it (as /debug/consistencyz does), and relist a kind whose difference outlived two audits; 0 means off")
	fl.Float64Var(&f.memoryLimitRatio, "memory-limit-ratio", memlimit.DefaultRatio, "set the Go memory limit to this part of the container's memory limit (cgroup v2 or v1), so that the garbage collector works harder before the container is killed; unless the GOMEMLIMIT environment variable is set, which then stands; no cgroup limit sets nothing; 0 means off")
	return cmd
}

func runServe(cmd *cobra.Command, f serveFlags) error {
	log := cli.Logger(cmd)
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Once the first signal starts the drain, a second one ends the
	// process at once.
	context.AfterFunc(ctx, stop)

	f.systemNamespaceSet = cmd.Flags().Changed("system-namespace")
	// An empty --cluster-id is Istio's default, as the server reads it, so
	// that metrics and pages name the local cluster alike.
	f.clusterID = cmp.Or(f.clusterID, model.DefaultClusterID)
	if f.balanceTolerance < 0 || f.shedRate <= 0 {
		return fmt.Errorf("invalid --balance-tolerance %v or --shed-rate %v: use a tolerance of 0 or more and a rate above 0", f.balanceTolerance, f.shedRate)
	}
	if f.auditInterval < 0 {
		return fmt.Errorf("invalid --audit-interval %v: use 0 (off) or more", f.auditInterval)
	}
	if f.balanceInterval <= 0 || f.shedMinAge <= 0 {
		return fmt.Errorf("invalid --balance-interval %v or --shed-min-age %v: use durations above 0", f.balanceInterval, f.shedMinAge)
	}
	if f.maxClients < 0 {
		return fmt.Errorf("invalid --max-clients %d: use 0 (no cap) or more", f.maxClients)
	}
	if !(f.maxNewStreamsRate >= 0) {
		return fmt.Errorf("invalid --max-new-streams-per-second %v: use 0 (no limit) or more", f.maxNewStreamsRate)
	}
	if f.maxStreamsPerConn == 0 {
		return fmt.Errorf("invalid --max-streams-per-connection 0: use 1 or more")
	}
	if f.streamSendTimeout <= 0 {
		return fmt.Errorf("invalid --stream-send-timeout %v: use a duration above 0", f.streamSendTimeout)
	}
	if f.maxRequestNames <= 0 {
		return fmt.Errorf("invalid --max-request-names %d: use 1 or more", f.maxRequestNames)
	}
	if err := memlimit.CheckRatio(f.memoryLimitRatio); err != nil {
		return fmt.Errorf("--memory-limit-ratio: %w", err)
	}
	if err := gwstatus.CheckControllerName(f.gatewayControllerName); err != nil {
		return fmt.Errorf("--gateway-controller-name: %w", err)
	}
	if f.from != "" {
		for _, name := range []string{"kubeconfig", "namespaces", "discovery-selectors", "workers", "system-namespace", "remote-sync-timeout", "insecure-multicluster-kubeconfig-options", "balance", "audit-interval", "gateway-controller-name"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("--%s applies to a cluster; with --from the folder is the only source", name)
			}
		}
		reg, err := file.New(file.Options{Dir: f.from, DomainSuffix: f.domainSuffix, Logger: log})
		if err != nil {
			return err
		}
		mesh := meshconfig.Default()
		if f.meshConfig != "" {
			if mesh, err = meshconfig.FromFile(f.meshConfig, log); err != nil {
				return err
			}
		}
		mesh.AppendSelectorHandler(func(sels []labels.Selector) {
			if len(sels) > 0 {
				log.Warn("mesh config discoverySelectors apply to a cluster; with --from every namespace of the folder is served")
			}
		})
		// The folder's Istio objects feed the consumers a cluster's feed.
		// A folder's routes have no status to write back.
		istio := istioConsumers(reg.Istio(), mesh, reg, f, gwstatus.Discard, log)
		return serveRegistry(ctx, log, aggregate.Source{Name: "files", Controller: reg}, mesh, istio, f, nil, nil, nil)
	}

	cfg, source, err := kubeclient.Load(f.kubeconfig)
	if err != nil {
		return err
	}
	cfg = kubeclient.Uncompressed(cfg) // its own cluster's API server is near
	if err := kubeclient.Check(ctx, cfg); err != nil {
		return err
	}
	cfg = kubeclient.WithOutageGate(cfg, kubeclient.OutageOptions{Logger: log}) // every client of cfg waits out an outage together
	client, err := kubeapi.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a Kubernetes client from %s: %w", source, err)
	}
	log.Info("connected to Kubernetes", "apiserver", cfg.Host, "config", source)

	mesh := meshconfig.FromConfigMap(client, f.systemNamespace, log)
	if f.meshConfig != "" {
		if mesh, err = meshconfig.FromFile(f.meshConfig, log); err != nil {
			return err
		}
	}
	m := metrics.New()
	opts := kubeOptions(f, mesh, log)
	opts.QueueMetrics = m.WorkqueueProviderFor(f.clusterID)
	opts.OnInformerEvent = m.InformerEventsFor(f.clusterID)
	reg, err := kube.New(client, opts)
	if err != nil {
		return err
	}
	// MeshConfig's discoverySelectors join the flag's, live.
	reg.SetMeshDiscoverySelectors(mesh.DiscoverySelectors())
	mesh.AppendSelectorHandler(reg.SetMeshDiscoverySelectors)
	routeStatus, writeRouteStatus, err := gatewayStatus(cfg, client, f, log, m)
	if err != nil {
		return err
	}
	istioCtx, stopIstio := context.WithCancel(ctx)
	istio, waitIstio, err := runIstioRegistry(istioCtx, cfg, mesh, reg, f, routeStatus, log, m)
	if err != nil {
		stopIstio()
		return err
	}
	defer waitIstio()
	defer stopIstio()
	remotes, err := remoteClusters(client, mesh, f, log, m)
	if err != nil {
		return err
	}
	m.WatchRemoteClusters(remotes.Clusters)
	clusters := clusterz(f.clusterID, cfg.Host, reg.HasSynced, remotes)
	besides := []beside{{name: "remote clusters", run: func(ctx context.Context, srv *server.Server) error {
		return remotes.Run(ctx, srv.Registry())
	}}, writeRouteStatus}
	if f.balance {
		besides = append(besides, beside{name: "replica balance", run: balanceReplicas(client, f, log)})
	}
	auditor, audits, err := consistencyAudit(reg, istio.registry, f, m, log)
	if err != nil {
		return err
	}
	besides = append(besides, audits)
	return serveRegistry(ctx, log, aggregate.Source{Name: aggregate.LocalSource, Controller: reg}, mesh, istio, f, m, kubeclient.NoWaitFunc(auditor.Audit), clusters, besides...)
}

// serveRegistry serves the registry of source with the mesh settings of
// mesh and what istio built from the Istio kinds (its zero value: none);
// m, when not nil, holds metrics the registry already reports to;
// consistency, when not nil, audits the cluster's registry; clusters, when not nil, lists the clusters on
// /debug/clusterz; besides run beside the server until the signal, adding to it at run
// time (remote clusters' sources, replica balance).
func serveRegistry(ctx context.Context, log *slog.Logger, source aggregate.Source, mesh *meshconfig.Watcher, istio istioServing, f serveFlags, m *metrics.Metrics, consistency debug.Consistency, clusters func() []clusterstate.Cluster, besides ...beside) error {
	// Set once every flag and the mesh config have been checked, so that
	// a refused command prints its one sentence and nothing else.
	if _, err := memlimit.Apply(memlimit.Options{Ratio: f.memoryLimitRatio, Logger: log}); err != nil {
		return fmt.Errorf("--memory-limit-ratio: %w", err)
	}
	var ps server.PolicySource
	if istio.policies != nil {
		ps = istio.policies
	}
	var rs server.RouteSource
	if istio.routes != nil {
		rs = istio.routes
	}
	var ss server.SecuritySource
	if istio.security != nil {
		ss = istio.security
	}
	sources := []aggregate.Source{source}
	if istio.serviceEntries != nil {
		sources = append(sources, aggregate.Source{Name: "serviceentries", Controller: istio.serviceEntries})
	}
	srv, err := server.New(server.Options{
		Sources:      sources,
		DomainSuffix: f.domainSuffix,
		ClusterID:    f.clusterID,
		XDSAddr:      f.xdsAddr,
		HTTPAddr:     f.httpAddr,
		XDSCert:      f.xdsCert,
		XDSKey:       f.xdsKey,
		XDSClientCA:  f.xdsClientCA,
		Debounce:     push.Options{DebounceAfter: f.debounceAfter, DebounceMax: f.debounceMax, LeadingEdge: f.debounceLeading},
		Logger:       log,

		DebugAddr:             f.debugAddr,
		DebugAllowRemote:      f.debugAllowRemote,
		DrainDuration:         f.drainDuration,
		MaxConnectionAge:      f.maxConnAge,
		MaxConnectionAgeGrace: f.maxConnAgeGrace,
		MaxClients:            f.maxClients,
		MaxRequestNames:       f.maxRequestNames,
		StreamSendTimeout:     f.streamSendTimeout,
		Metrics:               m,
		Mesh:                  mesh,
		Policies:              ps,
		ConfigStatus:          istio.status,
		Routes:                rs,
		Security:              ss,
		Consistency:           consistency,
		Clusters:              clusters,

		// The bounds on what clients may make a replica hold.
		MaxStreamsPerConnection: f.maxStreamsPerConn,
		MaxNewStreamsPerSecond:  f.maxNewStreamsRate,
	})
	if err != nil {
		return err
	}
	for _, b := range besides {
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := b.run(runCtx, srv); err != nil {
				log.Error(b.name, "error", err)
			}
		}()
		defer func() { cancel(); <-done }()
	}
	return srv.Run(ctx)
}

// beside is a task run beside the server, named for its error.
type beside struct {
	name string
	run  func(context.Context, *server.Server) error
}
