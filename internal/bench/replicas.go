package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/kubernetes"
)

// ReplicasConfig is the replica run (Count above 1): Count meshpilot
// replicas with --balance behind a simulated Service against the one API
// server; clients connect, one replica restarts and comes back with no
// client, and the run records clients per replica every second until
// they are balanced and for Observe after.
type ReplicasConfig struct {
	// Count of replicas; 1 runs the usual benchmark.
	Count int `json:"count"`
	// Tolerance, ShedRate, Interval and MinAge are passed to every
	// replica as --balance-tolerance, --shed-rate, --balance-interval
	// and --shed-min-age; Tolerance also judges the balance.
	Tolerance float64       `json:"tolerance"`
	ShedRate  float64       `json:"shed_rate"`
	Interval  time.Duration `json:"balance_interval_ns"`
	MinAge    time.Duration `json:"shed_min_age_ns"`
	// Within is the longest the replicas may take to balance once the
	// restarted one is ready (the 2 minutes).
	Within time.Duration `json:"within_ns"`
	// Observe is how long the run goes on recording once balanced.
	Observe time.Duration `json:"observe_ns"`
}

// DefaultReplicas is meshpilot's own balancing defaults, one replica.
func DefaultReplicas() ReplicasConfig {
	return ReplicasConfig{Count: 1, Tolerance: 0.2, ShedRate: 2, Interval: 5 * time.Second, MinAge: 30 * time.Second,
		Within: 2 * time.Minute, Observe: 30 * time.Second}
}

func (c ReplicasConfig) validate() []error {
	if c.Count <= 1 {
		if c.Count < 1 {
			return []error{fmt.Errorf("replicas must be 1 or more, not %d", c.Count)}
		}
		return nil
	}
	var errs []error
	if c.Tolerance < 0 || c.Tolerance >= 1 || c.ShedRate <= 0 {
		errs = append(errs, fmt.Errorf("with replicas, the tolerance must be in [0, 1) and the shed rate above 0, not %g and %g", c.Tolerance, c.ShedRate))
	}
	if c.Interval <= 0 || c.MinAge <= 0 || c.Within <= 0 || c.Observe < 0 {
		errs = append(errs, errors.New("with replicas, the balance interval, shed minimum age and balance deadline must be positive"))
	}
	return errs
}

// ReplicasResult is what a replica run measured. Times are seconds from
// the restarted replica's SIGTERM.
type ReplicasResult struct {
	Replicas []string `json:"replicas"`
	Clients  int      `json:"clients"`
	// Restarted names the replica stopped and started again; ReadyS is
	// when it was ready again.
	Restarted string  `json:"restarted"`
	ReadyS    float64 `json:"ready_s"`
	// FairShare is clients / replicas; the band is FairShare x (1 ±
	// Tolerance).
	FairShare float64 `json:"fair_share"`
	Tolerance float64 `json:"tolerance"`
	// BalancedS is the first sample, at or after ReadyS, with every
	// client connected and every replica within the band; BalancedAfterS
	// is from ReadyS to it. Balanced is false when it did not happen
	// within Config.Replicas.Within.
	Balanced       bool    `json:"balanced"`
	BalancedS      float64 `json:"balanced_s"`
	BalancedAfterS float64 `json:"balanced_after_s"`
	// OutOfBandAfter counts the samples after BalancedS that were out of
	// the band.
	OutOfBandAfter int `json:"out_of_band_after"`
	// Shed is the streams the replicas shed over the whole run, per
	// replica in Replicas' order and in all.
	Shed          int   `json:"shed"`
	ShedByReplica []int `json:"shed_by_replica"`
	// Samples: clients per replica about every second, -1 while a
	// replica does not answer (stopped or starting).
	Samples []ReplicaSample `json:"samples"`
	// Clients' reconnects and how long each went without its config.
	Lives ClientLives `json:"clients_lives"`
	// Usage per replica at the end (the restarted one's since its restart).
	Usage []ReplicaUsage `json:"usage"`
}

// ReplicaSample is the clients per replica at one time.
type ReplicaSample struct {
	S       float64 `json:"s"`
	Clients []int   `json:"clients"`
}

