// Package bench measures how fast meshpilot brings a change to every
// proxyless gRPC client and what that costs.
//
// One run starts a real etcd and kube-apiserver (internal/testenv), writes
// a workload of services, ready Pods on zoned Nodes and EndpointSlices,
// starts meshpilot as a child process, opens simulated gRPC clients (raw
// state-of-the-world ADS streams that follow LDS -> RDS -> CDS -> EDS as
// grpc-go does) and measures:
//   - convergence: from each client's stream open to it holding every
//     ClusterLoadAssignment it needs;
//   - churn: from the API write of an EndpointSlice with a new ready
//     endpoint to each subscribed client holding the new address as
//     HEALTHY, from the write's start and from its return (negative when
//     the client had it first; how many did is counted);
//   - meshpilot's CPU time and memory (/proc) after sync, after convergence,
//     after the settle pause and after churn.
//
// Endpoint addresses come from 10.128.0.0/9 and are never dialled.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	istioclient "istio.io/client-go/pkg/clientset/versioned"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/meshpilot/meshpilot/internal/testenv"
)

// Config describes one run.
type Config struct {
	Services   int `json:"services"`
	Namespaces int `json:"namespaces"`
	Endpoints  int `json:"endpoints"`
	Clients    int `json:"clients"`
	PerClient  int `json:"per_client"`
	// StreamsPerConn is how many clients' ADS streams share one
	// connection; 0 derives it (conngroups.go).
	StreamsPerConn int `json:"streams_per_conn"`
	Changes        int `json:"changes"`
	// Rate is changes per second.
	Rate float64 `json:"rate"`
	// Nodes carry the Pods, spread over three zones.
	Nodes int `json:"nodes"`
	// NoPods writes no Pods: Services select nothing and their slices'
	// endpoints carry address, readiness, node and zone but no targetRef,
	// as slices managed by hand; setup makes two writes per service.
	NoPods bool `json:"no_pods,omitempty"`
	// Headless Services get no cluster IP: the API server's allocator
	// (IPAddress objects, Kubernetes 1.33 on) counts every allocated
	// address on each allocation, which at tens of thousands of
	// Services bounds the setup to a few dozen Services a second.
	// meshpilot serves proxyless clients a headless Service as any other.
	Headless bool `json:"headless,omitempty"`
	// Concurrency bounds API writes in flight during setup.
	Concurrency int `json:"concurrency"`
	// MissTimeout: a change a client has not seen this long after its
	// write is a miss.
	MissTimeout time.Duration `json:"miss_timeout_ns"`
	// Settle is the pause between convergence and churn, and between
	// churn and route churn.
	Settle time.Duration `json:"settle_ns"`
	// Timeout bounds the run once meshpilot is built, not counting Soak:
	// the build is bounded by Run's context alone, since how long it takes
	// says nothing about meshpilot and a busy machine takes minutes.
	Timeout time.Duration `json:"timeout_ns"`
	// Soak, when positive, replaces churn: after convergence, endpoints,
	// clients and services change for this long at Rate while meshpilot's
	// memory, goroutines and streams are sampled every SoakSample
	// (soak.go).
	Soak       time.Duration `json:"soak_ns,omitempty"`
	SoakSample time.Duration `json:"soak_sample_ns,omitempty"`
	// Seed makes the choice of services reproducible.
	Seed uint64 `json:"seed"`
	// Meshpilot is the binary to run; empty builds cmd/meshpilot as the
	// Dockerfile does (releaseBuild).
	Meshpilot string `json:"meshpilot"`
	// MeshpilotArgs are passed to `meshpilot serve` after the benchmark's
	// own flags.
	MeshpilotArgs []string `json:"meshpilot_args"`
	// MeshpilotLog keeps meshpilot's output in this file; empty keeps it
	// only when the run fails.
	MeshpilotLog string `json:"meshpilot_log,omitempty"`
	// ProfileDir, when set, receives meshpilot's heap profile after each
	// phase, a CPU profile of the sync phase, of convergence and of churn,
	// and its mutex and block profiles at convergence, from its
	// /debug/pprof/. Heap profiles force a garbage collection in
	// meshpilot, which lowers its later memory figures: take those from
	// runs without profiles.
	ProfileDir string `json:"profile_dir,omitempty"`
	// Prefix of namespace and node names.
	Prefix string `json:"prefix"`
	// TrafficRules gives every service a DestinationRule with two
	// subsets and a VirtualService splitting its traffic between them
	// (rules.go), installing Istio's CRDs first; churn then also changes
	// the weights of routes.
	TrafficRules bool `json:"traffic_rules,omitempty"`
	// SecurityPolicies gives every service an AuthorizationPolicy
	// selecting its Pods and the first Servers services a simulated gRPC
	// server each (security.go), installing Istio's CRDs first; churn
	// then also changes the policies of the served services.
	SecurityPolicies bool `json:"security_policies,omitempty"`
	// GatewayRoutes gives every service an HTTPRoute attached to it
	// (the Gateway API's mesh profile) splitting its traffic by weight
	// between itself and another service of its namespace (gateway.go),
	// installing the Gateway API's CRDs first; churn then also changes
	// the weights of routes, as TrafficRules does with VirtualServices.
	GatewayRoutes bool `json:"gateway_routes,omitempty"`
	// Servers is how many services get a server with SecurityPolicies;
	// DefaultServers when 0.
	Servers int `json:"servers,omitempty"`
	// Clusters above 1 give every further cluster an API server of its
	// own with the same services and as many endpoints, reached through
	// remote Secrets (clusters.go).
	Clusters int `json:"clusters"`
	// Replicas, with a Count above 1, runs that many meshpilot replicas
	// with --balance behind a simulated Service instead of one, restarts
	// one and records clients per replica (replicas.go); there is no
	// churn then.
	Replicas ReplicasConfig `json:"replicas"`
	// Compare, with Binaries, compares meshpilot binaries against one
	// workload, without churn (compare.go).
	Compare CompareConfig `json:"compare"`

	// Env is an API server to use; nil starts one for the run.
	Env *testenv.Env `json:"-"`
	// Log receives progress lines; nil discards them.
	Log io.Writer `json:"-"`
}

