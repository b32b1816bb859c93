package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshpilot/meshpilot/internal/testenv"
)

// IdleConfig says how to measure an idle meshpilot.
type IdleConfig struct {
	// Meshpilot is the binary; empty builds cmd/meshpilot twice, with go
	// build's default flags, as the README does, and as the Dockerfile
	// builds the image's binary, and measures both.
	Meshpilot string
	// Runs is how many times each binary is started; the figures are the
	// medians over the runs.
	Runs int
	// Settle is the pause after /readyz answers 200 before /proc is read,
	// so that start-up work (the first model, the first GC cycles) is done.
	Settle time.Duration
	// Log receives progress lines; nil drops them.
	Log io.Writer
	// Env is an empty API server to use; nil starts one.
	Env *testenv.Env
}

// IdleResult is the footprint of `meshpilot serve` against an empty
// cluster, for each binary measured.
type IdleResult struct {
	Builds []IdleBuild `json:"builds"`
}

// IdleBuild is one binary's footprint: medians over the runs, and each
// run.
type IdleBuild struct {
	// Build is "go build", "release" (the Dockerfile's flags) or "given"
	// (IdleConfig.Meshpilot).
	Build       string  `json:"build"`
	Meshpilot   string  `json:"meshpilot"`
	BinaryBytes int64   `json:"binary_bytes"`
	Median      Usage   `json:"median"`
	Runs        []Usage `json:"runs"`
}

// Idle starts one API server with nothing written to it, then runs
// `meshpilot serve` of each binary against it cfg.Runs times, one process
// at a time and the binaries in turn, so that a slower spell of the
// machine falls on all of them, and reads VmRSS, RssAnon and RssFile once
// each run is ready and has settled. Before each run the binary's pages
// leave the page cache, so that every run starts as a container's first
// does: how many of its pages a process maps (RssFile) depends on how the
// page cache holds the file, and a file just written is held otherwise
// than one read from disk.
func Idle(ctx context.Context, cfg IdleConfig) (*IdleResult, error) {
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}
	workDir, err := os.MkdirTemp("", "meshbench-idle-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(workDir)
	res := &IdleResult{}
	if cfg.Meshpilot != "" {
		res.Builds = []IdleBuild{{Build: "given", Meshpilot: cfg.Meshpilot}}
	} else {
		for i, b := range []meshpilotBuild{goBuild, releaseBuild} {
			logf("building meshpilot (%s)", b.name)
			dir := filepath.Join(workDir, fmt.Sprint("build-", i))
			if err := os.Mkdir(dir, 0o755); err != nil {
				return nil, err
			}
			bin, err := buildMeshpilot(ctx, dir, b)
			if err != nil {
				return nil, err
			}
			res.Builds = append(res.Builds, IdleBuild{Build: b.name, Meshpilot: bin})
		}
	}
	for i := range res.Builds {
		st, err := os.Stat(res.Builds[i].Meshpilot)
		if err != nil {
			return nil, fmt.Errorf("the meshpilot binary: %w", err)
		}
		res.Builds[i].BinaryBytes = st.Size()
	}

	env := cfg.Env
	if env == nil {
		logf("starting etcd and kube-apiserver")
		if env, err = testenv.Start(); err != nil {
			return nil, err
		}
		defer env.Stop()
	}

	for i := range max(cfg.Runs, 1) {
		for j := range res.Builds {
			b := &res.Builds[j]
			u, err := idleRun(ctx, b.Meshpilot, env.Kubeconfig, filepath.Join(workDir, fmt.Sprintf("meshpilot-%d-%d.log", j, i)), cfg.Settle)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", b.Build, err)
			}
			logf("run %d, %s: VmRSS %.1f MiB (anon %.1f, file %.1f)", i+1, b.Build, mib(u.RSS), mib(u.RSSAnon), mib(u.RSSFile))
			b.Runs = append(b.Runs, u)
		}
	}
	for i := range res.Builds {
		b := &res.Builds[i]
		b.Median = Usage{
			RSS:     medianOf(b.Runs, func(u Usage) int64 { return u.RSS }),
			HWM:     medianOf(b.Runs, func(u Usage) int64 { return u.HWM }),
			RSSAnon: medianOf(b.Runs, func(u Usage) int64 { return u.RSSAnon }),
			RSSFile: medianOf(b.Runs, func(u Usage) int64 { return u.RSSFile }),
		}
	}
	return res, nil
}

func idleRun(ctx context.Context, bin, kubeconfig, logPath string, settle time.Duration) (Usage, error) {
	if err := dropPageCache(bin); err != nil {
		return Usage{}, err
	}
	xdsAddr, err := freeAddr()
	if err != nil {
		return Usage{}, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return Usage{}, err
	}
	proc, err := startProcess(bin, []string{"serve", "--kubeconfig", kubeconfig, "--xds-addr", xdsAddr, "--http-addr", httpAddr}, logPath)
	if err != nil {
		return Usage{}, err
	}
	defer proc.stop(10 * time.Second)
	readyCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := proc.awaitReady(readyCtx, "http://"+httpAddr+"/readyz"); err != nil {
		return Usage{}, err
	}
	select {
	case <-ctx.Done():
		return Usage{}, ctx.Err()
	case <-time.After(settle):
	}
	if err := proc.alive(); err != nil {
		return Usage{}, err
	}
	return readUsage(proc.pid())
}

// dropPageCache asks the kernel to drop the file's clean pages from the
// page cache.
func dropPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("dropping %s from the page cache: %w", path, err)
	}
	return nil
}

func medianOf(runs []Usage, field func(Usage) int64) int64 {
	v := make([]int64, len(runs))
	for i, u := range runs {
		v[i] = field(u)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// WriteSummary prints a row per binary: its size and the medians.
func (r *IdleResult) WriteSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "build\tbinary bytes\tMiB\tidle VmRSS MiB\tRssAnon\tRssFile\tVmHWM\truns\t")
	for _, b := range r.Builds {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t\n",
			b.Build, b.BinaryBytes, mib(b.BinaryBytes), mib(b.Median.RSS), mib(b.Median.RSSAnon), mib(b.Median.RSSFile), mib(b.Median.HWM), len(b.Runs))
	}
	tw.Flush()
}
