package file

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestSymlinkOutOfTheFolderNotFollowed: a manifest that is a symlink
// leading out of --from (to another folder's manifest, or to a file such
// as a service-account token) is not read: it is a problem of its own,
// and nothing of the target is served or logged. A symlink that stays in the folder is followed, as a
// ConfigMap volume's ..data links are (TestFollowsAConfigMapVolume).
func TestSymlinkOutOfTheFolderNotFollowed(t *testing.T) {
	outside := t.TempDir()
	other := strings.ReplaceAll(goodService, "name: echo", "name: elsewhere")
	if err := os.WriteFile(filepath.Join(outside, "elsewhere.yaml"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	const token = "eyJhbGciOiJSUzI1NiJ9.meshpilot-token"
	if err := os.WriteFile(filepath.Join(outside, "token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "echo.yaml"), []byte(goodService+"---\n"+goodSlice), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"inside.yaml":    filepath.Join("sub", "echo.yaml"),
		"relative.yaml":  filepath.Join("..", filepath.Base(outside), "elsewhere.yaml"),
		"absolute.yaml":  filepath.Join(outside, "elsewhere.yaml"),
		"token.yaml":     filepath.Join(outside, "token"),
		"sub/token.yaml": filepath.Join("..", "..", filepath.Base(outside), "token"),
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	h := start(t, dir, Options{})
	if got := healthOf(h.reg, "echo.default.svc.cluster.local", 7070); got["192.0.2.11"] != model.Healthy {
		t.Fatalf("the in-folder symlink's service: endpoints %v", got)
	}
	if svc := h.reg.GetService("elsewhere.default.svc.cluster.local"); svc != nil {
		t.Fatalf("a manifest out of the folder is served: %+v", svc)
	}
	refused := map[string]bool{}
	for _, p := range h.reg.Problems() {
		if strings.Contains(p.Message, "leads out of the folder") {
			refused[p.File] = true
		}
	}
	for name := range links {
		if want := name != "inside.yaml"; refused[filepath.Join(dir, name)] != want {
			t.Errorf("%s: refused %v, want %v; problems: %s", name, !want, want, describe(h.reg.Problems()))
		}
	}
	if strings.Contains(h.logs.String(), "meshpilot-token") {
		t.Fatalf("the token out of the folder reached the log:\n%s", h.logs)
	}
}

// TestFileOverTheSizeLimitRefused: a manifest over MaxFileBytes is a
// problem saying so, and its last good content stays in force.
func TestFileOverTheSizeLimitRefused(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, Options{MaxFileBytes: 4096})
	h.drain()
	path := h.write("echo.yaml", goodService+"---\n"+goodSlice)
	const echo = model.Hostname("echo.default.svc.cluster.local")
	h.awaitEvent(model.ServiceChanged, echo)
	before := h.reg.Reloads()
	h.write("echo.yaml", goodService+"---\n"+strings.Replace(goodSlice, "ready: true", "ready: false", 1)+"# "+strings.Repeat("x", 5000)+"\n")
	h.awaitReload(before)
	var msg string
	for _, p := range h.reg.Problems() {
		if p.File == path {
			msg = p.Message
		}
	}
	if !strings.Contains(msg, "over the limit of 4096") {
		t.Fatalf("problem of the large file %q; all: %s", msg, describe(h.reg.Problems()))
	}
	if got := healthOf(h.reg, echo, 7070); got["192.0.2.11"] != model.Healthy {
		t.Fatalf("the last good content is not in force: %v", got)
	}
}
