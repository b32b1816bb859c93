package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/testutil"
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
// both builds are made, serve becomes ready twice from each, and its
// memory is read; the summary has a row per build.
func TestIdle(t *testing.T) {
	var log bytes.Buffer
	// Two builds of meshpilot, bounded by the test's deadline alone.
	res, err := Idle(testutil.Context(t), IdleConfig{Runs: 2, Settle: 100 * time.Millisecond, Log: &log, Env: env})
	if err != nil {
		t.Fatalf("idle: %v\n%s", err, log.String())
	}
	if len(res.Builds) != 2 || res.Builds[0].Build != goBuild.name || res.Builds[1].Build != releaseBuild.name {
		t.Fatalf("builds %+v, want go build's and the release build", res.Builds)
	}
	for _, b := range res.Builds {
		if b.BinaryBytes < 1<<20 || len(b.Runs) != 2 {
			t.Fatalf("%s: binary of %d bytes and %d runs, want a built binary and 2 runs", b.Build, b.BinaryBytes, len(b.Runs))
		}
		for i, u := range b.Runs {
			if u.RSSAnon <= 0 || u.RSSFile <= 0 || u.RSS < u.RSSAnon+u.RSSFile || u.HWM < u.RSS {
				t.Errorf("%s run %d: %+v, want anon and file RSS that add up to at most VmRSS (which adds shared memory), and a peak at least VmRSS", b.Build, i+1, u)
			}
		}
		if m := b.Median.RSS; m < min(b.Runs[0].RSS, b.Runs[1].RSS) || m > max(b.Runs[0].RSS, b.Runs[1].RSS) {
			t.Errorf("%s: median VmRSS %d outside the runs' %d and %d", b.Build, m, b.Runs[0].RSS, b.Runs[1].RSS)
		}
		if !strings.Contains(log.String(), "run 2, "+b.Build+": VmRSS") {
			t.Errorf("no progress line for each run of %s:\n%s", b.Build, log.String())
		}
	}
	// Without symbols and DWARF the release binary is the smaller.
	if r, g := res.Builds[1].BinaryBytes, res.Builds[0].BinaryBytes; r >= g {
		t.Errorf("release binary of %d bytes, go build's %d: want it smaller", r, g)
	}
	var sum strings.Builder
	res.WriteSummary(&sum)
	lines := strings.Split(strings.TrimSuffix(sum.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(strings.TrimSpace(lines[1]), goBuild.name+" ") ||
		!strings.HasPrefix(strings.TrimSpace(lines[2]), releaseBuild.name+" ") {
		t.Errorf("summary, want a header and a row per build:\n%s", sum.String())
	}
}

// TestIdleGivenBinary: with a binary given, only it is measured, and a
// missing one is an error before anything starts.
func TestIdleGivenBinary(t *testing.T) {
	_, err := Idle(t.Context(), IdleConfig{Meshpilot: filepath.Join(t.TempDir(), "missing"), Env: env})
	if err == nil || !strings.Contains(err.Error(), "the meshpilot binary") {
		t.Fatalf("error %v, want one about the meshpilot binary", err)
	}
}
