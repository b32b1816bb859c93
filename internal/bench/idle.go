package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshpilot/meshpilot/internal/testenv"
)

// IdleConfig says how to measure an idle meshpilot.
type IdleConfig struct {
	// Meshpilot is the binary; empty builds cmd/meshpilot with go build's
	// default flags, as the README does.
	Meshpilot string
	// Runs is how many times meshpilot is started; the figures are the
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
// cluster: medians over the runs, and each run.
type IdleResult struct {
	Meshpilot   string  `json:"meshpilot"`
	BinaryBytes int64   `json:"binary_bytes"`
	Median      Usage   `json:"median"`
	Runs        []Usage `json:"runs"`
}

// Idle starts one API server with nothing written to it, then runs
// `meshpilot serve` against it cfg.Runs times, one at a time, and reads
// VmRSS, RssAnon and RssFile once each run is ready and has settled.
// Before each run the binary's pages leave the page cache, so that every
// run starts as a container's first does: how many of its pages a process
// maps (RssFile) depends on how the page cache holds the file, and a file
// just written is held otherwise than one read from disk.
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
	bin := cfg.Meshpilot
	if bin == "" {
		logf("building meshpilot")
		if bin, err = buildMeshpilot(ctx, workDir); err != nil {
			return nil, err
		}
	}
	st, err := os.Stat(bin)
	if err != nil {
		return nil, fmt.Errorf("the meshpilot binary: %w", err)
	}
	res := &IdleResult{Meshpilot: bin, BinaryBytes: st.Size()}

	env := cfg.Env
	if env == nil {
		logf("starting etcd and kube-apiserver")
		if env, err = testenv.Start(); err != nil {
			return nil, err
		}
		defer env.Stop()
	}

	for i := range max(cfg.Runs, 1) {
		u, err := idleRun(ctx, bin, env.Kubeconfig, filepath.Join(workDir, fmt.Sprintf("meshpilot-%d.log", i)), cfg.Settle)
		if err != nil {
			return nil, err
		}
		logf("run %d: VmRSS %.1f MiB (anon %.1f, file %.1f)", i+1, mib(u.RSS), mib(u.RSSAnon), mib(u.RSSFile))
		res.Runs = append(res.Runs, u)
	}
	res.Median = Usage{
		RSS:     medianOf(res.Runs, func(u Usage) int64 { return u.RSS }),
		HWM:     medianOf(res.Runs, func(u Usage) int64 { return u.HWM }),
		RSSAnon: medianOf(res.Runs, func(u Usage) int64 { return u.RSSAnon }),
		RSSFile: medianOf(res.Runs, func(u Usage) int64 { return u.RSSFile }),
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

// WriteSummary prints the medians and the binary's size.
func (r *IdleResult) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "binary      %s: %.1f MiB (%d bytes)\n", r.Meshpilot, mib(r.BinaryBytes), r.BinaryBytes)
	fmt.Fprintf(w, "idle serve  median of %d: VmRSS %.1f MiB = RssAnon %.1f + RssFile %.1f (VmHWM %.1f)\n",
		len(r.Runs), mib(r.Median.RSS), mib(r.Median.RSSAnon), mib(r.Median.RSSFile), mib(r.Median.HWM))
}
