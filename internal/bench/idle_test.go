package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMedianOf(t *testing.T) {
	cases := []struct {
		rss  []int64
		want int64
	}{
		{[]int64{5}, 5},
		{[]int64{9, 1, 5}, 5},
		{[]int64{3, 3, 1}, 3},
	}
	for _, c := range cases {
		runs := make([]Usage, len(c.rss))
		for i, r := range c.rss {
			runs[i].RSS = r
		}
		if got := medianOf(runs, func(u Usage) int64 { return u.RSS }); got != c.want {
			t.Errorf("median of %v = %d, want %d", c.rss, got, c.want)
		}
	}
}

// TestDropPageCache: the kernel takes the advice for a file, and a
// missing binary is an error that names it.
func TestDropPageCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := dropPageCache(path); err != nil {
		t.Fatal(err)
	}
	if err := dropPageCache(path + "-missing"); err == nil {
		t.Fatal("no error for a missing file")
	}
}

// TestIdle runs `meshbench idle` once against the package's API server:
// the binary is built, serve becomes ready, and its memory is read.
func TestIdle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var log bytes.Buffer
	res, err := Idle(ctx, IdleConfig{Runs: 2, Settle: 100 * time.Millisecond, Log: &log, Env: env})
	if err != nil {
		t.Fatalf("idle: %v\n%s", err, log.String())
	}
	if res.BinaryBytes < 1<<20 || len(res.Runs) != 2 {
		t.Fatalf("binary of %d bytes and %d runs, want a built binary and 2 runs", res.BinaryBytes, len(res.Runs))
	}
	for i, u := range res.Runs {
		if u.RSSAnon <= 0 || u.RSSFile <= 0 || u.RSS < u.RSSAnon+u.RSSFile || u.HWM < u.RSS {
			t.Errorf("run %d: %+v, want anon and file RSS that add up to at most VmRSS (which adds shared memory), and a peak at least VmRSS", i+1, u)
		}
	}
	if m := res.Median.RSS; m < min(res.Runs[0].RSS, res.Runs[1].RSS) || m > max(res.Runs[0].RSS, res.Runs[1].RSS) {
		t.Errorf("median VmRSS %d outside the runs' %d and %d", m, res.Runs[0].RSS, res.Runs[1].RSS)
	}
	if !strings.Contains(log.String(), "run 2: VmRSS") {
		t.Errorf("no progress line for each run:\n%s", log.String())
	}
}
