package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Result holds every figure of a run. Durations are in milliseconds or
// seconds as their names say; memory in bytes.
type Result struct {
	Config    Config    `json:"config"`
	Machine   Machine   `json:"machine"`
	Started   time.Time `json:"started"`
	Meshpilot string    `json:"meshpilot"`
	// MeshpilotBuild says how meshbench built Meshpilot ("release": as
	// the Dockerfile does); empty when the binary was given.
	MeshpilotBuild string      `json:"meshpilot_build,omitempty"`
	MeshpilotArgs  []string    `json:"meshpilot_args"`
	Setup          SetupResult `json:"setup"`
	// SyncSeconds is from starting meshpilot to its /readyz answering 200.
	SyncSeconds float64 `json:"sync_seconds"`
	// RemoteSyncSeconds (Config.Clusters above 1) is from starting
	// meshpilot to its model holding every remote cluster's endpoints,
	// which its readiness does not wait for; clients open after it.
	RemoteSyncSeconds float64 `json:"remote_sync_seconds,omitempty"`

	Convergence ConvergenceResult `json:"convergence"`
	Churn       *ChurnResult      `json:"churn,omitempty"`
	// RouteChurn (Config.TrafficRules): from a VirtualService weight
	// change to each subscribed client holding the route with the new
	// weights.
	RouteChurn *ChurnResult `json:"route_churn,omitempty"`
	// ServerConvergence (Config.SecurityPolicies): from opening the
	// simulated gRPC servers' streams to each holding its inbound
	// listener with its AuthorizationPolicy.
	ServerConvergence *ConvergenceResult `json:"server_convergence,omitempty"`
	// PolicyChurn (Config.SecurityPolicies): from an AuthorizationPolicy
	// change to the selected server holding the listener that enforces
	// it.
	PolicyChurn *ChurnResult `json:"policy_churn,omitempty"`
	// Replicas (Config.Replicas.Count above 1) is the replica run's
	// figures; it has no churn and no phases.
	Replicas *ReplicasResult `json:"replicas,omitempty"`
	// Compare (Config.Compare.Binaries) is a compare run's figures; it
	// has no churn and no phases of its own.
	Compare *CompareResult `json:"compare,omitempty"`
	// Soak (Config.Soak) replaces churn.
	Soak *SoakResult `json:"soak,omitempty"`
	// Phases are meshpilot's usage after sync, after convergence, after
	// the settle pause ("settled") and after churn; each phase's CPU time
	// is its own.
	Phases []Phase `json:"phases"`
	// Peak is meshpilot's highest memory over the run.
	Peak PeakUsage  `json:"peak"`
	XDS  XDSTraffic `json:"xds"`
	// Seconds is the length of the whole run.
	Seconds float64 `json:"seconds"`

	// meter, when set, gives the setup and every phase the CPU time of
	// each process of the run.
	meter *cpuMeter
	// metricsURL, when set, is meshpilot's /metrics, from which every
	// phase reads its GoMemory.
	metricsURL string
}

// Machine describes where the run happened.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	LoadAvg   string `json:"loadavg_at_start"`
	GoVersion string `json:"go_version"`
}

// SetupResult is the writing of the workload.
type SetupResult struct {
	Writes  int64   `json:"writes"`
	Seconds float64 `json:"seconds"`
	// WritesPerSecond is Writes over Seconds.
	WritesPerSecond float64 `json:"writes_per_second"`
	// Processes are the CPU time and memory of the API servers, etcd and
	// meshbench while they wrote: the busiest bounded the write rate.
	Processes []ProcessUsage `json:"processes,omitempty"`
}

func newSetupResult(writes int64, took time.Duration, procs []ProcessUsage) SetupResult {
	return SetupResult{Writes: writes, Seconds: took.Seconds(), WritesPerSecond: float64(writes) / took.Seconds(), Processes: procs}
}

// ConvergenceResult: per client, from its stream open to holding every
// ClusterLoadAssignment it needs; AllMS from the first stream open to the
// last client converged.
type ConvergenceResult struct {
	Clients int `json:"clients"`
	// Connections is how many TCP connections the clients' streams went
	// over (Config.StreamsPerConn).
	Connections int64   `json:"connections"`
	AllMS       float64 `json:"all_ms"`
	P50MS       float64 `json:"p50_ms"`
	P99MS       float64 `json:"p99_ms"`
	MaxMS       float64 `json:"max_ms"`
}

