package meshconfig_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// changes records the keys of a watcher's change events.
type changes struct {
	mu   sync.Mutex // guards keys
	keys []model.ConfigKey
}

// Load counts the events.
func (c *changes) Load() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.keys)
}

// Since returns the keys of the events after the first n.
func (c *changes) Since(n int) []model.ConfigKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.keys[n:])
}

// followed runs w until the test ends and records its change events.
func followed(t *testing.T, w *meshconfig.Watcher) *changes {
	t.Helper()
	events := &changes{}
	w.AppendEventHandler(func(ev model.Event) {
		if ev.Kind != model.ConfigChanged || ev.Config.Kind != model.KindMeshConfig {
			t.Errorf("event %+v, want ConfigChanged of a part of the mesh config", ev)
		}
		events.mu.Lock()
		events.keys = append(events.keys, ev.Config)
		events.mu.Unlock()
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
	return events
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
	if !w.HasSynced() || !cache.IsDone(w.Synced()) || w.Mesh().DefaultHTTPRetry.Attempts != 1 {
		t.Fatalf("after FromFile: synced %v (done %v), settings %+v", w.HasSynced(), cache.IsDone(w.Synced()), w.Mesh())
	}
	if d := meshconfig.Default(); !d.HasSynced() || !cache.IsDone(d.Synced()) {
		t.Fatal("the default mesh config is not synced")
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
	if st := w.Status(""); w.Mesh().DefaultHTTPRetry.Attempts != 0 || !strings.Contains(st.Refused, "defaultHttpRetryPolicy.attempts") {
		t.Errorf("after a bad file: settings %+v, status %+v; want the last good one in force and the refusal shown", w.Mesh().DefaultHTTPRetry, st)
	}

	replace("defaultHttpRetryPolicy: {attempts: 4}\nenableTracing: true\n")
	awaitAttempts(t, w, 4)
	if n := events.Load(); n != 2 {
		t.Errorf("%d change events, want 2 (attempts 0, then 4)\n%s", n, lines)
	}
	if st := w.Status(""); st.Refused != "" || !slices.Equal(st.Ignored, []string{"enableTracing"}) {
		t.Errorf("status %+v, want enableTracing ignored and no refusal", st)
	}

	// Only an ignored field changes: in force at once, and no push.
	from = lines.Len()
	write("defaultHttpRetryPolicy: {attempts: 4}\nenableTracing: false\naccessLogFile: /dev/stdout\n")
	lines.Await(t, "the new config in force", from, func(l string) bool { return strings.Contains(l, "mesh config in force") })
	if n := events.Load(); n != 2 {
		t.Errorf("%d change events after a change of ignored fields, want still 2", n)
	}
	if st := w.Status(""); !slices.Equal(st.Ignored, []string{"accessLogFile", "enableTracing"}) {
		t.Errorf("ignored %q, want accessLogFile and enableTracing", st.Ignored)
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

// TestFileReloadReportsChangedParts edits the file field by field: each
// change is reported as the keys of the parts of the settings it changed,
// and only those, so that a push regenerates only what reads them.
func TestFileReloadReportsChangedParts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := os.WriteFile(path, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lines := testutil.NewLines()
	w, err := meshconfig.FromFile(path, newLogger(lines))
	if err != nil {
		t.Fatal(err)
	}
	if td := w.Mesh().TrustDomain; td != model.DefaultTrustDomain {
		t.Fatalf("trust domain %q by default, want %q", td, model.DefaultTrustDomain)
	}
	events := followed(t, w)
	for _, step := range []struct {
		desc, content string
		want          []model.ConfigKey
		check         func(*model.MeshSettings) bool
	}{
		{
			desc: "trust domain", content: "trustDomain: example.org\n",
			want:  []model.ConfigKey{model.MeshTrustDomainKey},
			check: func(m *model.MeshSettings) bool { return m.TrustDomain == "example.org" },
		},
		{
			desc: "an alias", content: "trustDomain: example.org\ntrustDomainAliases: [old.example.org]\n",
			want: []model.ConfigKey{model.MeshTrustDomainKey},
			check: func(m *model.MeshSettings) bool {
				return slices.Equal(m.TrustDomainAliases, []string{"old.example.org"})
			},
		},
		{
			desc: "the retry policy", content: "trustDomain: example.org\ntrustDomainAliases: [old.example.org]\ndefaultHttpRetryPolicy: {attempts: 1}\n",
			want:  []model.ConfigKey{model.MeshRetryKey},
			check: func(m *model.MeshSettings) bool { return m.DefaultHTTPRetry != nil },
		},
		{
			desc: "an ignored field", content: "trustDomain: example.org\ntrustDomainAliases: [old.example.org]\ndefaultHttpRetryPolicy: {attempts: 1}\nenableTracing: true\n",
		},
		{
			desc: "the root namespace", content: "trustDomain: example.org\ntrustDomainAliases: [old.example.org]\ndefaultHttpRetryPolicy: {attempts: 1}\nrootNamespace: istio-system\n",
			want:  []model.ConfigKey{model.MeshRootNamespaceKey},
			check: func(m *model.MeshSettings) bool { return m.RootNamespace == "istio-system" },
		},
		{
			desc: "service settings", content: "trustDomain: example.org\ntrustDomainAliases: [old.example.org]\ndefaultHttpRetryPolicy: {attempts: 1}\nrootNamespace: istio-system\n" +
				"serviceSettings: [{settings: {clusterLocal: true}, hosts: ['*.shop.svc.cluster.local']}]\n",
			want:  []model.ConfigKey{model.MeshServiceSettingsKey},
			check: func(m *model.MeshSettings) bool { return m.ClusterLocal("cart.shop.svc.cluster.local", "") },
		},
		{
			desc: "locality load balancing", content: "trustDomain: example.org\ntrustDomainAliases: [old.example.org]\ndefaultHttpRetryPolicy: {attempts: 1}\nrootNamespace: istio-system\n" +
				"serviceSettings: [{settings: {clusterLocal: true}, hosts: ['*.shop.svc.cluster.local']}]\nlocalityLbSetting: {failover: [{from: r1, to: r2}]}\n",
			want:  []model.ConfigKey{model.MeshLocalityLBKey},
			check: func(m *model.MeshSettings) bool { return m.LocalityLB != nil && len(m.LocalityLB.Failover) == 1 },
		},
		{
			desc: "back to the defaults: every part", content: "",
			want: []model.ConfigKey{model.MeshRetryKey, model.MeshTrustDomainKey, model.MeshRootNamespaceKey, model.MeshServiceSettingsKey, model.MeshLocalityLBKey},
			check: func(m *model.MeshSettings) bool {
				return m.TrustDomain == model.DefaultTrustDomain && m.DefaultHTTPRetry == nil
			},
		},
	} {
		from, n := lines.Len(), events.Load()
		if err := os.WriteFile(path, []byte(step.content), 0o644); err != nil {
			t.Fatal(err)
		}
		// The log line comes before the events: with none expected, it
		// says the change was seen; else wait for the events.
		lines.Await(t, step.desc+" in force", from, func(l string) bool { return strings.Contains(l, "mesh config in force") })
		poll(t, step.desc+" reported", func() bool { return events.Load() >= n+len(step.want) })
		if got := events.Since(n); !slices.Equal(got, step.want) {
			t.Errorf("%s: events of %v, want %v", step.desc, got, step.want)
		}
		if step.check != nil && !step.check(w.Mesh()) {
			t.Errorf("%s: settings %+v", step.desc, w.Mesh())
		}
	}
}
