package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// TestSmallRun runs the whole benchmark on a tiny workload against the
// package's API server and checks that every figure is there and sane;
// it sets no timing thresholds.
func TestSmallRun(t *testing.T) {
	cfg := Defaults()
	cfg.Services, cfg.Namespaces, cfg.Endpoints = 5, 2, 2
	cfg.Clients, cfg.PerClient = 3, 2
	cfg.Changes, cfg.Rate = 3, 20
	cfg.Nodes = 3
	cfg.Timeout = 5 * time.Minute
	cfg.Settle = 200 * time.Millisecond
	cfg.Prefix = "small"
	cfg.Env = env
	cfg.MeshpilotArgs = []string{"--debounce-after=50ms"}
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, log.String())
	}
	// 2 namespaces + 3 nodes + 5 services + 10 pods (create and status) + 5 slices.
	if want := int64(2 + 3 + 5 + 2*10 + 5); res.Setup.Writes != want {
		t.Errorf("setup writes = %d, want %d", res.Setup.Writes, want)
	}
	cv := res.Convergence
	if cv.Clients != 3 || cv.P50MS <= 0 || cv.P50MS > cv.P99MS || cv.P99MS > cv.MaxMS || cv.MaxMS > cv.AllMS {
		t.Errorf("convergence figures out of order: %+v", cv)
	}
	ch := res.Churn
	if ch == nil {
		t.Fatal("no churn result")
	}
	if ch.Changes != 3 || ch.Misses != 0 || ch.Pairs < 3 || ch.Pairs > 9 {
		t.Errorf("churn: %+v, want 3 changes, 3 to 9 pairs (each change reaches 1 to 3 clients), no misses", *ch)
	}
	if ch.P50MS > ch.P90MS || ch.P90MS > ch.P99MS || ch.P99MS > ch.MaxMS || ch.MaxMS >= cfg.MissTimeout.Seconds()*1000 {
		t.Errorf("churn percentiles out of order: %+v", *ch)
	}
	if len(res.Phases) != 3 {
		t.Fatalf("phases = %+v, want sync, converged, churn", res.Phases)
	}
	for i, p := range res.Phases {
		if p.RSS <= 0 || p.HWM < p.RSS || p.CPUSeconds <= 0 || p.CPUDelta < 0 || p.Threads <= 0 {
			t.Errorf("phase %s: implausible usage %+v", p.Name, p)
		}
		if i > 0 && p.CPUSeconds < res.Phases[i-1].CPUSeconds {
			t.Errorf("phase %s: CPU time went down", p.Name)
		}
	}
	// Each client gets one response per type at least, EDS also at least
	// one more during churn (changes close together may share a push).
	for _, typ := range []string{"lds", "rds", "cds"} {
		if res.XDS.Responses[typ] < 3 {
			t.Errorf("%s responses = %d, want at least one per client", typ, res.XDS.Responses[typ])
		}
	}
	if res.XDS.Responses["eds"] < 4 {
		t.Errorf("eds responses = %d, want at least 4", res.XDS.Responses["eds"])
	}
	if len(ch.PerChange) != 3 {
		t.Errorf("per-change records: %+v, want 3", ch.PerChange)
	}

	var sum bytes.Buffer
	res.WriteSummary(&sum)
	for _, want := range []string{"converge (3 clients)", "churn (", "sync", "converged"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	if t.Failed() {
		t.Logf("progress:\n%s\nsummary:\n%s", log.String(), sum.String())
	}
}

func TestValidate(t *testing.T) {
	cfg := Defaults()
	cfg.PerClient = cfg.Services + 1
	cfg.Clients = 0
	err := cfg.validate()
	if err == nil || !strings.Contains(err.Error(), "per-client") || !strings.Contains(err.Error(), "clients must be positive") {
		t.Fatalf("validate = %v, want errors naming per-client and clients", err)
	}
}

func TestReadUsage(t *testing.T) {
	u, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.HWM < u.RSS || u.Threads <= 0 || u.RSSAnon <= 0 {
		t.Fatalf("implausible usage of this process: %+v", u)
	}
}

func TestDist(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(101-i)*time.Millisecond)
	}
	ds := newDist(d)
	if ds.p(50) != 50 || ds.p(99) != 99 || ds.p(100) != 100 || ds.mean() != 50.5 {
		t.Fatalf("p50 %v p99 %v max %v mean %v", ds.p(50), ds.p(99), ds.p(100), ds.mean())
	}
	if newDist(nil).p(99) != 0 {
		t.Fatal("empty distribution")
	}
}

// The benchmark builds meshpilot when no binary is given; a missing
// binary is a clear error before anything starts.
func TestMissingBinary(t *testing.T) {
	cfg := Defaults()
	cfg.Env = env
	cfg.Prefix = "missing"
	cfg.Services, cfg.Namespaces, cfg.Endpoints, cfg.Clients, cfg.PerClient, cfg.Changes = 1, 1, 1, 1, 1, 0
	cfg.Meshpilot = filepath.Join(t.TempDir(), "no-such-meshpilot")
	_, err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "no-such-meshpilot") {
		t.Fatalf("err = %v, want one naming the binary", err)
	}
}