// ChurnResult: latencies over all (subscribed client, change) pairs. Each
// change adds a ready endpoint to an EndpointSlice; it has reached a
// client when the client holds the new address as HEALTHY, so that it
// would send it requests.
type ChurnResult struct {
	Changes int     `json:"changes"`
	Seconds float64 `json:"seconds"`
	Pairs   int     `json:"pairs"`
	// P50MS to MeanMS are measured from the EndpointSlice write call
	// returning. The API server tells its watchers while its reply is
	// still on the way, so a client may hold a change before the write
	// returns: such a pair has a negative latency (see
	// BeforeWriteReturned).
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
	MeanMS float64 `json:"mean_ms"`
	// Misses are pairs not seen within the miss timeout.
	Misses int `json:"misses"`
	// BeforeWriteReturned counts pairs seen before the write call
	// returned: their latency from the write returning is negative.
	BeforeWriteReturned int `json:"before_write_returned"`
	// FromWriteStart measures the same pairs from the start of the
	// EndpointSlice write, which includes the API server's own latency
	// and is never negative.
	FromWriteStart Percentiles `json:"from_write_start"`
	// SliceWrite is how long the EndpointSlice update call took.
	SliceWrite Percentiles `json:"slice_write"`
	// PerChange lists every change in order.
	PerChange []ChangeRecord `json:"per_change"`
	// ByCluster (Config.Clusters above 1) splits the changes by the
	// cluster they were made in, meshpilot's own first.
	ByCluster []ClusterChurn `json:"by_cluster,omitempty"`
}

// ChangeRecord is one endpoint addition.
type ChangeRecord struct {
	Service string `json:"service"`
	// Address is the new endpoint's; for a route change, the route
	// configuration and its new weights ("<name>#<w1>,<w2>").
	Address string `json:"address"`
	// StartMS is when the slice write began, from the start of churn.
	StartMS float64 `json:"start_ms"`
	// WriteMS is how long the slice write took.
	WriteMS float64 `json:"write_ms"`
	// FromStartMS per subscribed client, from the start of the write;
	// -1 is a miss. Less WriteMS, it is the latency from the write
	// returning.
	FromStartMS []float64 `json:"from_start_ms"`
}

