package file

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/examples"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// wait bounds every wait of these tests.
const wait = 20 * time.Second

type harness struct {
	t      *testing.T
	dir    string
	reg    *Registry
	logs   *testutil.Lines
	events chan model.Event
}

// start runs a registry on dir until the test ends.
func start(t *testing.T, dir string, opts Options) *harness {
	t.Helper()
	return startWith(t, dir, opts, nil)
}

// startWith is start, with beforeRun called on the registry before it
// runs (to append handlers).
func startWith(t *testing.T, dir string, opts Options, beforeRun func(*Registry)) *harness {
	t.Helper()
	h := &harness{t: t, dir: dir, logs: testutil.NewLines(), events: make(chan model.Event, 1000)}
	opts.Dir = dir
	opts.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.reg = reg
	reg.AppendEventHandler(func(ev model.Event) { h.events <- ev })
	if beforeRun != nil {
		beforeRun(reg)
	}
	t.Cleanup(func() { // runs after the registry has stopped
		if t.Failed() {
			t.Logf("registry log:\n%s", h.logs.String())
		}
	})
	runUntilCleanup(t, "file", reg)
	return h
}

// runUntilCleanup runs a registry until the test ends and waits for its
// first model.
func runUntilCleanup(t *testing.T, name string, reg interface {
	Run(context.Context) error
	HasSynced() bool
}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s registry: %v", name, err)
		}
	})
	deadline := time.Now().Add(wait)
	for !reg.HasSynced() {
		if time.Now().After(deadline) {
			t.Fatalf("the %s registry never synced", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// until polls cond until it holds or the deadline passes.
func (h *harness) until(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitEvent waits for an event about hostname of the given kind.
func (h *harness) awaitEvent(kind model.EventKind, hostname model.Hostname) model.Event {
	h.t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case ev := <-h.events:
			if ev.Kind == kind && ev.Hostname == hostname {
				return ev
			}
		case <-timeout:
			h.t.Fatalf("no %s event for %s", kind, hostname)
			return model.Event{}
		}
	}
}

// drain forgets the events seen so far.
func (h *harness) drain() {
	for {
		select {
		case <-h.events:
		default:
			return
		}
	}
}

func (h *harness) write(name, content string) string {
	h.t.Helper()
	p := filepath.Join(h.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// awaitReload waits until the folder has been read again after now.
func (h *harness) awaitReload(before uint64) {
	h.t.Helper()
	h.until("a reload", func() bool { return h.reg.Reloads() > before })
}

const greeter = model.Hostname("greeter.demo.svc.cluster.local")

func copyExamples(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := examples.CopyMesh(dir, 0); err != nil {
		t.Fatal(err)
	}
	return dir
}

func healthOf(reg *Registry, host model.Hostname, port int32) map[string]model.Health {
	out := map[string]model.Health{}
	for _, ep := range reg.Endpoints(host, port, nil) {
		out[ep.Address] = ep.Health
	}
	return out
}

func TestServesTheExampleMeshLikeACluster(t *testing.T) {
	h := start(t, copyExamples(t), Options{})
	if ps := h.reg.Problems(); len(ps) > 0 {
		t.Fatalf("the bundled example has problems:\n%s", describe(ps))
	}
	svc := h.reg.GetService(greeter)
	if svc == nil {
		t.Fatalf("no service %s; have %v", greeter, h.reg.Services())
	}
	if len(svc.Ports) != 1 || svc.Ports[0].Protocol != model.GRPC || svc.Ports[0].TargetPort != examples.BackendPort {
		t.Fatalf("ports %+v", svc.Ports)
	}
	eps := h.reg.Endpoints(greeter, examples.GreeterPort, nil)
	if len(eps) != 3 {
		t.Fatalf("%d endpoints, want 3", len(eps))
	}
	for i, ep := range eps {
		want := model.Endpoint{
			Address: fmt.Sprintf("127.0.0.1%d", i+1), Port: examples.BackendPort, ServicePortName: "grpc",
			Locality: model.Locality{Region: "eu-west", Zone: "eu-west-" + string(rune('a'+i))},
			Health:   model.Healthy, Namespace: "demo", PodName: fmt.Sprintf("greeter-%d", i+1),
			NodeName: "node-" + string(rune('a'+i)), ServiceAccount: "greeter",
		}
		got := *ep
		got.Labels = nil
		if !got.Equal(&want) {
			t.Errorf("endpoint %d:\n got %+v\nwant %+v", i, got, want)
		}
		if ep.Labels["app"] != "greeter" || ep.Labels["topology.kubernetes.io/zone"] != want.Locality.Zone {
			t.Errorf("endpoint %d labels %v: want the Pod's and the locality's", i, ep.Labels)
		}
	}
	w := h.reg.WorkloadByIP("127.0.0.12")
	if w == nil || w.Name != "greeter-2" || w.Locality.Zone != "eu-west-b" {
		t.Fatalf("workload of 127.0.0.12: %+v", w)
	}
	if h.reg.WorkloadByIP("127.0.0.99") != nil {
		t.Fatal("a workload for an unknown IP")
	}
}

func TestFollowsEdits(t *testing.T) {
	dir := copyExamples(t)
	// A longer quiet period than the default, so that a busy test machine
	// cannot split one save in two.
	h := start(t, dir, Options{Settle: 200 * time.Millisecond})
	slice := filepath.Join(dir, examples.EndpointsFile)
	original, err := os.ReadFile(slice)
	if err != nil {
		t.Fatal(err)
	}
	notReady := strings.Replace(string(original), "ready: true", "ready: false", 2) // 127.0.0.11 and .12

	t.Run("a saved edit", func(t *testing.T) {
		h.drain()
		saved := time.Now()
		h.write(examples.EndpointsFile, notReady)
		ev := h.awaitEvent(model.EndpointsChanged, greeter)
		if ev.Observed.Before(saved) || ev.Observed.After(time.Now()) {
			t.Fatalf("the event says the change was seen at %v; the file was saved at %v", ev.Observed, saved)
		}
		got := healthOf(h.reg, greeter, examples.GreeterPort)
		if got["127.0.0.11"] != model.Unhealthy || got["127.0.0.12"] != model.Unhealthy || got["127.0.0.13"] != model.Healthy {
			t.Fatalf("health after the edit: %v", got)
		}
	})

	t.Run("a save by renaming a new file into place", func(t *testing.T) {
		h.drain()
		tmp := filepath.Join(dir, ".greeter-endpoints.yaml.swp")
		if err := os.WriteFile(tmp, original, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, slice); err != nil {
			t.Fatal(err)
		}
		h.awaitEvent(model.EndpointsChanged, greeter)
		for addr, health := range healthOf(h.reg, greeter, examples.GreeterPort) {
			if health != model.Healthy {
				t.Fatalf("%s is %s after restoring the file", addr, health)
			}
		}
	})

	t.Run("a save that moves the old file away first", func(t *testing.T) {
		h.drain()
		if err := os.Rename(slice, slice+"~"); err != nil {
			t.Fatal(err)
		}
		h.write(examples.EndpointsFile, notReady)
		h.awaitEvent(model.EndpointsChanged, greeter)
		if got := healthOf(h.reg, greeter, examples.GreeterPort); got["127.0.0.11"] != model.Unhealthy {
			t.Fatalf("health after the edit: %v", got)
		}
		if err := os.Remove(slice + "~"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a burst of writes is read once", func(t *testing.T) {
		h.drain()
		before := h.reg.Reloads()
		f, err := os.OpenFile(slice, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Several writes, as editors and tools do: truncate, then the
		// content in pieces.
		for _, chunk := range bytes.SplitAfter(original, []byte("\n")) {
			if _, err := f.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		h.awaitEvent(model.EndpointsChanged, greeter)
		h.awaitReload(before)
		if n := h.reg.Reloads() - before; n != 1 {
			t.Fatalf("%d reloads for one save", n)
		}
		if ps := h.reg.Problems(); len(ps) > 0 {
			t.Fatalf("a half-written file was read: %s", describe(ps))
		}
	})
}

func TestBrokenFileKeepsItsLastGoodContent(t *testing.T) {
	dir := copyExamples(t)
	h := start(t, dir, Options{})
	slice := filepath.Join(dir, examples.EndpointsFile)
	original, _ := os.ReadFile(slice)
	before := h.reg.Endpoints(greeter, examples.GreeterPort, nil)

	for _, tc := range []struct {
		name, content, field string
		document             int
	}{
		{"bad YAML", string(original) + "  - {{{\n", "", 1},
		{"a port out of range", strings.Replace(string(original), "port: 50051", "port: 70000", 1), "ports[0].port", 1},
		{"an unknown kind", string(original) + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n", "kind", 2},
		{"a slice pointing at no service", strings.Replace(string(original), "service-name: greeter", "service-name: nosuch", 1),
			"metadata.labels[kubernetes.io/service-name]", 1},
		{"a namespace nobody defined", strings.Replace(string(original), "namespace: demo", "namespace: elsewhere", 1), "metadata.namespace", 1},
		{"every endpoint not ready, and a missing name", strings.ReplaceAll(strings.Replace(string(original), "name: greeter-abc12", "generateName: greeter-", 1), "ready: true", "ready: false"),
			"metadata.name", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reloads := h.reg.Reloads()
			logFrom := h.logs.Len()
			h.write(examples.EndpointsFile, tc.content)
			h.until("the problem to be reported", func() bool { return len(h.reg.Problems()) > 0 })
			found := false
			for _, p := range h.reg.Problems() {
				found = found || (p.File == slice && p.Document == tc.document && p.Field == tc.field)
			}
			if !found {
				t.Fatalf("want a problem in %s document %d field %q; got:\n%s", slice, tc.document, tc.field, describe(h.reg.Problems()))
			}
			h.awaitReload(reloads)
			// Only this case's lines: an earlier case logged the same file.
			wantLog := fmt.Sprintf("file=%s document=%d", slice, tc.document)
			h.logs.Await(t, fmt.Sprintf("%q and the last good content kept", wantLog), logFrom, func(l string) bool {
				return strings.Contains(l, wantLog) && strings.Contains(l, "last good content stays in force")
			})
			after := h.reg.Endpoints(greeter, examples.GreeterPort, nil)
			if len(after) != len(before) {
				t.Fatalf("endpoints changed from %d to %d", len(before), len(after))
			}
			for i := range after {
				if !after[i].Equal(before[i]) {
					t.Fatalf("endpoint %d changed: %+v", i, after[i])
				}
			}

			h.write(examples.EndpointsFile, string(original))
			h.until("the problem to clear", func() bool { return len(h.reg.Problems()) == 0 })
		})
	}
}

func TestFilesComeAndGo(t *testing.T) {
	dir := copyExamples(t)
	h := start(t, dir, Options{})

	t.Run("a deleted file removes its objects", func(t *testing.T) {
		h.drain()
		if err := os.Remove(filepath.Join(dir, "greeter-service.yaml")); err != nil {
			t.Fatal(err)
		}
		h.awaitEvent(model.ServiceDeleted, greeter)
		// Its slice now points at nothing, which is reported; the slice
		// itself stays, harmless.
		h.until("the dangling slice to be reported", func() bool { return len(h.reg.Problems()) == 1 })
	})

	t.Run("a new file in a new subfolder", func(t *testing.T) {
		h.drain()
		h.write("team/a/b/echo.yaml", goodService+"---\n"+goodSlice)
		h.awaitEvent(model.ServiceChanged, "echo.default.svc.cluster.local")
		if eps := h.reg.Endpoints("echo.default.svc.cluster.local", 7070, nil); len(eps) != 1 || eps[0].Address != "192.0.2.11" {
			t.Fatalf("endpoints of echo: %v", eps)
		}
	})

	t.Run("a file in a subfolder created later is followed", func(t *testing.T) {
		h.drain()
		h.write("team/a/b/echo.yaml", goodService+"---\n"+strings.Replace(goodSlice, "ready: true", "ready: false", 1))
		h.awaitEvent(model.EndpointsChanged, "echo.default.svc.cluster.local")
	})

	t.Run("a removed subfolder removes its objects", func(t *testing.T) {
		h.drain()
		if err := os.RemoveAll(filepath.Join(dir, "team")); err != nil {
			t.Fatal(err)
		}
		h.awaitEvent(model.ServiceDeleted, "echo.default.svc.cluster.local")
	})

	t.Run("the service file comes back and its slice applies again", func(t *testing.T) {
		h.drain()
		if err := examples.CopyMesh(dir, 0); err != nil {
			t.Fatal(err)
		}
		h.awaitEvent(model.ServiceChanged, greeter)
		h.until("three endpoints", func() bool { return len(h.reg.Endpoints(greeter, examples.GreeterPort, nil)) == 3 })
		h.until("no problems", func() bool { return len(h.reg.Problems()) == 0 })
	})

	t.Run("files that are not manifests are ignored", func(t *testing.T) {
		before := h.reg.Reloads()
		h.write("README.md", "# not a manifest: {{{")
		h.write(".hidden.yaml", "{{{")
		h.write("notes.yaml~", "{{{")
		h.awaitReload(before)
		if ps := h.reg.Problems(); len(ps) > 0 {
			t.Fatalf("problems: %s", describe(ps))
		}
	})
}

func TestDuplicatesAcrossFilesKeepTheFirst(t *testing.T) {
	dir := t.TempDir()
	h := &harness{t: t, dir: dir}
	h.write("a.yaml", goodService)
	h.write("b.yaml", strings.Replace(goodService, "7070", "8080", 1)+"---\n"+goodSlice)
	h = start(t, dir, Options{})
	const echo = model.Hostname("echo.default.svc.cluster.local")
	svc := h.reg.GetService(echo)
	if svc == nil || svc.Ports[0].Port != 7070 {
		t.Fatalf("service %+v: want a.yaml's (port 7070)", svc)
	}
	ps := h.reg.Problems()
	if len(ps) != 1 || ps[0].File != filepath.Join(dir, "b.yaml") || ps[0].Document != 1 || ps[0].Field != "metadata.name" ||
		!strings.Contains(ps[0].Message, filepath.Join(dir, "a.yaml")) {
		t.Fatalf("problems:\n%s", describe(ps))
	}
	// The rest of b.yaml is used: its slice gives the endpoints.
	if eps := h.reg.Endpoints(echo, 7070, nil); len(eps) != 1 {
		t.Fatalf("endpoints %v", eps)
	}
	if !strings.Contains(h.logs.String(), "duplicate object ignored") {
		t.Fatalf("the duplicate was not logged:\n%s", h.logs.String())
	}

	h.drain()
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	h.awaitEvent(model.ServiceChanged, echo)
	if svc := h.reg.GetService(echo); svc.Ports[0].Port != 8080 {
		t.Fatalf("after a.yaml went, service %+v: want b.yaml's", svc)
	}
	h.until("no problems", func() bool { return len(h.reg.Problems()) == 0 })
}

func TestBrokenFromTheStartServesTheRest(t *testing.T) {
	dir := t.TempDir()
	h := &harness{t: t, dir: dir}
	h.write("good.yaml", goodService+"---\n"+goodSlice)
	h.write("bad.yaml", strings.Replace(strings.Replace(goodService, "echo", "other", 1), "7070", "0", 1))
	h.write("dangling.yaml", strings.Replace(goodSlice, "service-name: echo", "service-name: later", 1))
	h = start(t, dir, Options{})
	if got := len(h.reg.Services()); got != 1 {
		t.Fatalf("%d services, want echo only", got)
	}
	if ps := h.reg.Problems(); len(ps) != 2 {
		t.Fatalf("problems:\n%s", describe(ps))
	}
	if !strings.Contains(h.logs.String(), "nothing from this file is served until it is fixed") {
		t.Fatalf("log:\n%s", h.logs.String())
	}

	// The slice that pointed at nothing applies once its service exists.
	h.drain()
	h.write("later.yaml", strings.Replace(goodService, "echo", "later", 1))
	h.awaitEvent(model.ServiceChanged, "later.default.svc.cluster.local")
	h.until("the slice of later", func() bool {
		return len(h.reg.Endpoints("later.default.svc.cluster.local", 7070, nil)) == 1
	})
}

func TestNewRejectsAMissingFolder(t *testing.T) {
	_, err := New(Options{Dir: filepath.Join(t.TempDir(), "nope")})
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("error %v: want one naming the folder", err)
	}
	f := filepath.Join(t.TempDir(), "file.yaml")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Dir: f}); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Fatalf("error %v", err)
	}
}

// A ConfigMap volume holds its files in a hidden, timestamped folder that
// "..data" points at, and replaces that link at once on every update.
func TestFollowsAConfigMapVolume(t *testing.T) {
	dir := t.TempDir()
	version := func(name, content string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "echo.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_01", goodService+"---\n"+goodSlice)
	if err := os.Symlink(filepath.Join("..data", "echo.yaml"), filepath.Join(dir, "echo.yaml")); err != nil {
		t.Fatal(err)
	}
	h := start(t, dir, Options{})
	const echo = model.Hostname("echo.default.svc.cluster.local")
	if got := healthOf(h.reg, echo, 7070); got["192.0.2.11"] != model.Healthy || len(got) != 1 {
		t.Fatalf("endpoints %v", got)
	}
	if ps := h.reg.Problems(); len(ps) > 0 {
		t.Fatalf("problems: %s", describe(ps))
	}
	h.drain()
	version("..2026_02", goodService+"---\n"+strings.Replace(goodSlice, "ready: true", "ready: false", 1))
	h.awaitEvent(model.EndpointsChanged, echo)
	if got := healthOf(h.reg, echo, 7070); got["192.0.2.11"] != model.Unhealthy {
		t.Fatalf("endpoints after the update %v", got)
	}
}

// A cluster copies the Node's topology labels onto a Pod bound to it;
// the folder's Pods get them too.
func TestAdmittedLabels(t *testing.T) {
	zoned := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{
		corev1.LabelTopologyRegion: "eu", corev1.LabelTopologyZone: "eu-a", "other": "x",
	}}}
	bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	pod := func(labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: labels}, Spec: corev1.PodSpec{NodeName: "n"}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
		want map[string]string // nil: the Pod's own
	}{
		{"no Node", pod(map[string]string{"app": "a"}), nil, nil},
		{"a Node without topology labels", pod(map[string]string{"app": "a"}), bare, nil},
		{"a zoned Node", pod(map[string]string{"app": "a"}), zoned,
			map[string]string{"app": "a", corev1.LabelTopologyRegion: "eu", corev1.LabelTopologyZone: "eu-a"}},
		{"a Pod without labels", pod(nil), zoned, map[string]string{corev1.LabelTopologyRegion: "eu", corev1.LabelTopologyZone: "eu-a"}},
		{"the Node's value wins", pod(map[string]string{corev1.LabelTopologyZone: "mine"}), zoned,
			map[string]string{corev1.LabelTopologyRegion: "eu", corev1.LabelTopologyZone: "eu-a"}},
		{"already the Node's", pod(map[string]string{corev1.LabelTopologyRegion: "eu", corev1.LabelTopologyZone: "eu-a"}), zoned, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.pod.Labels)
			got := admittedLabels(tc.pod, tc.node)
			if (got == nil) != (tc.want == nil) || !maps.Equal(got, tc.want) {
				t.Fatalf("labels %v, want %v", got, tc.want)
			}
			if !maps.Equal(tc.pod.Labels, before) {
				t.Fatalf("the Pod's own labels changed to %v", tc.pod.Labels)
			}
		})
	}
}
