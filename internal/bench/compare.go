package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// CompareConfig is a compare run (Binaries set): the workload is written
// once, then in each of Rounds rounds the run's own binary
// (Config.Meshpilot, or the build) and each of Binaries in turn start
// against it, their clients converge, and both stop. Writing a large
// workload takes far longer than a start and convergence, which is all
// that differs between builds; interleaving the binaries spreads the
// machine's slower spells over all of them. There is no churn.
type CompareConfig struct {
	Binaries []Binary `json:"binaries,omitempty"`
	Rounds   int      `json:"rounds"`
}

// Binary is a meshpilot binary and the arguments it alone gets after
// serve's own: an older binary may lack a flag the newer one needs.
type Binary struct {
	Path string   `json:"path"`
	Args []string `json:"args,omitempty"`
}

// DefaultCompare is three rounds, without binaries to compare.
func DefaultCompare() CompareConfig { return CompareConfig{Rounds: 3} }

func (c *Config) validateCompare() []error {
	if len(c.Compare.Binaries) == 0 {
		return nil
	}
	var errs []error
	if c.Compare.Rounds < 1 {
		errs = append(errs, fmt.Errorf("rounds must be positive, not %d", c.Compare.Rounds))
	}
	for _, b := range c.Compare.Binaries {
		if b.Path == "" {
			errs = append(errs, errors.New("a binary to compare needs a path"))
		}
	}
	if c.Replicas.Count > 1 || c.Soak > 0 {
		errs = append(errs, errors.New("a compare run runs one replica, without a soak"))
	}
	return errs
}

// CompareResult is a compare run's figures: each binary's runs, the run's
// own binary first, and their medians.
type CompareResult struct {
	Rounds   int              `json:"rounds"`
	Binaries []ComparedBinary `json:"binaries"`
}

// ComparedBinary is one binary of a compare run.
type ComparedBinary struct {
	Meshpilot string `json:"meshpilot"`
	// Build says how meshbench built it ("release"); empty when given.
	Build string `json:"build,omitempty"`
	// Args are what it got after serve's own flags.
	Args   []string       `json:"args"`
	Runs   []CompareRun   `json:"runs"`
	Median CompareFigures `json:"median"`
}

// CompareFigures are what a compare run measures of one start of
// meshpilot, with the usual run's accounting.
type CompareFigures struct {
	// ReadySeconds is from meshpilot's start to its /readyz answering 200.
	ReadySeconds float64 `json:"ready_seconds"`
	// ConvergeAllMS, ConvergeP50MS and ConvergeP99MS are
	// ConvergenceResult's AllMS, P50MS and P99MS.
	ConvergeAllMS float64 `json:"converge_all_ms"`
	ConvergeP50MS float64 `json:"converge_p50_ms"`
	ConvergeP99MS float64 `json:"converge_p99_ms"`
	// ConvergeCPUSeconds is meshpilot's CPU time from ready to every
	// client converged: the "converged" phase's.
	ConvergeCPUSeconds float64 `json:"converge_cpu_seconds"`
	// PeakRSS is VmHWM once every client converged: the peak of the run,
	// which ends there.
	PeakRSS int64 `json:"peak_rss_bytes"`
	// HeapLive is what meshpilot's last collection before that found
	// live; -1 when it does not export it.
	HeapLive int64 `json:"heap_live_bytes"`
}

// CompareRun is one start of one binary.
type CompareRun struct {
	Round   int       `json:"round"`
	Started time.Time `json:"started"`
	CompareFigures
	Convergence ConvergenceResult `json:"convergence"`
	// Phases are "sync" and "converged", as a usual run's.
	Phases []Phase `json:"phases"`
}

// compareRun is what runCompare works with.
type compareRun struct {
	// serve starts the run's own binary; every run changes its binary,
	// arguments, log, profiles and result.
	serve serveRun
	// build is how the run's own binary was built; empty when given.
	build  string
	logDir string
}

// runCompare runs every binary once per round, in turn, and returns each
// one's runs and medians.
func runCompare(ctx context.Context, r compareRun) (*CompareResult, error) {
	cfg, logf := r.serve.cfg, r.serve.logf
	bins := append([]Binary{{Path: r.serve.bin, Args: r.serve.args}}, cfg.Compare.Binaries...)
	out := &CompareResult{Rounds: cfg.Compare.Rounds}
	for _, b := range bins {
		out.Binaries = append(out.Binaries, ComparedBinary{Meshpilot: b.Path, Args: b.Args})
	}
	out.Binaries[0].Build = r.build
	for round := 1; round <= cfg.Compare.Rounds; round++ {
		for i, b := range bins {
			logf("round %d of %d, binary %d of %d: %s", round, cfg.Compare.Rounds, i+1, len(bins), b.Path)
			run, err := r.once(ctx, fmt.Sprintf("round%d-binary%d", round, i+1), b)
			if err != nil {
				return nil, fmt.Errorf("round %d, binary %d (%s): %w", round, i+1, b.Path, err)
			}
			run.Round = round
			out.Binaries[i].Runs = append(out.Binaries[i].Runs, run)
		}
	}
	for i := range out.Binaries {
		out.Binaries[i].Median = medianFigures(out.Binaries[i].Runs)
	}
	return out, nil
}