// Defaults returns the workload of the issue: 200 services over 10
// namespaces, 5 endpoints each, 100 clients of 5 services, 50 changes at
// 5 per second.
func Defaults() Config {
	return Config{
		Services: 200, Namespaces: 10, Endpoints: 5,
		Clients: 100, PerClient: 5,
		Changes: 50, Rate: 5,
		Nodes: 6, Concurrency: 32,
		MissTimeout: 10 * time.Second, Settle: 2 * time.Second, Timeout: 15 * time.Minute,
		Seed: 1, Prefix: "bench", Clusters: 1, Replicas: DefaultReplicas(), Compare: DefaultCompare(),
		SoakSample: 10 * time.Second,
	}
}

func (c *Config) validate() error {
	var errs []error
	positive := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, not %d", name, v))
		}
	}
	positive("services", c.Services)
	positive("namespaces", c.Namespaces)
	positive("endpoints", c.Endpoints)
	positive("clients", c.Clients)
	positive("per-client", c.PerClient)
	if c.StreamsPerConn < 0 {
		errs = append(errs, fmt.Errorf("streams-per-conn must not be negative, not %d", c.StreamsPerConn))
	}
	positive("nodes", c.Nodes)
	positive("concurrency", c.Concurrency)
	if c.Changes < 0 {
		errs = append(errs, fmt.Errorf("changes must not be negative, not %d", c.Changes))
	}
	if c.PerClient > c.Services {
		errs = append(errs, fmt.Errorf("per-client (%d) must not exceed services (%d)", c.PerClient, c.Services))
	}
	if c.Namespaces > c.Services {
		errs = append(errs, fmt.Errorf("namespaces (%d) must not exceed services (%d)", c.Namespaces, c.Services))
	}
	if c.Changes > 0 && c.Rate <= 0 {
		errs = append(errs, fmt.Errorf("rate must be positive, not %g", c.Rate))
	}
	if c.MissTimeout <= 0 || c.Timeout <= 0 || c.Settle < 0 {
		errs = append(errs, errors.New("timeouts must be positive"))
	}
	errs = append(errs, c.Replicas.validate()...)
	errs = append(errs, c.validateCompare()...)
	if c.Replicas.Count > 1 && c.Clusters > 1 {
		errs = append(errs, errors.New("replicas and clusters do not go together"))
	}
	if c.Clusters < 1 || c.Clusters > maxClusters {
		errs = append(errs, fmt.Errorf("clusters must be between 1 and %d, not %d", maxClusters, c.Clusters))
	} else if c.Clusters > 1 && c.Services*c.Endpoints+c.Changes >= 1<<clusterAddrBits {
		errs = append(errs, fmt.Errorf("with several clusters, services x endpoints + changes must stay below %d (each cluster's address range)", 1<<clusterAddrBits))
	}
	if c.NoPods && c.TrafficRules {
		errs = append(errs, errors.New("traffic rules' subsets select Pods' labels: they need Pods"))
	}
	if c.NoPods && c.SecurityPolicies {
		errs = append(errs, errors.New("security policies select Pods' labels: they need Pods"))
	}
	if c.GatewayRoutes && c.TrafficRules {
		errs = append(errs, errors.New("gateway routes and traffic rules would route the same hosts: choose one"))
	}
	if c.GatewayRoutes && c.Services < 2*c.Namespaces {
		errs = append(errs, fmt.Errorf("gateway routes split each service's traffic with another of its namespace: services (%d) must be at least twice the namespaces (%d)", c.Services, c.Namespaces))
	}
	if c.Servers < 0 {
		errs = append(errs, fmt.Errorf("servers must not be negative, not %d", c.Servers))
	}
	if c.Soak < 0 || (c.Soak > 0 && (c.Rate <= 0 || c.SoakSample <= 0 || c.SoakSample > c.Soak)) {
		errs = append(errs, errors.New("a soak needs a positive rate and a sample interval no longer than itself"))
	}
	if c.Soak > 0 && c.Replicas.Count > 1 {
		errs = append(errs, errors.New("a soak runs one replica"))
	}
	if c.Prefix == "" {
		errs = append(errs, errors.New("prefix must not be empty"))
	}
	return errors.Join(errs...)
}

