package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/testutil"
)

// TestCompareRun compares one binary with itself under two debounce
// windows on the tiny workload: the workload is written once, each
// binary runs once per round, the binaries in turn, every client
// converges in every run, and the runs' figures and their medians are
// reported, in the summary and the JSON. It sets no timing thresholds.
func TestCompareRun(t *testing.T) {
	// The build is bounded by the test's deadline alone, as Run's is.
	bin, err := buildMeshpilot(testutil.Context(t), t.TempDir(), releaseBuild)
	if err != nil {
		t.Fatal(err)
	}
	cfg := smallConfig(5, "compare")
	cfg.Meshpilot = bin
	otherArgs := []string{"--debounce-after=20ms", "--max-new-streams-per-second=0"}
	cfg.Compare = CompareConfig{Rounds: 2, Binaries: []Binary{{Path: bin, Args: otherArgs}}}
	res, log := runSmall(t, cfg)

	// 2 namespaces + 3 nodes + 5 services + 10 pods (create and status)
	// + 5 slices, once for all four runs.
	if want := int64(2 + 3 + 5 + 2*10 + 5); res.Setup.Writes != want {
		t.Errorf("setup writes = %d, want %d", res.Setup.Writes, want)
	}
	if res.Churn != nil || len(res.Phases) != 0 {
		t.Errorf("churn %+v, phases %+v; want neither in a compare run", res.Churn, res.Phases)
	}
	c := res.Compare
	if c == nil || c.Rounds != 2 || len(c.Binaries) != 2 {
		t.Fatalf("compare result %+v, want 2 rounds of 2 binaries", c)
	}
	for i, want := range [][]string{cfg.MeshpilotArgs, otherArgs} {
		if b := c.Binaries[i]; b.Meshpilot != bin || b.Build != "" || !slices.Equal(b.Args, want) {
			t.Errorf("binary %d: %s (build %q) with %v, want %s given, with %v", i+1, b.Meshpilot, b.Build, b.Args, bin, want)
		}
	}

	var started []CompareRun // in the order the runs should have started
	for round := range 2 {
		for _, b := range c.Binaries {
			if len(b.Runs) != 2 {
				t.Fatalf("binary %s: %d runs, want 2", b.describe(), len(b.Runs))
			}
			started = append(started, b.Runs[round])
		}
	}
	for i, r := range started {
		if r.Round != i/2+1 {
			t.Errorf("run %d: round %d, want %d", i, r.Round, i/2+1)
		}
		if i > 0 && !r.Started.After(started[i-1].Started) {
			t.Errorf("run %d started at %s, not after run %d (%s): the binaries should take turns in each round", i, r.Started, i-1, started[i-1].Started)
		}
		// A client that had not converged would have no time, and the
		// percentiles would be out of order.
		cv := r.Convergence
		if cv.Clients != cfg.Clients || cv.Connections < 1 || cv.P50MS <= 0 || cv.P50MS > cv.P99MS || cv.P99MS > cv.MaxMS || cv.MaxMS > cv.AllMS {
			t.Errorf("run %d: convergence %+v, want all %d clients converged, in order", i, cv, cfg.Clients)
		}
		if f := r.CompareFigures; f.ReadySeconds <= 0 || f.ConvergeAllMS != cv.AllMS || f.ConvergeP50MS != cv.P50MS || f.ConvergeP99MS != cv.P99MS ||
			f.ConvergeCPUSeconds < 0 || f.PeakRSS <= 0 || f.HeapLive <= 0 || f.HeapLive >= f.PeakRSS {
			t.Errorf("run %d: implausible figures %+v", i, f)
		}
		var phases []string
		for _, p := range r.Phases {
			phases = append(phases, p.Name)
		}
		if want := []string{"sync", "converged"}; !slices.Equal(phases, want) {
			t.Errorf("run %d: phases %v, want %v", i, phases, want)
		} else if r.ConvergeCPUSeconds != r.Phases[1].CPUDelta || r.PeakRSS != r.Phases[1].HWM {
			t.Errorf("run %d: CPU %v s and peak %d, want the converged phase's %v s and VmHWM %d", i, r.ConvergeCPUSeconds, r.PeakRSS, r.Phases[1].CPUDelta, r.Phases[1].HWM)
		}
	}
	// Of two runs, the median is their mean.
	for _, b := range c.Binaries {
		x, y, m := b.Runs[0].CompareFigures, b.Runs[1].CompareFigures, b.Median
		for _, f := range []struct {
			name    string
			x, y, m float64
			ulp     float64
		}{
			{"ready", x.ReadySeconds, y.ReadySeconds, m.ReadySeconds, 0},
			{"all converged", x.ConvergeAllMS, y.ConvergeAllMS, m.ConvergeAllMS, 0},
			{"p50", x.ConvergeP50MS, y.ConvergeP50MS, m.ConvergeP50MS, 0},
			{"p99", x.ConvergeP99MS, y.ConvergeP99MS, m.ConvergeP99MS, 0},
			{"CPU", x.ConvergeCPUSeconds, y.ConvergeCPUSeconds, m.ConvergeCPUSeconds, 0},
			{"peak RSS", float64(x.PeakRSS), float64(y.PeakRSS), float64(m.PeakRSS), 1},
			{"live heap", float64(x.HeapLive), float64(y.HeapLive), float64(m.HeapLive), 1},
		} {
			if math.Abs(f.m-(f.x+f.y)/2) > f.ulp+1e-9 {
				t.Errorf("binary %s: median %s %v, want the mean of %v and %v", b.describe(), f.name, f.m, f.x, f.y)
			}
		}
	}
	// Every meshpilot stopped before the next started, and the last
	// before Run returned.
	for pid, name := range childProcesses(os.Getpid()) {
		if name == "meshpilot" {
			t.Errorf("meshpilot %d still runs", pid)
		}
	}

	var sum bytes.Buffer
	res.WriteSummary(&sum)
	for _, want := range []string{"2 binaries compared over 2 rounds", "binary 1: " + bin + " --debounce-after=50ms",
		"binary 2: " + bin + " " + strings.Join(otherArgs, " "), "CPU s converging", "median", "medians over 2 rounds", " %)"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	if strings.Contains(sum.String(), "meshpilot ready in") {
		t.Error("the summary's setup line gives a time to ready, which is each run's in a compare run")
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || back.Compare == nil || len(back.Compare.Binaries[1].Runs) != 2 ||
		back.Compare.Binaries[1].Runs[1].CompareFigures != c.Binaries[1].Runs[1].CompareFigures {
		t.Errorf("the JSON does not hold every run's figures (%v):\n%s", err, b)
	}
	if t.Failed() {
		t.Logf("progress:\n%s\nsummary:\n%s", log.String(), sum.String())
	}
}

func TestValidateCompare(t *testing.T) {
	cfg := Defaults()
	cfg.Compare = CompareConfig{Rounds: 0, Binaries: []Binary{{Path: ""}}}
	cfg.Soak = cfg.SoakSample
	err := cfg.validate()
	for _, want := range []string{"rounds must be positive", "needs a path", "without a soak"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate = %v, want an error saying %q", err, want)
		}
	}
	cfg = Defaults()
	if err := cfg.validate(); err != nil {
		t.Errorf("validate of the defaults = %v: no binaries to compare, no compare run", err)
	}
}