// once starts b, converges the clients on it and stops both; name tells
// its log and profiles from the other runs'.
func (r compareRun) once(ctx context.Context, name string, b Binary) (CompareRun, error) {
	cfg := r.serve.cfg
	// As for meshbench idle: a binary just built is held otherwise in
	// the page cache than one read from disk, which shows in its RSS.
	if err := dropPageCache(b.Path); err != nil {
		return CompareRun{}, err
	}
	res := &Result{Started: time.Now(), meter: newCPUMeter()}
	s := r.serve
	s.bin, s.args, s.res = b.Path, b.Args, res
	s.logPath, s.keepLog = filepath.Join(r.logDir, "meshpilot-"+name+".log"), false
	if cfg.MeshpilotLog != "" {
		s.logPath, s.keepLog = cfg.MeshpilotLog+"."+name, true
	}
	if cfg.ProfileDir != "" {
		s.profileDir = filepath.Join(cfg.ProfileDir, name)
	}
	sv, err := serveAndConverge(ctx, s)
	if err != nil {
		return CompareRun{}, err
	}
	if err := sv.stop(nil); err != nil {
		return CompareRun{}, err
	}
	i := slices.IndexFunc(res.Phases, func(p Phase) bool { return p.Name == "converged" })
	if i < 0 {
		return CompareRun{}, errors.New("meshpilot's usage once the clients converged could not be read")
	}
	conv := res.Phases[i]
	heapLive := int64(-1)
	if conv.GoMemory != nil {
		heapLive = conv.GoMemory.HeapLive
	}
	cv := res.Convergence
	return CompareRun{
		Started: res.Started,
		CompareFigures: CompareFigures{
			ReadySeconds:  res.SyncSeconds,
			ConvergeAllMS: cv.AllMS, ConvergeP50MS: cv.P50MS, ConvergeP99MS: cv.P99MS,
			ConvergeCPUSeconds: conv.CPUDelta,
			PeakRSS:            res.Peak.HWM,
			HeapLive:           heapLive,
		},
		Convergence: cv,
		Phases:      res.Phases,
	}, nil
}

// medianFigures is each figure's median over runs.
func medianFigures(runs []CompareRun) CompareFigures {
	m := func(get func(CompareFigures) float64) float64 {
		return median(runs, func(r CompareRun) float64 { return get(r.CompareFigures) })
	}
	return CompareFigures{
		ReadySeconds:       m(func(f CompareFigures) float64 { return f.ReadySeconds }),
		ConvergeAllMS:      m(func(f CompareFigures) float64 { return f.ConvergeAllMS }),
		ConvergeP50MS:      m(func(f CompareFigures) float64 { return f.ConvergeP50MS }),
		ConvergeP99MS:      m(func(f CompareFigures) float64 { return f.ConvergeP99MS }),
		ConvergeCPUSeconds: m(func(f CompareFigures) float64 { return f.ConvergeCPUSeconds }),
		PeakRSS:            int64(m(func(f CompareFigures) float64 { return float64(f.PeakRSS) })),
		HeapLive:           int64(m(func(f CompareFigures) float64 { return float64(f.HeapLive) })),
	}
}

// writeSummary prints a table per binary, a row per run and their
// medians, then the medians side by side with each one's change from
// the first binary's.
func (c *CompareResult) writeSummary(out io.Writer) {
	const header = "\tready s\tall converged ms\tp50 ms\tp99 ms\tCPU s converging\tpeak RSS MiB (VmHWM)\tlive heap MiB\t"
	for i, b := range c.Binaries {
		fmt.Fprintf(out, "binary %d: %s\n", i+1, b.describe())
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "round"+header)
		for _, r := range b.Runs {
			fmt.Fprintf(tw, "%d%s\n", r.Round, r.cells(nil))
		}
		fmt.Fprintf(tw, "median%s\n", b.Median.cells(nil))
		tw.Flush()
		fmt.Fprintln(out)
	}
	if len(c.Binaries) < 2 {
		return
	}
	fmt.Fprintf(out, "medians over %d rounds, and their change from binary 1's:\n", c.Rounds)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "binary"+header)
	for i, b := range c.Binaries {
		var base *CompareFigures
		if i > 0 {
			base = &c.Binaries[0].Median
		}
		fmt.Fprintf(tw, "%d%s\n", i+1, b.Median.cells(base))
	}
	tw.Flush()
	fmt.Fprintln(out)
}

// describe is the binary with its arguments.
func (b ComparedBinary) describe() string {
	s := b.Meshpilot
	if b.Build != "" {
		s = fmt.Sprintf("%s (%s build of ./cmd/meshpilot)", s, b.Build)
	}
	if len(b.Args) > 0 {
		s += " " + strings.Join(b.Args, " ")
	}
	return s
}

// cells are f's figures as tab-led table cells, each with its change from
// base's when base is set.
func (f CompareFigures) cells(base *CompareFigures) string {
	var sb strings.Builder
	cell := func(format string, v, b float64, known bool) {
		if !known {
			sb.WriteString("\t-")
			return
		}
		fmt.Fprintf(&sb, "\t"+format, v)
		if base != nil && b > 0 {
			fmt.Fprintf(&sb, " (%+.0f %%)", 100*(v-b)/b)
		}
	}
	var b CompareFigures
	if base != nil {
		b = *base
	}
	cell("%.2f", f.ReadySeconds, b.ReadySeconds, true)
	cell("%.0f", f.ConvergeAllMS, b.ConvergeAllMS, true)
	cell("%.1f", f.ConvergeP50MS, b.ConvergeP50MS, true)
	cell("%.1f", f.ConvergeP99MS, b.ConvergeP99MS, true)
	cell("%.2f", f.ConvergeCPUSeconds, b.ConvergeCPUSeconds, true)
	cell("%.1f", mib(f.PeakRSS), mib(b.PeakRSS), true)
	cell("%.1f", mib(f.HeapLive), mib(b.HeapLive), f.HeapLive >= 0)
	sb.WriteString("\t")
	return sb.String()
}