// Run runs the benchmark and stops everything it started before it
// returns, also when ctx ends early.
func Run(ctx context.Context, cfg Config) (res *Result, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	begin := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(logw, "[%6.1fs] "+format+"\n", append([]any{time.Since(begin).Seconds()}, args...)...)
	}
	res = &Result{Config: cfg, Machine: machine(), Started: begin.UTC()}

	workDir, err := os.MkdirTemp("", "meshbench-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err == nil {
			os.RemoveAll(workDir)
		} else {
			// Keep meshpilot's log for the failure, not the binary; the
			// folder goes when it holds nothing else.
			os.Remove(filepath.Join(workDir, "meshpilot"))
			os.Remove(workDir)
		}
	}()

	// Before the build and the workload, which at scale takes many minutes.
	for _, b := range cfg.Compare.Binaries {
		if _, err := os.Stat(b.Path); err != nil {
			return nil, fmt.Errorf("a meshpilot binary to compare: %w", err)
		}
	}
	bin := cfg.Meshpilot
	if bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("the meshpilot binary: %w", err)
		}
	} else {
		// The binary as the image ships it: what a cluster runs, and
		// what its RSS is judged by (its pages are a third of it).
		logf("building meshpilot (%s)", releaseBuild.name)
		if bin, err = buildMeshpilot(ctx, workDir, releaseBuild); err != nil {
			return nil, err
		}
		res.MeshpilotBuild = releaseBuild.name
	}
	res.Meshpilot = bin
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.Timeout+cfg.Soak, fmt.Errorf("the run took longer than --timeout %s (plus --soak)", cfg.Timeout))
	defer cancel()

	env := cfg.Env
	if env == nil {
		logf("starting etcd and kube-apiserver")
		if env, err = testenv.Start(); err != nil {
			return nil, err
		}
		defer func() {
			logf("stopping kube-apiserver and etcd")
			if serr := env.Stop(); serr != nil {
				logf("stopping the API server: %v", serr)
			}
		}()
	}

	// Setup: clients allowed to write fast, kubeWriter for the built-in
	// kinds, rc for Istio's.
	rc := fastWrites(env.Config)
	kc, err := kubeWriter(env.Config)
	if err != nil {
		return nil, err
	}
	w := newWorkload(kc, &cfg)
	logf("writing %d services over %d namespaces, %d endpoints each, on %d nodes", cfg.Services, cfg.Namespaces, cfg.Endpoints, cfg.Nodes)
	t0 := time.Now()
	res.meter = newCPUMeter()
	stopReport := w.reportSetup(30*time.Second, logf)
	err = w.setup(ctx)
	stopReport()
	if err != nil {
		return nil, fmt.Errorf("writing the workload (%d of %d writes made): %w", w.writes.Load(), w.setupWrites(), err)
	}
	if cfg.TrafficRules || cfg.SecurityPolicies {
		logf("installing Istio's CRDs")
		crds, err := testenv.IstioCRDs()
		if err != nil {
			return nil, err
		}
		if _, err := env.InstallCRDs(crds); err != nil {
			return nil, err
		}
		ic, err := istioclient.NewForConfig(rc)
		if err != nil {
			return nil, err
		}
		if cfg.TrafficRules {
			logf("a DestinationRule and a VirtualService per service")
			if err := w.writeRules(ctx, ic); err != nil {
				return nil, fmt.Errorf("writing the traffic rules: %w", err)
			}
		}
		if cfg.SecurityPolicies {
			logf("an AuthorizationPolicy per service")
			if err := w.writeAuthzPolicies(ctx, ic); err != nil {
				return nil, fmt.Errorf("writing the security policies: %w", err)
			}
		}
	}
	if cfg.GatewayRoutes {
		logf("installing the Gateway API's CRDs; an HTTPRoute per service")
		crds, err := testenv.GatewayAPICRDs("standard")
		if err != nil {
			return nil, err
		}
		if _, err := env.InstallCRDs(crds); err != nil {
			return nil, err
		}
		gc, err := gatewayclient.NewForConfig(rc)
		if err != nil {
			return nil, err
		}
		if err := w.writeGatewayRoutes(ctx, gc); err != nil {
			return nil, fmt.Errorf("writing the HTTPRoutes: %w", err)
		}
	}
	var remotes remoteClusters
	if cfg.Clusters > 1 {
		var stopRemotes func()
		remotes, stopRemotes, err = startRemoteClusters(ctx, &cfg, kc, logf)
		defer stopRemotes()
		if err != nil {
			return nil, err
		}
	}
	res.Setup = newSetupResult(w.writes.Load()+remotes.writes(), time.Since(t0), res.meter.lap())
	logf("wrote %d objects in %.2fs (%.0f/s%s)", res.Setup.Writes, res.Setup.Seconds, res.Setup.WritesPerSecond, busiestNote(res.Setup.Processes))

	if cfg.Replicas.Count > 1 {
		res.Replicas, res.SyncSeconds, err = runReplicas(ctx, replicaRun{cfg: &cfg, kubeconfig: env.Kubeconfig, kc: kc,
			bin: bin, workload: w, logDir: workDir, logf: logf})
		if err != nil {
			return nil, err
		}
		res.Seconds = time.Since(begin).Seconds()
		return res, nil
	}

	// meshpilot.
	serveArgs := cfg.MeshpilotArgs
	if cfg.Meshpilot == "" {
		// The benchmark measures how fast meshpilot serves its clients
		// all arriving at once, not the pace --max-new-streams-per-second
		// sets for a herd (its default would refuse most of --clients
		// 10000, and a refused client ends the run). A binary given by
		// --meshpilot may predate the flag: pass it with --meshpilot-arg.
		serveArgs = append([]string{"--max-new-streams-per-second=0"}, cfg.MeshpilotArgs...)
	}
	serve := serveRun{cfg: &cfg, kubeconfig: env.Kubeconfig, bin: bin, args: serveArgs,
		profileDir: cfg.ProfileDir, workload: w, remotes: remotes, res: res, logf: logf}
	if len(cfg.Compare.Binaries) > 0 {
		res.Compare, err = runCompare(ctx, compareRun{serve: serve, build: res.MeshpilotBuild, logDir: workDir})
		if err != nil {
			return nil, err
		}
		res.Seconds = time.Since(begin).Seconds()
		return res, nil
	}
	serve.logPath, serve.keepLog = cfg.MeshpilotLog, cfg.MeshpilotLog != ""
	if serve.logPath == "" {
		serve.logPath = filepath.Join(workDir, "meshpilot.log")
	}
	sv, err := serveAndConverge(ctx, serve)
	if err != nil {
		return nil, err
	}
	defer func() { err = sv.stop(err) }()
	proc, tr, rng, byService, clientErrs, prof := sv.proc, sv.tracker, sv.rng, sv.byService, sv.clientErrs, sv.prof

	if cfg.Soak > 0 {
		// meshpilot debounces the events of its initial sync like any
		// burst; the soak starts after that push, as churn does.
		select {
		case <-time.After(cfg.Settle):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		res.snapshot(proc, "settled")
		soak, err := runSoak(ctx, soakRun{
			churnRun:   churnRun{workload: w, tracker: tr, rng: rng, subscribed: subscribedServices(byService), cfg: &cfg, clientErrs: clientErrs},
			proc:       proc,
			metricsURL: "http://" + sv.httpAddr + "/metrics",
			clients:    sv.clients,
			newClient:  sv.newClient,
			logf:       logf,
		})
		if err != nil {
			return nil, err
		}
		res.Soak = soak
		res.snapshot(proc, "soak")
	}

	// Churn.
	if cfg.Changes > 0 && cfg.Soak == 0 {
		subscribed := subscribedServices(byService)
		// meshpilot debounces the events of its initial sync like any
		// burst; churn starts after that push, in a steady state.
		select {
		case <-time.After(cfg.Settle):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		// The pause's CPU time (that push, profiles) is not churn's.
		res.snapshot(proc, "settled")
		logf("churn: %d endpoint additions at %g/s", cfg.Changes, cfg.Rate)
		waitChurnProfile := prof.cpu(ctx, time.Duration(float64(cfg.Changes)/cfg.Rate*float64(time.Second)), "cpu-churn.pb.gz")
		churn, err := runChurn(ctx, churnRun{workload: w, clusters: remotes.workloads(w), tracker: tr, rng: rng, subscribed: subscribed, cfg: &cfg, clientErrs: clientErrs})
		if err != nil {
			return nil, err
		}
		if len(remotes) > 0 {
			churn.ByCluster = churnByCluster(churn, remotes.ids(cfg.MeshpilotArgs))
		}
		res.Churn = churn
		res.snapshot(proc, "churn")
		waitChurnProfile()
		prof.fetch(ctx, "heap?gc=1", "heap-churn.pb.gz")
		prof.selfHeap("meshbench-heap-churn.pb.gz")
		logf("churn: %d (client, change) pairs: from the write's start p50 %.1f ms, p99 %.1f ms; from its return p50 %.1f ms, p99 %.1f ms (%d seen before it returned); %d misses",
			churn.Pairs, churn.FromWriteStart.P50MS, churn.FromWriteStart.P99MS, churn.P50MS, churn.P99MS, churn.BeforeWriteReturned, churn.Misses)
		if cfg.TrafficRules || cfg.GatewayRoutes {
			// The same pause as before churn: the first route change
			// should not land in the debounce window of churn's last
			// push, which would delay it by that window.
			select {
			case <-time.After(cfg.Settle):
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			logf("route churn: %d route weight changes at %g/s", cfg.Changes, cfg.Rate)
			rch, err := runRouteChurn(ctx, churnRun{workload: w, tracker: tr, rng: rng, subscribed: subscribed, cfg: &cfg, clientErrs: clientErrs})
			if err != nil {
				return nil, err
			}
			res.RouteChurn = rch
			res.snapshot(proc, "route-churn")
			logf("route churn: %d (client, change) pairs: from the write's start p50 %.1f ms, p99 %.1f ms; from its return p50 %.1f ms, p99 %.1f ms; %d misses",
				rch.Pairs, rch.FromWriteStart.P50MS, rch.FromWriteStart.P99MS, rch.P50MS, rch.P99MS, rch.Misses)
		}
		if cfg.SecurityPolicies {
			if err := runServersPhase(ctx, sv, w, res, logf); err != nil {
				return nil, err
			}
		}
	}
	if err := proc.alive(); err != nil {
		return nil, err
	}
	select {
	case err := <-clientErrs:
		return nil, err
	default:
	}
	res.XDS = XDSTraffic{Responses: map[string]int64{}, Bytes: map[string]int64{}}
	for t, name := range []string{"lds", "rds", "cds", "eds"} {
		res.XDS.Responses[name] = sv.stats.responses[t].Load()
		res.XDS.Bytes[name] = sv.stats.bytes[t].Load()
	}
	res.XDS.Ignored = sv.stats.ignored.Load()
	res.Seconds = time.Since(begin).Seconds()
	return res, nil
}

// serveRun says how serveAndConverge starts meshpilot and its clients.
type serveRun struct {
	cfg        *Config
	kubeconfig string
	bin        string
	// args follow serve's own flags for the API server and addresses.
	args    []string
	logPath string
	// keepLog names meshpilot's log when the run ends well too.
	keepLog bool
	// profileDir, when set, receives the profiles (Config.ProfileDir).
	profileDir string
	workload   *workload
	remotes    remoteClusters
	// res receives the time to ready, the phases "sync" and "converged"
	// and the convergence.
	res  *Result
	logf func(string, ...any)
}

// serving is meshpilot ready with every client converged on it: what
// churn and a soak go on from, and what a compare run measures and
// stops.
type serving struct {
	proc       *process
	xdsAddr    string
	httpAddr   string
	prof       *profiler
	tracker    *tracker
	rng        *rand.Rand // chose the clients' services; churn goes on with it
	byService  [][]int    // clients subscribed to each service
	clients    *fleet
	clientErrs chan error
	stats      *clientStats
	// newClient is client c as it starts, and restarts in a soak.
	newClient func(c int) *adsClient

	stopClients context.CancelFunc // nil until the clients start
	logPath     string
	keepLog     bool
	logf        func(string, ...any)
}

// serveAndConverge starts meshpilot, waits for its /readyz (and every
// remote cluster's endpoints), opens every client and waits for all of
// them to converge. On an error it stops what it started.
func serveAndConverge(ctx context.Context, r serveRun) (_ *serving, err error) {
	cfg, res, w, logf := r.cfg, r.res, r.workload, r.logf
	xdsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--kubeconfig", r.kubeconfig, "--xds-addr", xdsAddr, "--http-addr", httpAddr}, r.args...)
	res.MeshpilotArgs = args
	logf("starting %s %s", r.bin, strings.Join(args, " "))
	t0 := time.Now()
	proc, err := startProcess(r.bin, args, r.logPath)
	if err != nil {
		return nil, err
	}
	s := &serving{proc: proc, httpAddr: httpAddr, xdsAddr: xdsAddr, logPath: r.logPath, keepLog: r.keepLog, logf: logf}
	defer func() {
		if err != nil {
			err = s.stop(err)
		}
	}()
	// The sync phase's CPU profile: from as soon as meshpilot's HTTP
	// port answers, for about the time its sync takes (a second per
	// thousand services); the clients wait for it to end, since Go takes
	// one CPU profile at a time.
	waitSyncProfile := func() {}
	if r.profileDir != "" {
		if err := os.MkdirAll(r.profileDir, 0o755); err != nil {
			return nil, err
		}
		early := &profiler{base: "http://" + debugAddr(r.args, httpAddr), dir: r.profileDir, logf: logf}
		if err := proc.awaitListening(ctx, early.base+"/debug/pprof/"); err != nil {
			return nil, err
		}
		waitSyncProfile = early.cpu(ctx, max(2*time.Second, time.Duration(cfg.Services)*time.Millisecond), "cpu-sync.pb.gz")
	}
	if err := proc.awaitReady(ctx, "http://"+httpAddr+"/readyz"); err != nil {
		return nil, err
	}
	res.SyncSeconds = time.Since(t0).Seconds()
	waitSyncProfile()
	res.metricsURL = "http://" + httpAddr + "/metrics"
	logf("meshpilot ready in %.2fs", res.SyncSeconds)
	if len(r.remotes) > 0 {
		if err := r.remotes.await(ctx, "http://"+httpAddr+"/metrics", cfg.Clusters*cfg.Services*cfg.Endpoints, 2*time.Minute); err != nil {
			return nil, err
		}
		res.RemoteSyncSeconds = time.Since(t0).Seconds()
		logf("every remote cluster's endpoints in meshpilot's model %.2fs after its start", res.RemoteSyncSeconds)
	}
	res.snapshot(proc, "sync")
	if r.profileDir != "" {
		if err := os.MkdirAll(r.profileDir, 0o755); err != nil {
			return nil, err
		}
		s.prof = &profiler{base: "http://" + debugAddr(r.args, httpAddr), dir: r.profileDir, logf: logf}
		s.prof.fetch(ctx, "heap?gc=1", "heap-sync.pb.gz")
	}

	// Clients.
	tr := newTracker(cfg.Clients)
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	subs := make([][]int, cfg.Clients) // services of each client
	byService := make([][]int, len(w.services))
	for c := range cfg.Clients {
		subs[c] = rng.Perm(len(w.services))[:cfg.PerClient]
		for _, i := range subs[c] {
			byService[i] = append(byService[i], c)
		}
	}
	tr.byService = byService
	clientCtx, stopClients := context.WithCancel(ctx)
	clientErrs := make(chan error, cfg.Clients)
	groups := newConnGroups(cfg.Clients, cfg.StreamsPerConn)
	clients := newFleet(clientCtx, xdsAddr, cfg.Clients, groups, clientErrs)
	stats := &clientStats{}
	s.tracker, s.rng, s.byService, s.clients, s.clientErrs, s.stats, s.stopClients = tr, rng, byService, clients, clientErrs, stats, stopClients
	logf("opening %d ADS streams, %d services each, on %d connections", cfg.Clients, cfg.PerClient, groups.conns(cfg.Clients))
	s.newClient = func(c int) *adsClient {
		var names []string
		for _, i := range subs[c] {
			names = append(names, w.services[i].listenerName())
		}
		cl := newADSClient(c, w.namespace(c%cfg.Namespaces), names, tr, stats)
		cl.wantEndpoints = cfg.Clusters * cfg.Endpoints
		return cl
	}
	first := make([]*adsClient, cfg.Clients)
	for c := range cfg.Clients {
		first[c] = s.newClient(c)
	}
	// Convergence takes well under a second for a hundred clients and
	// about 2 s for a thousand on a mesh of 10 000 services: 4 ms a
	// client covers it, at least 2 s.
	waitConvProfile := s.prof.cpu(ctx, max(2*time.Second, time.Duration(cfg.Clients)*4*time.Millisecond), "cpu-converge.pb.gz")
	if s.prof != nil {
		time.Sleep(100 * time.Millisecond) // let the profile start
	}
	convStart := time.Now()
	for _, cl := range first {
		if err := clients.start(cl); err != nil {
			return nil, err
		}
	}
	convTimeout := time.NewTimer(max(cfg.MissTimeout, 30*time.Second+time.Duration(cfg.Clients)*20*time.Millisecond))
	defer convTimeout.Stop()
	select {
	case <-tr.allConverged:
	case err := <-clientErrs:
		return nil, fmt.Errorf("during convergence: %w", err)
	case <-convTimeout.C:
		return nil, fmt.Errorf("only %d of %d clients converged in time", tr.convergedCount(), cfg.Clients)
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	res.Convergence = tr.convergence(first, convStart)
	res.Convergence.Connections = clients.connections()
	res.snapshot(proc, "converged")
	waitConvProfile()
	s.prof.fetch(ctx, "heap?gc=1", "heap-converged.pb.gz")
	// Where meshpilot waited, since its start: empty unless it records
	// contention (a build with runtime.SetMutexProfileFraction and
	// SetBlockProfileRate set).
	s.prof.fetch(ctx, "mutex", "mutex-converged.pb.gz")
	s.prof.fetch(ctx, "block", "block-converged.pb.gz")
	s.prof.selfHeap("meshbench-heap-converged.pb.gz")
	logf("all %d clients converged in %.0f ms (per client p50 %.0f ms, p99 %.0f ms)",
		cfg.Clients, res.Convergence.AllMS, res.Convergence.P50MS, res.Convergence.P99MS)
	if err := proc.alive(); err != nil {
		return nil, err
	}
	return s, nil
}

// stop ends the clients, then meshpilot, and returns err, or else
// meshpilot's failure to stop cleanly.
func (s *serving) stop(err error) error {
	if s.stopClients != nil {
		s.stopClients()
		s.clients.wait()
	}
	if serr := s.proc.stop(10 * time.Second); serr != nil {
		s.logf("%v", serr)
		if err == nil {
			err = serr
		}
	}
	if err != nil || s.keepLog {
		s.logf("meshpilot's log is in %s", s.logPath)
	}
	return err
}

// churnRun is what the churn phase works with.
type churnRun struct {
	workload *workload
	// clusters are every cluster's workload, workload first: endpoint
	// churn goes through them in turn.
	clusters []*workload
	tracker  *tracker
	rng      *rand.Rand
	// subscribed are the indexes of the services some client watches:
	// only they change.
	subscribed []int
	cfg        *Config
	// clientErrs carries the simulated clients' failures, which end the
	// run.
	clientErrs chan error
}

// runChurn adds one endpoint to a random subscribed service per tick, in
// each cluster in turn, and waits for every subscribed client to hold it,
// or for the miss timeout.
//
// The Pod of each change (create and status) is written ahead, while the
// previous change's slice is written, so that slice writes keep the rate
// whatever the Pod writes cost: the Pod is ready before its endpoint
// appears, as in a cluster.
func runChurn(ctx context.Context, r churnRun) (*ChurnResult, error) {
	tr, rng, subscribed, cfg, clientErrs := r.tracker, r.rng, r.subscribed, r.cfg, r.clientErrs
	clusters := r.clusters
	if len(clusters) == 0 {
		clusters = []*workload{r.workload}
	}
	type prepared struct {
		w   *workload
		svc *service
		ep  discoveryv1.Endpoint
		err error
	}
	prepare := func(w *workload, svc *service) chan prepared {
		out := make(chan prepared, 1)
		go func() {
			ep, err := w.newEndpoint(ctx, svc)
			out <- prepared{w, svc, ep, err}
		}()
		return out
	}
	picked := 0
	pick := func() (*workload, *service) {
		w := clusters[picked%len(clusters)]
		picked++
		return w, w.services[subscribed[rng.IntN(len(subscribed))]]
	}

	interval := time.Duration(float64(time.Second) / cfg.Rate)
	ph := newChurnPhase(tr, cfg)
	next := prepare(pick())
	var p prepared
	select {
	case p = <-next:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	ph.begin()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range cfg.Changes {
		if i > 0 {
			select {
			case <-tick.C:
			case err := <-clientErrs:
				return ph.abort(fmt.Errorf("during churn: %w", err))
			case <-ctx.Done():
				return ph.abort(context.Cause(ctx))
			}
			select {
			case p = <-next:
			case <-ctx.Done():
				return ph.abort(context.Cause(ctx))
			}
		}
		if p.err != nil {
			ph.fail(p.err)
			break
		}
		if i+1 < cfg.Changes {
			next = prepare(pick())
		}
		cur := p
		ph.change(ctx, i, cur.svc.idx, func(expect func(key string)) (time.Time, error) {
			return cur.w.appendEndpoint(ctx, cur.svc, cur.ep, func() { expect(cur.ep.Addresses[0]) })
		})
	}
	return ph.result(ctx, r.workload.services)
}

// runRouteChurn changes the weights of one subscribed service's
// VirtualService per tick, going through the subscribed services in a
// random order so that no change lands on a service whose last change is
// still being pushed, and waits for every subscribed client to hold the
// route with the new weights, or for the miss timeout.
func runRouteChurn(ctx context.Context, r churnRun) (*ChurnResult, error) {
	w, cfg := r.workload, r.cfg
	order := r.rng.Perm(len(r.subscribed))
	ph := newChurnPhase(r.tracker, cfg)
	ph.begin()
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate))
	defer tick.Stop()
	for i := range cfg.Changes {
		if i > 0 {
			select {
			case <-tick.C:
			case err := <-r.clientErrs:
				return ph.abort(fmt.Errorf("during route churn: %w", err))
			case <-ctx.Done():
				return ph.abort(context.Cause(ctx))
			}
		}
		svc := w.services[r.subscribed[order[i%len(order)]]]
		ph.change(ctx, i, svc.idx, func(expect func(key string)) (time.Time, error) {
			if cfg.GatewayRoutes {
				return w.setRouteWeights(ctx, svc, expect)
			}
			return w.setWeights(ctx, svc, expect)
		})
	}
	return ph.result(ctx, w.services)
}

// churnPhase makes the changes of one churn phase, each followed in the
// background until every subscribed client has seen it, and collects
// them.
type churnPhase struct {
	tr      *tracker
	cfg     *Config
	start   time.Time
	wg      sync.WaitGroup
	mu      sync.Mutex // guards errs
	errs    []error
	changes []*change // by index; each written by its own goroutine
}

func newChurnPhase(tr *tracker, cfg *Config) *churnPhase {
	return &churnPhase{tr: tr, cfg: cfg, changes: make([]*change, cfg.Changes)}
}

// begin marks the start of the phase, from which changes are timed.
func (p *churnPhase) begin() { p.start = time.Now() }

// change makes the i-th change, of service svc, with write in the
// background (tracker.track).
func (p *churnPhase) change(ctx context.Context, i, svc int, write func(expect func(key string)) (time.Time, error)) {
	p.wg.Go(func() {
		ch, err := p.tr.track(ctx, svc, p.cfg.MissTimeout, write)
		if err != nil {
			p.fail(err)
			return
		}
		p.changes[i] = ch
	})
}

func (p *churnPhase) fail(err error) {
	p.mu.Lock()
	p.errs = append(p.errs, err)
	p.mu.Unlock()
}

// abort waits for the changes in flight and returns err.
func (p *churnPhase) abort(err error) (*ChurnResult, error) {
	p.wg.Wait()
	return nil, err
}

// result waits for every change and returns the phase's figures.
func (p *churnPhase) result(ctx context.Context, services []*service) (*ChurnResult, error) {
	p.wg.Wait()
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return p.tr.churn(p.changes, services, p.start, p.cfg.MissTimeout), nil
}

// track makes one change of a service with write and waits until every
// client subscribed to the service has seen it, or for missTimeout. write
// calls expect with the key clients will report (observe) just before it
// writes, so that no sighting is lost, and returns when its write
// returned.
func (t *tracker) track(ctx context.Context, service int, missTimeout time.Duration, write func(expect func(key string)) (time.Time, error)) (*change, error) {
	var ch *change
	written, err := write(func(key string) { ch = t.expect(key, service) })
	if err != nil {
		return nil, err
	}
	t.written(ch, written)
	select {
	case <-ch.done:
	case <-time.After(missTimeout):
	case <-ctx.Done():
	}
	return ch, nil
}

// tracker collects convergence and the clients' sightings of new
// addresses and routes.
type tracker struct {
	mu           sync.Mutex // guards every field below
	byService    [][]int    // clients subscribed to each service
	convergedAt  []time.Time
	nConverged   int
	allConverged chan struct{}
	pending      map[string]*change // by address
}

type change struct {
	addr       string
	service    int
	expected   []int
	writeStart time.Time
	writeDone  time.Time
	seen       map[int]time.Time
	done       chan struct{}
}

func newTracker(clients int) *tracker {
	return &tracker{
		convergedAt:  make([]time.Time, clients),
		allConverged: make(chan struct{}),
		pending:      map[string]*change{},
	}
}

func (t *tracker) converged(id int, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.convergedAt[id].IsZero() {
		return
	}
	t.convergedAt[id] = at
	t.nConverged++
	if t.nConverged == len(t.convergedAt) {
		close(t.allConverged)
	}
}

func (t *tracker) convergedCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nConverged
}

// expect registers a change before its write, so that no sighting is lost.
func (t *tracker) expect(addr string, service int) *change {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch := &change{addr: addr, service: service, expected: t.byService[service],
		writeStart: time.Now(), seen: map[int]time.Time{}, done: make(chan struct{})}
	t.pending[addr] = ch
	if len(ch.expected) == 0 {
		close(ch.done)
	}
	return ch
}

func (t *tracker) written(ch *change, at time.Time) {
	t.mu.Lock()
	ch.writeDone = at
	t.mu.Unlock()
}

func (t *tracker) observe(id int, addr string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch := t.pending[addr]
	if ch == nil {
		return
	}
	if _, ok := ch.seen[id]; ok {
		return
	}
	// A client that does not watch the service may still see its
	// endpoints (a route of another service sends it part of its
	// traffic): it is no pair of the change.
	if !slices.Contains(ch.expected, id) {
		return
	}
	ch.seen[id] = at
	n := 0
	for _, c := range ch.expected {
		if _, ok := ch.seen[c]; ok {
			n++
		}
	}
	if n == len(ch.expected) && n > 0 {
		close(ch.done)
	}
}

func (t *tracker) convergence(clients []*adsClient, start time.Time) ConvergenceResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	var per []time.Duration
	var last time.Time
	for i, c := range clients {
		at := t.convergedAt[i]
		per = append(per, at.Sub(c.opened))
		if at.After(last) {
			last = at
		}
	}
	d := newDist(per)
	return ConvergenceResult{Clients: len(clients), AllMS: ms(last.Sub(start)), P50MS: d.p(50), P99MS: d.p(99), MaxMS: d.p(100)}
}

