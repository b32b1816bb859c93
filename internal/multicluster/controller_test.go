package multicluster

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/multicluster/clusterstate"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

const ns = "meshpilot-system"

// kubeconfigFor is a kubeconfig as istioctl create-remote-secret writes
// one: one cluster, one token user, its current context.
func kubeconfigFor(server string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: ""
    server: %s
  name: remote
contexts:
- context:
    cluster: remote
    user: remote
  name: remote
current-context: remote
users:
- name: remote
  user:
    token: secret-token
`, server))
}

// recorder records the calls a Controller makes on the aggregate.
type recorder struct {
	mu sync.Mutex // guards calls and failReplace
	// calls are "add cluster/b https://b", "replace ...", "remove ...".
	calls       []string
	failReplace bool
}

func (r *recorder) AddSource(_ context.Context, s aggregate.Source) error {
	r.record("add " + s.Name + " " + s.Controller.(*fakeRegistry).String())
	return nil
}

func (r *recorder) RemoveSource(name string) error {
	r.record("remove " + name)
	return nil
}

func (r *recorder) ReplaceSource(ctx context.Context, name string, s aggregate.Source) error {
	if host := s.Controller.(*fakeRegistry).host; strings.Contains(host, "hang") {
		// A registry that never syncs, as ReplaceSource sees it.
		r.record("replace-waiting " + name + " " + host)
		<-ctx.Done()
		r.record("replace-ended " + name + " " + host)
		return ctx.Err()
	}
	r.mu.Lock()
	fail := r.failReplace
	r.mu.Unlock()
	if fail {
		r.record("replace-failed " + name)
		return fmt.Errorf("did not sync")
	}
	r.record("replace " + name + " " + s.Controller.(*fakeRegistry).String())
	return nil
}

func (r *recorder) record(c string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// waitFor waits until the calls are want.
func (r *recorder) waitFor(t *testing.T, want ...string) {
	t.Helper()
	r.await(t, func(calls []string) []string { return calls }, want)
}

// waitForSorted is waitFor for calls whose order does not matter.
func (r *recorder) waitForSorted(t *testing.T, want ...string) {
	t.Helper()
	r.await(t, func(calls []string) []string { return slices.Sorted(slices.Values(calls)) }, slices.Sorted(slices.Values(want)))
}

func (r *recorder) await(t *testing.T, view func([]string) []string, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		got := view(slices.Clone(r.calls))
		r.mu.Unlock()
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("aggregate calls:\n got %q\nwant %q", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type fakeRegistry struct {
	*model.Store
	host  string
	scope Scope

	mu   sync.Mutex // guards mesh
	mesh []labels.Selector
}

// String is the registry's API server, and its scope when not the
// default one.
func (f *fakeRegistry) String() string {
	if f.scope.Namespaces == nil && f.scope.DiscoverySelectors == nil {
		return f.host
	}
	return f.host + " " + f.scope.String()
}

func (f *fakeRegistry) SetMeshDiscoverySelectors(s []labels.Selector) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mesh = s
}

func (f *fakeRegistry) meshSelectors() []labels.Selector {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mesh
}

// awaitLog waits for a log line holding every part.
func (h *harness) awaitLog(t *testing.T, parts ...string) {
	t.Helper()
	h.logs.Await(t, strings.Join(parts, " "), 0, func(l string) bool {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				return false
			}
		}
		return true
	})
}

func remoteSecret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{Label: LabelValue}},
		Data:       data,
	}
}

// fakeSecrets is the fake clientset's Secrets client, which, like the
// fake clientset, cannot stream a watch-list.
type fakeSecrets struct {
	kubeapi.ListWatcher[*corev1.SecretList]
}

func (fakeSecrets) IsWatchListSemanticsUnSupported() bool { return true }

type harness struct {
	c      *Controller
	client *fake.Clientset
	rec    *recorder
	logs   *testutil.Lines
	// version is the last resourceVersion given to an update.
	version int
}

func start(t *testing.T, objs ...*corev1.Secret) *harness {
	t.Helper()
	return startWith(t, func(*Options) {}, objs...)
}

// startWith is start with options changed by opts.
func startWith(t *testing.T, opts func(*Options), objs ...*corev1.Secret) *harness {
	t.Helper()
	h := &harness{client: fake.NewClientset(), rec: &recorder{}, logs: testutil.NewLines()}
	for _, s := range objs {
		if _, err := h.client.CoreV1().Secrets(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{
		Secrets:        fakeSecrets{h.client.CoreV1().Secrets(ns)},
		Namespace:      ns,
		LocalClusterID: "Kubernetes",
		NewRegistry: func(id string, cfg *rest.Config, scope Scope) (Registry, error) {
			return &fakeRegistry{Store: model.NewStore(), host: cfg.Host, scope: scope}, nil
		},
		Logger: slog.New(slog.NewTextHandler(h.logs, nil)),
	}
	opts(&o)
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	// The API servers named here do not exist: every probe succeeds.
	c.probe = func(*rest.Config) func(context.Context) error {
		return func(context.Context) error { return nil }
	}
	h.c = c
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx, h.rec) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func (h *harness) update(t *testing.T, s *corev1.Secret) {
	t.Helper()
	// The fake clientset keeps resourceVersions as given; the controller
	// skips updates that keep it, as after a relist.
	h.version++
	s.ResourceVersion = fmt.Sprint(h.version)
	if _, err := h.client.CoreV1().Secrets(ns).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestSecretLifecycle(t *testing.T) {
	h := start(t, remoteSecret("remote-b", map[string][]byte{"b": kubeconfigFor("https://b.example:6443")}))
	h.rec.waitFor(t, "add cluster/b https://b.example:6443")

	// A second key joins; the first, unchanged, is left alone.
	h.update(t, remoteSecret("remote-b", map[string][]byte{
		"b": kubeconfigFor("https://b.example:6443"),
		"c": kubeconfigFor("https://c.example:6443"),
	}))
	h.rec.waitFor(t, "add cluster/b https://b.example:6443", "add cluster/c https://c.example:6443")

	// A removed key removes; a changed kubeconfig replaces. (Apart: a
	// replacement syncs off the worker, so it may end after a removal.)
	h.update(t, remoteSecret("remote-b", map[string][]byte{"b": kubeconfigFor("https://b.example:6443")}))
	h.rec.waitFor(t, "add cluster/b https://b.example:6443", "add cluster/c https://c.example:6443",
		"remove cluster/c")
	h.update(t, remoteSecret("remote-b", map[string][]byte{"b": kubeconfigFor("https://b2.example:6443")}))
	h.rec.waitFor(t, "add cluster/b https://b.example:6443", "add cluster/c https://c.example:6443",
		"remove cluster/c", "replace cluster/b https://b2.example:6443")

	// The Secret deleted removes what is left.
	if err := h.client.CoreV1().Secrets(ns).Delete(context.Background(), "remote-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.rec.waitFor(t, "add cluster/b https://b.example:6443", "add cluster/c https://c.example:6443",
		"remove cluster/c", "replace cluster/b https://b2.example:6443", "remove cluster/b")
}

func TestRefusedKeysChangeNothing(t *testing.T) {
	h := start(t,
		remoteSecret("remote-a", map[string][]byte{
			"Kubernetes": kubeconfigFor("https://local.example"),
			"bad":        []byte("not: [a kubeconfig"),
			"b":          kubeconfigFor("https://b.example"),
		}),
	)
	h.rec.waitFor(t, "add cluster/b https://b.example")
	h.awaitLog(t, "local cluster", "secret=meshpilot-system/remote-a", "key=Kubernetes")
	h.awaitLog(t, "not a usable kubeconfig", "secret=meshpilot-system/remote-a", "key=bad", "reason=")

	// Another Secret naming the same cluster is refused.
	if _, err := h.client.CoreV1().Secrets(ns).Create(context.Background(),
		remoteSecret("remote-z", map[string][]byte{"b": kubeconfigFor("https://other.example")}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.awaitLog(t, "another secret", "secret=meshpilot-system/remote-z", "served_from=meshpilot-system/remote-a")

	// A served cluster whose kubeconfig turns bad keeps its registry.
	h.update(t, remoteSecret("remote-a", map[string][]byte{"b": []byte("garbage: [")}))
	h.awaitLog(t, "not a usable kubeconfig", "key=b")
	// A failed replacement keeps the old one too, and is logged.
	h.rec.mu.Lock()
	h.rec.failReplace = true
	h.rec.mu.Unlock()
	h.update(t, remoteSecret("remote-a", map[string][]byte{"b": kubeconfigFor("https://b3.example")}))
	h.awaitLog(t, "keeping the previous one", "cluster=b", "reason=")
	h.rec.waitFor(t, "add cluster/b https://b.example", "replace-failed cluster/b")
}

func TestUnlabelledSecretsAreNotWatched(t *testing.T) {
	other := remoteSecret("plain", map[string][]byte{"x": kubeconfigFor("https://x.example")})
	other.Labels = nil
	elsewhere := remoteSecret("remote-elsewhere", map[string][]byte{"y": kubeconfigFor("https://y.example")})
	elsewhere.Namespace = "default"
	h := start(t, other, elsewhere, remoteSecret("remote-b", map[string][]byte{"b": kubeconfigFor("https://b.example")}))
	h.rec.waitFor(t, "add cluster/b https://b.example")
}

func TestParseKubeconfig(t *testing.T) {
	for _, tc := range []struct {
		name, data, wantErr string
	}{
		{name: "istioctl form", data: string(kubeconfigFor("https://b.example:6443"))},
		{name: "empty", data: "", wantErr: "empty"},
		{name: "not yaml", data: "{[", wantErr: "yaml"},
		{name: "no server", data: "apiVersion: v1\nkind: Config\n", wantErr: "no configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := parseKubeconfig([]byte(tc.data), nil)
			if tc.wantErr == "" {
				if err != nil || cfg.Host != "https://b.example:6443" || cfg.BearerToken != "secret-token" {
					t.Fatalf("got %+v, %v", cfg, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			}
		})
	}
}

func TestReplacementSyncingHoldsUpNothing(t *testing.T) {
	// Longer than the test: only a newer change or the end ends the wait.
	h := startWith(t, func(o *Options) { o.SyncTimeout = time.Hour },
		remoteSecret("remote-a", map[string][]byte{"a": kubeconfigFor("https://a.example")}))
	h.rec.waitFor(t, "add cluster/a https://a.example")
	h.update(t, remoteSecret("remote-a", map[string][]byte{"a": kubeconfigFor("https://hang.example")}))
	h.rec.waitFor(t, "add cluster/a https://a.example", "replace-waiting cluster/a https://hang.example")

	// Another Secret's cluster comes while a's replacement waits.
	if _, err := h.client.CoreV1().Secrets(ns).Create(context.Background(),
		remoteSecret("remote-z", map[string][]byte{"z": kubeconfigFor("https://z.example")}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.rec.waitFor(t, "add cluster/a https://a.example", "replace-waiting cluster/a https://hang.example", "add cluster/z https://z.example")

	// A newer change of a's Secret drops the waiting replacement first:
	// a Secret's changes apply in order.
	h.update(t, remoteSecret("remote-a", map[string][]byte{"a": kubeconfigFor("https://a2.example")}))
	h.rec.waitFor(t, "add cluster/a https://a.example", "replace-waiting cluster/a https://hang.example", "add cluster/z https://z.example",
		"replace-ended cluster/a https://hang.example", "replace cluster/a https://a2.example")
	h.awaitLog(t, "dropped for a newer change", "cluster=a")
	if got := h.c.Clusters(); len(got) != 2 || got[0].APIServer != "https://a2.example" || got[1].ID != "z" {
		t.Fatalf("clusters %+v", got)
	}
}

func TestNextState(t *testing.T) {
	for _, tc := range []struct {
		cur  clusterstate.State
		ev   event
		want clusterstate.State
	}{
		{clusterstate.Syncing, evSynced, clusterstate.Synced},
		{clusterstate.Syncing, evTimedOut, clusterstate.Timeout},
		{clusterstate.Syncing, evProbeOK, clusterstate.Syncing},
		{clusterstate.Syncing, evProbeFailed, clusterstate.Syncing},
		{clusterstate.Timeout, evSynced, clusterstate.Synced},
		{clusterstate.Timeout, evProbeOK, clusterstate.Timeout},
		{clusterstate.Timeout, evProbeFailed, clusterstate.Timeout},
		{clusterstate.Synced, evProbeFailed, clusterstate.Unreachable},
		{clusterstate.Synced, evProbeOK, clusterstate.Synced},
		{clusterstate.Synced, evTimedOut, clusterstate.Synced},
		{clusterstate.Unreachable, evProbeOK, clusterstate.Synced},
		{clusterstate.Unreachable, evProbeFailed, clusterstate.Unreachable},
	} {
		if got := next(tc.cur, tc.ev); got != tc.want {
			t.Errorf("next(%s, %d) = %s, want %s", tc.cur, tc.ev, got, tc.want)
		}
	}
}

func TestReleasedClusterGoesToTheSecretRefusedIt(t *testing.T) {
	h := start(t, remoteSecret("remote-a", map[string][]byte{"b": kubeconfigFor("https://b.example")}))
	h.rec.waitFor(t, "add cluster/b https://b.example")
	if _, err := h.client.CoreV1().Secrets(ns).Create(context.Background(),
		remoteSecret("remote-z", map[string][]byte{"b": kubeconfigFor("https://other.example")}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.awaitLog(t, "another secret", "secret=meshpilot-system/remote-z", "served_from=meshpilot-system/remote-a")
	// The holder goes: the Secret refused before takes the cluster
	// without a change of its own.
	if err := h.client.CoreV1().Secrets(ns).Delete(context.Background(), "remote-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.rec.waitFor(t, "add cluster/b https://b.example", "remove cluster/b", "add cluster/b https://other.example")
}
