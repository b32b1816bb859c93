package crd

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// TestSecurityRootNamespaceFollowsMeshConfig: MeshConfig's rootNamespace
// decides whose policies apply mesh-wide, and its change wakes what read
// the policies of the old and the new root namespace.
func TestSecurityRootNamespaceFollowsMeshConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := os.WriteFile(path, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lines := testutil.NewLines()
	mesh, err := meshconfig.FromFile(path, slog.New(slog.NewTextHandler(lines, nil)))
	if err != nil {
		t.Fatal(err)
	}
	store := newSecStore()
	sec := NewSecurity(store, SecurityOptions{Mesh: mesh})
	var mu sync.Mutex // guards pushed
	var pushed []string
	sec.AppendEventHandler(func(ev model.Event) {
		mu.Lock()
		pushed = append(pushed, ev.Config.String())
		mu.Unlock()
	})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store.applyPeer(t, "istio-system", "default", "mtls: {mode: STRICT}", t0)
	store.applyPeer(t, "mesh", "default", "mtls: {mode: DISABLE}", t0)
	mu.Lock()
	pushed = nil
	mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mesh.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	if mode, _ := model.MTLSFor(sec.SecurityPoliciesFor("apps"), "apps", nil, 80); mode != model.MTLSStrict {
		t.Fatalf("mode under istio-system's policy = %v, want STRICT", mode)
	}

	from := lines.Len()
	if err := os.WriteFile(path, []byte("rootNamespace: mesh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lines.Await(t, "the new root namespace in force", from, func(l string) bool { return strings.Contains(l, "mesh config in force") })
	want := []string{model.SecurityNamespaceKey("istio-system").String(), model.SecurityNamespaceKey("mesh").String()}
	testenv.Eventually(t, "the root namespace's change", func() (bool, string) {
		mu.Lock()
		got := slices.Clone(pushed)
		mu.Unlock()
		slices.Sort(got)
		mode, _ := model.MTLSFor(sec.SecurityPoliciesFor("apps"), "apps", nil, 80)
		return slices.Equal(got, want) && mode == model.MTLSDisable, "pushed " + strings.Join(got, " ") + "; mode " + mode.String()
	})
}