// Percentiles of a latency distribution, in milliseconds.
type Percentiles struct {
	P50MS float64 `json:"p50_ms"`
	P90MS float64 `json:"p90_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

// Phase is meshpilot's usage at the end of a phase.
type Phase struct {
	Name string `json:"name"`
	Usage
	// CPUDelta is the CPU time spent in this phase alone.
	CPUDelta float64 `json:"cpu_seconds_in_phase"`
	// SampledPeakRSS is the highest VmRSS seen by sampling every 100 ms so
	// far.
	SampledPeakRSS int64 `json:"sampled_peak_rss_bytes"`
	// At is when the phase ended; WallSeconds is its length.
	At          time.Time `json:"at"`
	WallSeconds float64   `json:"wall_seconds_in_phase"`
	// Harness is meshbench's own usage (its simulated clients, the
	// workload's writes, the tracking of changes): set against
	// meshpilot's, it tells whether the harness took the CPUs meshpilot
	// needed.
	Harness Usage `json:"harness"`
	// HarnessCPUDelta is meshbench's CPU time in this phase alone.
	HarnessCPUDelta float64 `json:"harness_cpu_seconds_in_phase"`
	// MachineBusyCores is how many of the machine's cores every process
	// on it kept busy in this phase, the run's own and others' (0 for
	// the first phase): well above meshpilot's and meshbench's own use,
	// the machine's other work bounded the phase.
	MachineBusyCores float64    `json:"machine_busy_cores,omitempty"`
	machine          machineCPU // the machine's CPU time at the phase's end
	// Processes are the CPU time and memory of every process of the run
	// in this phase, meshpilot's among them.
	Processes []ProcessUsage `json:"processes,omitempty"`
	// GoMemory is meshpilot's Go runtime's breakdown of its memory at the
	// phase's end; nil when its /metrics did not answer.
	GoMemory *GoMemory `json:"go_memory,omitempty"`
}

// PeakUsage is a process's highest memory so far.
type PeakUsage struct {
	// HWM is the kernel's own peak of RSS (VmHWM), in bytes: no sample
	// misses it. The default workload's memory figure.
	HWM int64 `json:"hwm_bytes"`
	// SampledRSS is the highest RSS seen by sampling every 100 ms, and
	// SampledAnon and SampledFile its split at that sample (the kernel
	// keeps no peak of either).
	SampledRSS  int64 `json:"sampled_rss_bytes"`
	SampledAnon int64 `json:"sampled_anon_bytes"`
	SampledFile int64 `json:"sampled_file_bytes"`
}

// XDSTraffic is what all clients received, by type.
type XDSTraffic struct {
	Responses map[string]int64 `json:"responses"`
	// Bytes of resources (marshalled), not counting framing.
	Bytes map[string]int64 `json:"resource_bytes"`
	// Ignored counts resources nobody asked for.
	Ignored int64 `json:"ignored_resources"`
}

func (r *Result) snapshot(p *process, name string) {
	u, err := readUsage(p.pid())
	if err != nil {
		return
	}
	now := time.Now()
	self, _ := readUsage(os.Getpid()) // /proc/self is there when the child's is
	machine, _ := readMachineCPU()
	peak := p.sampledPeak()
	if u.RSS > peak.RSS {
		peak = u
	}
	ph := Phase{Name: name, Usage: u, CPUDelta: u.CPUSeconds, SampledPeakRSS: peak.RSS,
		At: now, WallSeconds: now.Sub(r.Started).Seconds(), Harness: self, HarnessCPUDelta: self.CPUSeconds, machine: machine}
	r.Peak = PeakUsage{HWM: max(r.Peak.HWM, u.HWM), SampledRSS: peak.RSS, SampledAnon: peak.RSSAnon, SampledFile: peak.RSSFile}
	if r.meter != nil {
		ph.Processes = r.meter.lap()
	}
	if r.metricsURL != "" {
		g, err := readGoMemory(context.Background(), r.metricsURL)
		if err == nil {
			ph.GoMemory = g
		}
	}
	if n := len(r.Phases); n > 0 {
		prev := r.Phases[n-1]
		ph.CPUDelta = cpuDelta(u.CPUSeconds, prev.CPUSeconds)
		ph.HarnessCPUDelta = cpuDelta(self.CPUSeconds, prev.Harness.CPUSeconds)
		ph.WallSeconds = now.Sub(prev.At).Seconds()
		ph.MachineBusyCores = machine.busyCores(prev.machine)
	}
	r.Phases = append(r.Phases, ph)
}

// cpuDelta is the CPU time between two readings. CPU times are in clock
// ticks (10 ms): no more digits than that.
func cpuDelta(now, before float64) float64 {
	return math.Round((now-before)*clockTicks) / clockTicks
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// WriteSummary prints a small table of the figures.
func (r *Result) WriteSummary(out io.Writer) {
	c := r.Config
	switch {
	case c.NoPods && c.Headless:
		fmt.Fprintln(out, "no Pods: endpoints from slices alone (selector-less headless Services, endpoints without targetRef)")
	case c.NoPods:
		fmt.Fprintln(out, "no Pods: endpoints from slices alone (selector-less Services, endpoints without targetRef)")
	case c.Headless:
		fmt.Fprintln(out, "headless Services (no cluster IP)")
	}
	if r.Compare != nil {
		fmt.Fprintf(out, "meshbench: %d services / %d namespaces / %d endpoints each; %d clients x %d services; %d binaries compared over %d rounds, convergence only\n",
			c.Services, c.Namespaces, c.Endpoints, c.Clients, c.PerClient, len(r.Compare.Binaries), r.Compare.Rounds)
	} else if c.Soak > 0 {
		fmt.Fprintf(out, "meshbench: %d services / %d namespaces / %d endpoints each; %d clients x %d services; a %s soak at %g changes/s\n",
			c.Services, c.Namespaces, c.Endpoints, c.Clients, c.PerClient, c.Soak, c.Rate)
	} else {
		fmt.Fprintf(out, "meshbench: %d services / %d namespaces / %d endpoints each; %d clients x %d services; %d changes at %g/s\n",
			c.Services, c.Namespaces, c.Endpoints, c.Clients, c.PerClient, c.Changes, c.Rate)
	}
	// A compare run's tables name each binary with its arguments.
	if r.Compare == nil {
		if r.MeshpilotBuild != "" {
			fmt.Fprintf(out, "meshpilot: %s build of ./cmd/meshpilot\n", r.MeshpilotBuild)
		} else if r.Meshpilot != "" {
			fmt.Fprintf(out, "meshpilot: %s\n", r.Meshpilot)
		}
		if len(c.MeshpilotArgs) > 0 {
			fmt.Fprintf(out, "meshpilot args: %s\n", strings.Join(c.MeshpilotArgs, " "))
		}
	}
	fmt.Fprintf(out, "machine: %d CPUs, %s, load %s at start\n", r.Machine.CPUs, r.Machine.CPUModel, r.Machine.LoadAvg)
	fmt.Fprintf(out, "setup: %d API writes in %.2f s (%.0f/s%s)",
		r.Setup.Writes, r.Setup.Seconds, r.Setup.WritesPerSecond, busiestNote(r.Setup.Processes))
	if r.Compare == nil {
		fmt.Fprintf(out, "; meshpilot ready in %.2f s", r.SyncSeconds)
	}
	fmt.Fprintln(out)
	if c.Clusters > 1 {
		fmt.Fprintf(out, "clusters: %d, the same services in each (%d endpoints per hostname); every remote cluster's endpoints in meshpilot %.2f s after its start\n",
			c.Clusters, c.Clusters*c.Endpoints, r.RemoteSyncSeconds)
	}
	fmt.Fprintln(out)
	if r.Replicas != nil {
		r.Replicas.writeSummary(out)
		return
	}
	if r.Compare != nil {
		r.Compare.writeSummary(out)
		return
	}

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency (ms)\tp50\tp90\tp99\tmax\tall\tmisses\t")
	cv := r.Convergence
	fmt.Fprintf(tw, "converge (%d clients)\t%.1f\t-\t%.1f\t%.1f\t%.1f\t-\t\n", cv.Clients, cv.P50MS, cv.P99MS, cv.MaxMS, cv.AllMS)
	if ch := r.Churn; ch != nil {
		fs := ch.FromWriteStart
		fmt.Fprintf(tw, "churn (%d pairs), from the write's start\t%.1f\t%.1f\t%.1f\t%.1f\t-\t%d\t\n", ch.Pairs, fs.P50MS, fs.P90MS, fs.P99MS, fs.MaxMS, ch.Misses)
		fmt.Fprintf(tw, "  from the write returning\t%.1f\t%.1f\t%.1f\t%.1f\t-\t-\t\n", ch.P50MS, ch.P90MS, ch.P99MS, ch.MaxMS)
		ws := ch.SliceWrite
		fmt.Fprintf(tw, "  the slice write itself\t%.1f\t%.1f\t%.1f\t%.1f\t-\t-\t\n", ws.P50MS, ws.P90MS, ws.P99MS, ws.MaxMS)
		writeClusterRows(tw, ch)
	}
	if ch := r.RouteChurn; ch != nil {
		fs := ch.FromWriteStart
		fmt.Fprintf(tw, "route weights (%d pairs), from the write's start\t%.1f\t%.1f\t%.1f\t%.1f\t-\t%d\t\n", ch.Pairs, fs.P50MS, fs.P90MS, fs.P99MS, fs.MaxMS, ch.Misses)
		fmt.Fprintf(tw, "  from the write returning\t%.1f\t%.1f\t%.1f\t%.1f\t-\t-\t\n", ch.P50MS, ch.P90MS, ch.P99MS, ch.MaxMS)
	}
	if sc := r.ServerConvergence; sc != nil {
		fmt.Fprintf(tw, "servers' listeners (%d servers)\t%.1f\t-\t%.1f\t%.1f\t%.1f\t-\t\n", sc.Clients, sc.P50MS, sc.P99MS, sc.MaxMS, sc.AllMS)
	}
	if ch := r.PolicyChurn; ch != nil {
		fs := ch.FromWriteStart
		fmt.Fprintf(tw, "policies (%d pairs), from the write's start\t%.1f\t%.1f\t%.1f\t%.1f\t-\t%d\t\n", ch.Pairs, fs.P50MS, fs.P90MS, fs.P99MS, fs.MaxMS, ch.Misses)
		fmt.Fprintf(tw, "  from the write returning\t%.1f\t%.1f\t%.1f\t%.1f\t-\t-\t\n", ch.P50MS, ch.P90MS, ch.P99MS, ch.MaxMS)
	}
	tw.Flush()
	if s := r.Soak; s != nil {
		s.writeSummary(out)
	}
	if ch := r.Churn; ch != nil {
		fmt.Fprintf(out, "churn: a pair counts when the client holds the new endpoint as HEALTHY; %d of %d (client, change) pairs were seen before the slice write returned (negative from the write returning)\n",
			ch.BeforeWriteReturned, ch.Pairs)
	}
	fmt.Fprintln(out)

	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "meshpilot after\tCPU s\tCPU s in phase\tRSS MiB\tanon MiB\tfile MiB\tpeak RSS MiB (VmHWM)\tthreads\t")
	for _, p := range r.Phases {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t\n", p.Name, p.CPUSeconds, p.CPUDelta,
			mib(p.RSS), mib(p.RSSAnon), mib(p.RSSFile), mib(p.HWM), p.Threads)
	}
	tw.Flush()
	if pk := r.Peak; pk.HWM > 0 {
		fmt.Fprintf(out, "meshpilot's peak RSS: %.1f MiB (VmHWM); sampled every 100 ms %.1f MiB, anon %.1f + file %.1f\n",
			mib(pk.HWM), mib(pk.SampledRSS), mib(pk.SampledAnon), mib(pk.SampledFile))
	}
	writeGoMemoryTable(out, r.Phases)
	r.writeHarnessCPU(out)
	writeProcessTable(out, r)
	fmt.Fprintf(out, "\nxDS responses received: LDS %d, RDS %d, CDS %d, EDS %d (EDS %.1f MiB of resources)\n\n",
		r.XDS.Responses["lds"], r.XDS.Responses["rds"], r.XDS.Responses["cds"], r.XDS.Responses["eds"], mib(r.XDS.Bytes["eds"]))
}

// busiestNote names the busiest process of a span, for a line of the
// summary: ", kube-apiserver 1.9 cores".
func busiestNote(us []ProcessUsage) string {
	b, ok := busiest(us)
	if !ok {
		return ""
	}
	return fmt.Sprintf(", %s busiest at %.1f cores", b.Name, b.Cores)
}

// writeProcessTable prints the cores each process of the run used in
// the setup and in each phase, so that a slow phase shows its bottleneck.
func writeProcessTable(out io.Writer, r *Result) {
	type span struct {
		name string
		us   []ProcessUsage
	}
	spans := []span{{"setup", r.Setup.Processes}}
	var names []string
	add := func(us []ProcessUsage) {
		for _, u := range us {
			if !slices.Contains(names, u.Name) {
				names = append(names, u.Name)
			}
		}
	}
	add(r.Setup.Processes)
	for _, p := range r.Phases {
		spans = append(spans, span{p.Name, p.Processes})
		add(p.Processes)
	}
	if len(names) == 0 {
		return
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "cores used in\t%s\t\n", strings.Join(names, "\t"))
	for _, sp := range spans {
		if len(sp.us) == 0 {
			continue
		}
		fmt.Fprint(tw, sp.name)
		for _, n := range names {
			i := slices.IndexFunc(sp.us, func(u ProcessUsage) bool { return u.Name == n })
			if i < 0 {
				fmt.Fprint(tw, "\t-")
				continue
			}
			fmt.Fprintf(tw, "\t%.2f", sp.us[i].Cores)
		}
		fmt.Fprintln(tw, "\t")
	}
	fmt.Fprint(tw, "peak RSS MiB")
	last := r.Setup.Processes
	if n := len(r.Phases); n > 0 {
		last = r.Phases[n-1].Processes
	}
	for _, n := range names {
		i := slices.IndexFunc(last, func(u ProcessUsage) bool { return u.Name == n })
		if i < 0 {
			fmt.Fprint(tw, "\t-")
			continue
		}
		fmt.Fprintf(tw, "\t%.0f", mib(last[i].HWM))
	}
	fmt.Fprintln(tw, "\t")
	tw.Flush()
}
