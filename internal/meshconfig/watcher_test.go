package meshconfig_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// followed runs w until the test ends and counts its change events.
func followed(t *testing.T, w *meshconfig.Watcher) *atomic.Int64 {
	t.Helper()
	var events atomic.Int64
	w.AppendEventHandler(func(ev model.Event) {
		if ev.Kind != model.ConfigChanged || ev.Config != model.MeshConfigKey {
			t.Errorf("event %+v, want ConfigChanged of %v", ev, model.MeshConfigKey)
		}
		events.Add(1)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &events
}

// poll waits up to testutil.Wait for cond.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testutil.Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited in vain for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling
	}
}

// awaitAttempts waits until the default retry policy in force has the
// given attempts (-1: none set, Istio's default).
func awaitAttempts(t *testing.T, w *meshconfig.Watcher, attempts int32) {
	t.Helper()
	poll(t, fmt.Sprintf("default retry attempts %d", attempts), func() bool {
		got := int32(-1)
		if r := w.Mesh().DefaultHTTPRetry; r != nil {
			got = r.Attempts
		}
		return got == attempts
	})
}

func newLogger(lines *testutil.Lines) *slog.Logger {
	return slog.New(slog.NewTextHandler(lines, nil))
}

// TestFileReload edits the file in place and replaces it as editors do:
// each good version is applied with one event, a bad one is refused with
// a log line naming the file and the field while the last good one stays,
// and a change of fields meshpilot ignores wakes nobody.
func TestFileReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mesh.yaml")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	replace := func(content string) { // write a new file, rename it over
		t.Helper()
		tmp := filepath.Join(dir, ".mesh.yaml.swp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("defaultHttpRetryPolicy: {attempts: 1}\n")
	lines := testutil.NewLines()
	w, err := meshconfig.FromFile(path, newLogger(lines))
	if err != nil {
		t.Fatal(err)
	}
	if !w.HasSynced() || w.Mesh().DefaultHTTPRetry.Attempts != 1 {
		t.Fatalf("after FromFile: synced %v, settings %+v", w.HasSynced(), w.Mesh())
	}
	events := followed(t, w)

	write("defaultHttpRetryPolicy: {attempts: 0}\n")
	awaitAttempts(t, w, 0)

	from := lines.Len()
	replace("defaultHttpRetryPolicy: {attempts: lots}\n")
	lines.Await(t, "the refusal", from, func(l string) bool {
		return strings.Contains(l, "mesh config refused") && strings.Contains(l, "source=\"file "+path+"\"") &&
			strings.Contains(l, "defaultHttpRetryPolicy.attempts")
	})
	if st := w.Status(); w.Mesh().DefaultHTTPRetry.Attempts != 0 || !strings.Contains(st.Refused, "defaultHttpRetryPolicy.attempts") {
		t.Errorf("after a bad file: settings %+v, status %+v; want the last good one in force and the refusal shown", w.Mesh().DefaultHTTPRetry, st)
	}

	replace("defaultHttpRetryPolicy: {attempts: 4}\ntrustDomain: example.org\n")
	awaitAttempts(t, w, 4)
	if n := events.Load(); n != 2 {
		t.Errorf("%d change events, want 2 (attempts 0, then 4)\n%s", n, lines)
	}
	if st := w.Status(); st.Refused != "" || !slices.Equal(st.Ignored, []string{"trustDomain"}) {
		t.Errorf("status %+v, want trustDomain ignored and no refusal", st)
	}

	// Only an ignored field changes: in force at once, and no push.
	from = lines.Len()
	write("defaultHttpRetryPolicy: {attempts: 4}\ntrustDomain: example.com\naccessLogFile: /dev/stdout\n")
	lines.Await(t, "the new config in force", from, func(l string) bool { return strings.Contains(l, "mesh config in force") })
	if n := events.Load(); n != 2 {
		t.Errorf("%d change events after a change of ignored fields, want still 2", n)
	}
	if st := w.Status(); !slices.Equal(st.Ignored, []string{"accessLogFile", "trustDomain"}) {
		t.Errorf("ignored %q, want accessLogFile and trustDomain", st.Ignored)
	}
}

func TestFromFileRefusesABadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := os.WriteFile(path, []byte("defaultHttpRetryPolicy: {attempts: -2}"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := meshconfig.FromFile(path, nil)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "defaultHttpRetryPolicy.attempts") {
		t.Fatalf("error %v, want one naming the file and the field", err)
	}
}