// ReplicaUsage is one replica's process at the end of the run.
type ReplicaUsage struct {
	Name string `json:"name"`
	Usage
	SampledPeakRSS int64 `json:"sampled_peak_rss_bytes"`
}

// inBand says whether clients are spread over the replicas (counts, -1
// for one not answering) with every one connected and every replica
// within clients / replicas x (1 ± tolerance).
func inBand(counts []int, clients int, tolerance float64) bool {
	if len(counts) == 0 {
		return false
	}
	fair := float64(clients) / float64(len(counts))
	total := 0
	for _, c := range counts {
		if c < 0 || float64(c) < fair*(1-tolerance)-1e-9 || float64(c) > fair*(1+tolerance)+1e-9 {
			return false
		}
		total += c
	}
	return total == clients
}

// replicaRun is what runReplicas works with, set up by Run.
type replicaRun struct {
	cfg        *Config
	kubeconfig string
	kc         kubernetes.Interface
	bin        string
	workload   *workload
	logDir     string
	logf       func(string, ...any)
}

// runReplicas starts the replicas, opens the clients through the Service,
// restarts one replica and records until balanced and Observe after.
func runReplicas(ctx context.Context, r replicaRun) (res *ReplicasResult, syncSeconds float64, err error) {
	cfg, rc, logf := r.cfg, r.cfg.Replicas, r.logf
	ns := cfg.Prefix + "-replicas"
	if err := ensureNamespace(ctx, r.kc, ns); err != nil {
		return nil, 0, err
	}
	reps := make([]*replica, rc.Count)
	for i := range reps {
		xdsAddr, err1 := freeAddr()
		httpAddr, err2 := freeAddr()
		if err := errors.Join(err1, err2); err != nil {
			return nil, 0, err
		}
		name := fmt.Sprintf("meshpilot-%d", i)
		args := append([]string{"serve", "--kubeconfig", r.kubeconfig, "--xds-addr", xdsAddr, "--http-addr", httpAddr,
			"--balance", "--balance-tolerance=" + strconv.FormatFloat(rc.Tolerance, 'g', -1, 64),
			"--shed-rate=" + strconv.FormatFloat(rc.ShedRate, 'g', -1, 64),
			"--balance-interval=" + rc.Interval.String(), "--shed-min-age=" + rc.MinAge.String()}, cfg.MeshpilotArgs...)
		reps[i] = &replica{name: name, xdsAddr: xdsAddr, httpAddr: httpAddr, args: args, logDir: r.logDir,
			env: []string{"POD_NAME=" + name, "POD_NAMESPACE=" + ns}}
	}
	defer func() {
		for _, rep := range reps {
			if serr := rep.stop(10 * time.Second); serr != nil {
				logf("%v", serr)
				if err == nil {
					err = serr
				}
			}
		}
		if err != nil {
			logf("the replicas' logs are in %s", r.logDir)
		}
	}()
	logf("starting %d replicas: %s %v", rc.Count, r.bin, reps[0].args)
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(reps))
	for i, rep := range reps {
		wg.Go(func() { errs[i] = rep.start(ctx, r.bin) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	syncSeconds = time.Since(t0).Seconds()
	logf("%d replicas ready in %.2fs", rc.Count, syncSeconds)

	// Clients, each on a channel of its own through the Service.
	lives := newClientLives(cfg.Clients)
	svc := newKubeService(reps, cfg.Seed)
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	clientCtx, stopClients := context.WithCancel(ctx)
	var clientsWG sync.WaitGroup
	defer func() { stopClients(); clientsWG.Wait() }()
	clientErrs := make(chan error, cfg.Clients)
	stats := &clientStats{}
	for c := range cfg.Clients {
		var names []string
		for _, s := range rng.Perm(len(r.workload.services))[:cfg.PerClient] {
			names = append(names, r.workload.services[s].listenerName())
		}
		cl := newADSClient(c, r.workload.namespace(c%cfg.Namespaces), names, lives, stats)
		cl.wantEndpoints = cfg.Clusters * cfg.Endpoints
		cc, err := grpc.NewClient("passthrough:///meshpilot."+ns+".svc:15010",
			grpc.WithContextDialer(svc.dial),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
		if err != nil {
			return nil, 0, err
		}
		crng := rand.New(rand.NewPCG(cfg.Seed, uint64(c)))
		clientsWG.Go(func() {
			defer cc.Close()
			if err := cl.runReconnecting(clientCtx, cc, lives, crng); err != nil {
				clientErrs <- err
			}
		})
	}
	rec := startRecorder(ctx, reps)
	defer rec.stop()
	logf("opening %d clients through the Service, %d services each", cfg.Clients, cfg.PerClient)
	select {
	case <-lives.allDone:
	case err := <-clientErrs:
		return nil, 0, err
	case <-time.After(max(cfg.MissTimeout, 30*time.Second+time.Duration(cfg.Clients)*20*time.Millisecond)):
		return nil, 0, fmt.Errorf("only %d of %d clients complete in time", lives.completeCount(), cfg.Clients)
	case <-ctx.Done():
		return nil, 0, context.Cause(ctx)
	}
	logf("every client complete")
	// Every connection old enough to be shed, and the Leases renewed
	// with the counts, before the restart.
	if err := sleepCtx(ctx, rc.MinAge+rc.Interval); err != nil {
		return nil, 0, err
	}

	restarted := reps[len(reps)-1]
	logf("restarting %s (before: %v)", restarted.name, rec.latest())
	stopAt := time.Now()
	if err := restarted.stop(30 * time.Second); err != nil {
		return nil, 0, err
	}
	if err := restarted.start(ctx, r.bin); err != nil {
		return nil, 0, err
	}
	readyAt := time.Now()
	logf("%s ready again after %.1fs", restarted.name, readyAt.Sub(stopAt).Seconds())

	var balancedAt time.Time
	deadline := readyAt.Add(rc.Within)
	for {
		select {
		case err := <-clientErrs:
			return nil, 0, err
		case <-ctx.Done():
			return nil, 0, context.Cause(ctx)
		case s := <-rec.samples:
			if s.at.Before(readyAt) {
				continue
			}
			if balancedAt.IsZero() && inBand(s.clients, cfg.Clients, rc.Tolerance) {
				balancedAt = s.at
				logf("balanced %.1fs after %s was ready: %v", balancedAt.Sub(readyAt).Seconds(), restarted.name, s.clients)
			}
		}
		now := time.Now()
		if (!balancedAt.IsZero() && now.Sub(balancedAt) >= rc.Observe) || (balancedAt.IsZero() && now.After(deadline)) {
			break
		}
	}
	rec.stop()
	end := time.Now()
	res = &ReplicasResult{Clients: cfg.Clients, Restarted: restarted.name, ReadyS: readyAt.Sub(stopAt).Seconds(),
		FairShare: float64(cfg.Clients) / float64(len(reps)), Tolerance: rc.Tolerance,
		Lives: lives.summary(end)}
	for _, rep := range reps {
		res.Replicas = append(res.Replicas, rep.name)
		u := ReplicaUsage{Name: rep.name}
		if rep.proc != nil {
			u.Usage, _ = readUsage(rep.proc.pid())
			u.SampledPeakRSS = max(rep.proc.sampledPeakRSS(), u.RSS)
		}
		res.Usage = append(res.Usage, u)
	}
	res.fill(rec.all(), stopAt, balancedAt, cfg.Clients)
	if !res.Balanced {
		logf("not balanced within %s of %s's restart: %v", rc.Within, restarted.name, rec.latest())
	}
	return res, syncSeconds, nil
}

// fill sets the samples, the balance figures and the shed counts from
// what the recorder saw.
func (res *ReplicasResult) fill(samples []recorded, stopAt, balancedAt time.Time, clients int) {
	res.ShedByReplica = make([]int, len(res.Replicas))
	// A restarted replica's counter starts again from 0: its shed
	// streams are its last count before the stop plus its last after.
	last := make([]int, len(res.Replicas))
	for _, s := range samples {
		res.Samples = append(res.Samples, ReplicaSample{S: s.at.Sub(stopAt).Seconds(), Clients: s.clients})
		for i, n := range s.shed {
			if n < 0 {
				continue
			}
			if n < last[i] {
				res.ShedByReplica[i] += last[i]
			}
			last[i] = n
		}
		if !balancedAt.IsZero() && s.at.After(balancedAt) && !inBand(s.clients, clients, res.Tolerance) {
			res.OutOfBandAfter++
		}
	}
	for i := range res.ShedByReplica {
		res.ShedByReplica[i] += last[i]
		res.Shed += res.ShedByReplica[i]
	}
	if !balancedAt.IsZero() {
		res.Balanced = true
		res.BalancedS = balancedAt.Sub(stopAt).Seconds()
		res.BalancedAfterS = res.BalancedS - res.ReadyS
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// recorded is one scrape of every replica.
type recorded struct {
	at      time.Time
	clients []int // -1: did not answer
	shed    []int // -1: did not answer
}

// recorder scrapes every replica's metrics every second, keeps every
// sample and hands each to samples (dropped when nobody reads).
type recorder struct {
	samples chan recorded
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex // guards kept
	kept    []recorded
}

func startRecorder(ctx context.Context, reps []*replica) *recorder {
	ctx, cancel := context.WithCancel(ctx)
	rec := &recorder{samples: make(chan recorded, 1), cancel: cancel, done: make(chan struct{})}
	client := &http.Client{Timeout: 900 * time.Millisecond}
	go func() {
		defer close(rec.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			s := recorded{at: time.Now(), clients: make([]int, len(reps)), shed: make([]int, len(reps))}
			var wg sync.WaitGroup
			for i, rep := range reps {
				wg.Go(func() {
					m, err := scrapeReplica(ctx, client, "http://"+rep.httpAddr+"/metrics")
					if err != nil {
						s.clients[i], s.shed[i] = -1, -1
						return
					}
					s.clients[i], s.shed[i] = m.clients, m.shed
				})
			}
			wg.Wait()
			if ctx.Err() != nil {
				return
			}
			rec.mu.Lock()
			rec.kept = append(rec.kept, s)
			rec.mu.Unlock()
			select {
			case rec.samples <- s:
			default:
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return rec
}

func (r *recorder) stop() { r.cancel(); <-r.done }

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.kept)
}

func (r *recorder) latest() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.kept) == 0 {
		return nil
	}
	return r.kept[len(r.kept)-1].clients
}

// writeSummary prints the replica run's figures.
func (res *ReplicasResult) writeSummary(out io.Writer) {
	fmt.Fprintf(out, "replicas: %d (%v), %d clients, fair share %.1f, band x(1 ± %g); %s restarted, ready again %.1f s after its SIGTERM\n",
		len(res.Replicas), res.Replicas, res.Clients, res.FairShare, res.Tolerance, res.Restarted, res.ReadyS)
	if res.Balanced {
		fmt.Fprintf(out, "balanced %.1f s after it was ready (%.1f s after the SIGTERM); %d samples out of the band after\n",
			res.BalancedAfterS, res.BalancedS, res.OutOfBandAfter)
	} else {
		fmt.Fprintf(out, "NOT balanced within the deadline\n")
	}
	l := res.Lives
	fmt.Fprintf(out, "shed streams: %d %v; reconnects: %d by %d clients (at most %d for one), ended by %v\n",
		res.Shed, res.ShedByReplica, l.Reconnects, l.Reconnected, l.MostReconnects, l.EndedBy)
	fmt.Fprintf(out, "longest without config after a reconnect (ms): p50 %.1f, p99 %.1f, max %.1f; violations (more than one reconnect to get it back) %d; incomplete at the end %d\n",
		l.LongestGap.P50MS, l.LongestGap.P99MS, l.LongestGap.MaxMS, l.Violations, l.IncompleteAtEnd)
	for _, u := range res.Usage {
		fmt.Fprintf(out, "%s: RSS %.1f MiB (sampled peak %.1f MiB), CPU %.2f s\n", u.Name, mib(u.RSS), mib(u.SampledPeakRSS), u.CPUSeconds)
	}
	if len(res.Samples) > 0 {
		fmt.Fprintf(out, "last sample: %v\n", res.Samples[len(res.Samples)-1].Clients)
	}
}