func (t *tracker) churn(changes []*change, services []*service, start time.Time, missTimeout time.Duration) *ChurnResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &ChurnResult{Changes: len(changes), Seconds: time.Since(start).Seconds()}
	var lat, fromStart, writes []time.Duration
	for _, ch := range changes {
		rec := ChangeRecord{
			Service: services[ch.service].hostname, Address: ch.addr,
			StartMS: ms(ch.writeStart.Sub(start)), WriteMS: ms(ch.writeDone.Sub(ch.writeStart)),
		}
		writes = append(writes, ch.writeDone.Sub(ch.writeStart))
		for _, c := range ch.expected {
			r.Pairs++
			at, ok := ch.seen[c]
			d := at.Sub(ch.writeDone)
			if !ok || d > missTimeout {
				r.Misses++
				rec.FromStartMS = append(rec.FromStartMS, -1)
				continue
			}
			fromStart = append(fromStart, at.Sub(ch.writeStart))
			rec.FromStartMS = append(rec.FromStartMS, ms(at.Sub(ch.writeStart)))
			// The API server tells its watchers while its reply to the
			// writer is still on the way: a client may hold the change
			// before the write returns. Its latency stays negative.
			if d < 0 {
				r.BeforeWriteReturned++
			}
			lat = append(lat, d)
		}
		r.PerChange = append(r.PerChange, rec)
		delete(t.pending, ch.addr)
	}
	d := newDist(lat)
	r.P50MS, r.P90MS, r.P99MS, r.MaxMS, r.MeanMS = d.p(50), d.p(90), d.p(99), d.p(100), d.mean()
	r.FromWriteStart = percentiles(fromStart)
	r.SliceWrite = percentiles(writes)
	return r
}

type dist []time.Duration

func newDist(d []time.Duration) dist {
	slices.Sort(d)
	return d
}

// p is the nearest-rank percentile in milliseconds; 0 when empty.
func (d dist) p(q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	i := int(q/100*float64(len(d))+0.999999) - 1
	return ms(d[min(max(i, 0), len(d)-1)])
}

func (d dist) mean() float64 {
	if len(d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return ms(sum / time.Duration(len(d)))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return m
}
