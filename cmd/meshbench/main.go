// Command meshbench measures how fast meshpilot brings an endpoint change
// to every proxyless gRPC client and what it costs: it starts a real etcd
// and kube-apiserver, writes a workload, runs meshpilot as a child process,
// opens simulated gRPC xDS clients and churns endpoints. See internal/bench.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/meshpilot/meshpilot/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := newCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "meshbench: %v\n", err)
		os.Exit(1)
	}
}

// rate is a number of changes per second: "5", "5/s" or "0.5/s".
type rate float64

func (r *rate) String() string { return strconv.FormatFloat(float64(*r), 'g', -1, 64) + "/s" }
func (r *rate) Type() string   { return "rate" }
func (r *rate) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "/s"), 64)
	if err != nil || v <= 0 {
		return fmt.Errorf("want changes per second such as 5 or 5/s, got %q", s)
	}
	*r = rate(v)
	return nil
}

func newCommand() *cobra.Command {
	cfg := bench.Defaults()
	r := rate(cfg.Rate)
	var jsonPath, plotPath string
	var compare []string
	pods := true
	cmd := &cobra.Command{
		Use:   "meshbench",
		Short: "Benchmark meshpilot: time for a change to reach every gRPC client, CPU and memory",
		Long: `meshbench starts a real etcd and kube-apiserver, writes services with ready
Pods on zoned Nodes and EndpointSlices, starts meshpilot serve as a child
process, opens simulated proxyless gRPC clients (state-of-the-world ADS,
LDS -> RDS -> CDS -> EDS, every response ACKed) and measures:

  converge  from each client's stream open to holding all it needs
  churn     from an EndpointSlice write (one new ready endpoint) to each
            subscribed client holding the new address as HEALTHY: from
            the write's start, and from its return (negative for clients
            that had it before the write returned; the count is shown)
  routes    with --traffic-rules or --gateway-routes, from a VirtualService's
            or HTTPRoute's weight change to each subscribed client holding
            the route with the new weights
  policies  with --security-policies, from an AuthorizationPolicy change
            to the simulated gRPC server it selects holding the inbound
            listener whose RBAC filter enforces it
  cost      meshpilot's CPU seconds and memory after sync, convergence,
            the settle pause and churn, each phase's CPU time its own
  replicas  with --replicas N: N meshpilot replicas with --balance behind
            a simulated Service; one restarts and comes back with no
            client; clients per replica every second, the time until each
            holds its fair share within the tolerance, the streams shed,
            and per client its reconnects and its longest time without
            its whole configuration (--plot draws it)
  soak      with --soak, churn for that long and the slopes of meshpilot's
            RSS, heap, goroutines and open streams, and misses
  compare   with --compare BIN: write the workload once, then in each of
            --rounds rounds start the run's own meshpilot and each --compare
            binary in turn against it, converge the clients and stop both;
            per binary every run's time to ready, convergence, CPU seconds
            converging, peak RSS and live heap, and their medians; no churn

Run it from the meshpilot repository (it builds cmd/meshpilot and
kube-apiserver/etcd via internal/testenv) or pass --meshpilot.`,
		Example: `  meshbench --meshpilot-arg=--debounce-after=100ms --meshpilot-arg=--debounce-leading-edge=false
  meshbench --services 1000 --endpoints 10 --clients 500 --json result.json
  meshbench --replicas 3 --clients 300 --changes 0 --plot replica-balance.svg
  meshbench --soak 30m --json soak.json
  meshbench --compare '/tmp/old/meshpilot --max-new-streams-per-second=0' --rounds 3 --json compare.json`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Rate = float64(r)
			cfg.NoPods = !pods
			for _, c := range compare {
				f := strings.Fields(c)
				if len(f) == 0 {
					return fmt.Errorf("--compare %q: want a binary and its arguments", c)
				}
				cfg.Compare.Binaries = append(cfg.Compare.Binaries, bench.Binary{Path: f[0], Args: f[1:]})
			}
			cfg.Log = cmd.ErrOrStderr()
			res, err := bench.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			res.WriteSummary(cmd.OutOrStdout())
			if jsonPath != "" {
				b, err := json.MarshalIndent(res, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
					return err
				}
			}
			if err := finishReplicas(res, plotPath); err != nil {
				return err
			}
			if s := res.Soak; s != nil {
				if err := writePlot(plotPath, s.WritePlot); err != nil {
					return err
				}
			}
			if s := res.Soak; s != nil && !s.Pass {
				return fmt.Errorf("the soak failed: %d of %d changes missed, or RSS, goroutines or streams grew by %g %% or more per 10 minutes", s.MissedChanges, s.Changes, bench.SoakLimitPct)
			}
			if res.Churn != nil && res.Churn.Misses > 0 {
				return fmt.Errorf("%d of %d (client, change) pairs missed", res.Churn.Misses, res.Churn.Pairs)
			}
			return nil
		},
	}
	cmd.AddCommand(newIdleCommand())
	cmd.AddCommand(newPlotRSSCommand())
	f := cmd.Flags()
	addReplicaFlags(f, &cfg.Replicas, &plotPath)
	f.IntVar(&cfg.Services, "services", cfg.Services, "services to create")
	f.IntVar(&cfg.Namespaces, "namespaces", cfg.Namespaces, "namespaces the services are spread over")
	f.IntVar(&cfg.Endpoints, "endpoints", cfg.Endpoints, "endpoints (ready Pods) per service")
	f.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "nodes the Pods run on, spread over three zones")
	f.BoolVar(&cfg.Headless, "headless", false, "create the Services headless (no cluster IP): the API server's cluster IP allocator counts every allocated address on each allocation, which makes tens of thousands of Services take an hour to write; meshpilot serves proxyless clients a headless Service as any other")
	f.BoolVar(&pods, "pods", true, "write a ready Pod behind every endpoint (create and status); false writes none: Services without a selector whose slices' endpoints carry address, readiness, node and zone but no targetRef, two API writes per service, for workloads whose Pod writes the API server could not make in time (not with --traffic-rules, whose subsets select Pods' labels)")
	f.IntVar(&cfg.Clusters, "clusters", cfg.Clusters, "clusters: each one beyond the first gets a kube-apiserver of its own with the same services and as many endpoints (other addresses), given to meshpilot as a remote Secret (istio/multiCluster=true, in meshpilot's --system-namespace); clients converge on every cluster's endpoints and churn adds endpoints in each cluster in turn")
	f.IntVar(&cfg.Clients, "clients", cfg.Clients, "simulated gRPC clients, one ADS stream each (see --streams-per-conn)")
	f.IntVar(&cfg.PerClient, "per-client", cfg.PerClient, "services each client watches")
	f.IntVar(&cfg.StreamsPerConn, "streams-per-conn", cfg.StreamsPerConn, fmt.Sprintf("clients' ADS streams sharing one connection, as a process with several xDS channel targets opens one stream per target on one connection (1: a connection per client); 0 derives it: 1 up to %d clients, else as few as keep the connections at %d or fewer (10 for --clients 10000)", bench.AutoConnections, bench.AutoConnections))
	f.IntVar(&cfg.Changes, "changes", cfg.Changes, "endpoint additions during churn (0 skips churn)")
	f.Var(&r, "rate", "churn rate: changes per second (5 or 5/s)")
	f.StringVar(&cfg.Meshpilot, "meshpilot", "", "meshpilot binary (default: build ./cmd/meshpilot as the Dockerfile does, into a temporary folder)")
	f.StringArrayVar(&cfg.MeshpilotArgs, "meshpilot-arg", nil, "extra argument for `meshpilot serve`, repeatable, e.g. --meshpilot-arg=--debounce-after=100ms; with --compare, for --meshpilot's binary (or the build) alone")
	f.StringVar(&cfg.MeshpilotLog, "meshpilot-log", "", "keep meshpilot's output in this file (default: kept only when the run fails); with --compare, one file per run, FILE.round<R>-binary<B>")
	f.StringVar(&cfg.ProfileDir, "profile", "", "save meshpilot's heap profiles after each phase, CPU profiles of the sync phase, convergence and churn, and its mutex and block profiles at convergence (filled only by a build that records them) into this folder (needs its /debug/pprof/; heap profiles force a GC, so take memory figures from runs without it); with --compare, a folder per run, round<R>-binary<B>")
	f.StringArrayVar(&compare, "compare", nil, "compare mode, repeatable: `'BIN [ARG...]'`, a meshpilot binary and the extra arguments of its meshpilot serve (split at spaces; they and --meshpilot-arg each go to their own binary only, so an older binary is not given a flag it lacks: --max-new-streams-per-second=0, say, which the build gets by itself). The workload is written once; then in each of --rounds rounds, --meshpilot (or the build) and each --compare binary in turn start against it, every client converges, and clients and meshpilot stop. Each run records the time to ready, convergence, meshpilot's CPU seconds while the clients converged, its peak RSS (VmHWM) and live heap; the summary gives them per binary with their medians. No churn: --changes, --rate and --settle are not used")
	f.IntVar(&cfg.Compare.Rounds, "rounds", cfg.Compare.Rounds, "with --compare: rounds, each running every binary once, in turn")
	f.StringVar(&jsonPath, "json", "", "write every figure as JSON to this file")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "give up on the run after this (the build of meshpilot not counted; with --compare, every run counted)")
	f.DurationVar(&cfg.MissTimeout, "miss-timeout", cfg.MissTimeout, "a change not seen by a client within this is a miss")
	f.DurationVar(&cfg.Settle, "settle", cfg.Settle, "pause between convergence and churn, so that churn starts after meshpilot's push of its initial sync")
	f.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "API writes in flight while writing the workload")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the random choice of services")
	f.DurationVar(&cfg.Soak, "soak", 0, "instead of --changes, churn for this long after convergence (endpoints replaced at --rate, two clients restarting every half --soak-sample, a service created and one deleted every three) and report the trend of meshpilot's RSS, heap, goroutines and open streams and the changes missed; fails on a miss or a slope of 1 %/10 min or more")
	f.DurationVar(&cfg.SoakSample, "soak-sample", cfg.SoakSample, "how often a soak samples meshpilot")
	f.BoolVar(&cfg.GatewayRoutes, "gateway-routes", false, "install the Gateway API's CRDs and give every service an HTTPRoute attached to it (parentRefs: the Service) splitting its traffic 80/20 between itself and another service of its namespace; churn then also changes route weights (as many changes as --changes, at --rate) and reports the time to every subscribed client holding the new route; not with --traffic-rules")
	f.BoolVar(&cfg.SecurityPolicies, "security-policies", false, "install Istio's CRDs and give every service an AuthorizationPolicy selecting its Pods that lets one service account in; the first --servers services each get a simulated gRPC xDS server asking for its first Pod's inbound listener; churn then also changes the allowed account (as many changes as --changes, at --rate) and reports the time to the selected server holding the new RBAC filter")
	f.IntVar(&cfg.Servers, "servers", 0, "with --security-policies, how many services get a simulated gRPC server (0: "+strconv.Itoa(bench.DefaultServers)+", at most --services)")
	f.BoolVar(&cfg.TrafficRules, "traffic-rules", false, "install Istio's CRDs and give every service a DestinationRule with subsets v1 and v2 and a VirtualService splitting its traffic 80/20 between them; churn then also changes route weights (as many changes as --changes, at --rate) and reports the time to every subscribed client holding the new route")
	return cmd
}
