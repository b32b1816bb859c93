package multicluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/metrics"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/multicluster/clusterstate"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// env is the local cluster: it holds the remote Secrets, and serves as a
// remote cluster too where a test needs one it does not stop.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// live is a Controller over env's Secrets with real Kubernetes registries
// behind a real aggregate, as serve runs them.
type live struct {
	c      *Controller
	agg    *aggregate.Controller
	system string
	logs   *testutil.Lines
	log    *slog.Logger
}

// startLive starts a live Controller; opts changes its options and
// beforeRun runs before anything starts (handlers to add).
func startLive(t *testing.T, opts func(*Options), beforeRun func(ctx context.Context, l *live)) *live {
	t.Helper()
	l := &live{system: env.Namespace(t, nil), logs: testutil.NewLines()}
	l.log = slog.New(slog.NewTextHandler(l.logs, nil))
	var err error
	if l.agg, err = aggregate.New(aggregate.Options{Sources: []aggregate.Source{{Name: "local", Controller: model.NewStore()}}}); err != nil {
		t.Fatal(err)
	}
	o := Options{
		Secrets: env.API.Secrets(l.system), Namespace: l.system, LocalClusterID: "Kubernetes", Logger: l.log,
		ProbeInterval: 200 * time.Millisecond,
		NewRegistry: func(id string, cfg *rest.Config, scope Scope) (Registry, error) {
			client, err := kubeapi.NewForConfig(cfg)
			if err != nil {
				return nil, err
			}
			reg, err := kube.New(client, kube.Options{ClusterID: id, Namespaces: scope.Namespaces,
				DiscoverySelectors: scope.DiscoverySelectors, Logger: l.log.With("cluster", id)})
			if err != nil {
				return nil, err
			}
			return reg, nil
		},
	}
	opts(&o)
	if l.c, err = New(o); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if beforeRun != nil {
		beforeRun(ctx, l)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = l.agg.Run(ctx) })
	wg.Go(func() { _ = l.c.Run(ctx, l.agg) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return l
}

// secret creates or updates the remote Secret name.
func (l *live) secret(t *testing.T, name string, data map[string][]byte, annotations map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	api := env.Client.CoreV1().Secrets(l.system)
	s := remoteSecret(name, data)
	s.Namespace, s.Annotations = l.system, annotations
	if cur, err := api.Get(ctx, name, metav1.GetOptions{}); err == nil {
		s.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := api.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// awaitState waits until cluster id is in state.
func (l *live) awaitState(t *testing.T, id string, state clusterstate.State) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("cluster %s %s", id, state), func() (bool, string) {
		for _, c := range l.c.Clusters() {
			if c.ID == id {
				return c.State == state, fmt.Sprintf("%+v", c)
			}
		}
		return false, fmt.Sprintf("no cluster %s in %+v", id, l.c.Clusters())
	})
}

// awaitEndpoints waits until host has n endpoints of cluster id.
func (l *live) awaitEndpoints(t *testing.T, host model.Hostname, id string, n int) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%d endpoints of %s from cluster %s", n, host, id), func() (bool, string) {
		eps := l.agg.Endpoints(host, 7070, nil)
		return countCluster(eps, id) == n, fmt.Sprintf("%v", eps)
	})
}

// awaitLogs waits until count lines hold every part.
func (l *live) awaitLogs(t *testing.T, count int, parts ...string) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%d log lines with %q", count, parts), func() (bool, string) {
		n := 0
		for _, line := range strings.Split(l.logs.String(), "\n") {
			if containsAll(line, parts) {
				n++
			}
		}
		return n == count, l.logs.String()
	})
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func countCluster(eps []*model.Endpoint, id string) int {
	n := 0
	for _, ep := range eps {
		if ep.ClusterID == id {
			n++
		}
	}
	return n
}

// serveEcho writes Service echo in ns of e with one endpoint at addr.
func serveEcho(t *testing.T, e *testenv.Env, ns, addr string) model.Hostname {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "grpc", Port: 7070}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.ApplyEndpointSlice(t, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "echo-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "echo"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("grpc"), Port: ptr.To(int32(7070))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	})
	return model.ServiceHostname("echo", ns, "")
}

func readKubeconfig(t *testing.T, e *testenv.Env) []byte {
	t.Helper()
	kc, err := os.ReadFile(e.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// TestRemoteScopeMeshSelectorsAndState runs a second API server, B, as a
// remote cluster of one Secret: its annotations narrow what B's registry
// watches without B's kept endpoints ever leaving the model; MeshConfig's
// discoverySelectors reach B's registry beside the annotation's; B's API
// server stopped shows B unreachable (Clusters and the metric) with its
// endpoints kept, and restarted shows it synced again.
func TestRemoteScopeMeshSelectorsAndState(t *testing.T) {
	envB, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = envB.Stop() })
	shop := envB.Namespace(t, map[string]string{"env": "prod"})
	pay := envB.Namespace(t, map[string]string{"team": "a"})
	shopHost, payHost := serveEcho(t, envB, shop, "192.0.2.1"), serveEcho(t, envB, pay, "192.0.2.2")

	meshFile := filepath.Join(t.TempDir(), "mesh.yaml")
	writeMesh := func(content string) {
		t.Helper()
		if err := os.WriteFile(meshFile, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeMesh("{}\n")
	m := metrics.New()
	l := startLive(t, func(o *Options) {}, func(ctx context.Context, l *live) {
		// As serve wires it: the watcher's selector changes go to every
		// remote registry.
		mesh, err := meshconfig.FromFile(meshFile, l.log)
		if err != nil {
			t.Fatal(err)
		}
		mesh.AppendSelectorHandler(l.c.SetMeshDiscoverySelectors)
		go func() { _ = mesh.Run(ctx) }()
		m.WatchRemoteClusters(l.c.Clusters)
	})
	kcB := readKubeconfig(t, envB)
	l.secret(t, "remote-b", map[string][]byte{"b": kcB}, nil)
	l.awaitEndpoints(t, shopHost, "b", 1)
	l.awaitEndpoints(t, payHost, "b", 1)
	l.awaitState(t, "b", clusterstate.Synced)

	t.Run("an annotation narrowing the scope drops the other namespaces; the kept endpoints never blink", func(t *testing.T) {
		stop, blinked := watchBlink(func() bool { return countCluster(l.agg.Endpoints(shopHost, 7070, nil), "b") == 1 })
		l.secret(t, "remote-b", map[string][]byte{"b": kcB}, map[string]string{AnnotationNamespaces: shop})
		testenv.Eventually(t, "pay's service gone", func() (bool, string) { return l.agg.GetService(payHost) == nil, "" })
		l.awaitLogs(t, 1, "registry rebuilt", "cluster=b")
		stop()
		if <-blinked {
			t.Fatal("shop's endpoint left the model while B's registry was rebuilt")
		}
		l.awaitEndpoints(t, shopHost, "b", 1)
	})

	t.Run("MeshConfig's discoverySelectors reach B's registry, beside the annotation's", func(t *testing.T) {
		// Every namespace, but only those labelled env=prod.
		l.secret(t, "remote-b", map[string][]byte{"b": kcB}, map[string]string{AnnotationDiscoverySelectors: "env=prod"})
		l.awaitLogs(t, 2, "registry rebuilt", "cluster=b")
		if l.agg.GetService(payHost) != nil {
			t.Fatal("pay's service is served, its namespace is not env=prod")
		}
		writeMesh("discoverySelectors:\n- matchLabels: {team: a}\n")
		l.awaitEndpoints(t, payHost, "b", 1)
		l.awaitEndpoints(t, shopHost, "b", 1)
		writeMesh("{}\n")
		testenv.Eventually(t, "pay's service gone again", func() (bool, string) { return l.agg.GetService(payHost) == nil, "" })
	})

	t.Run("B's API server stopped: unreachable, its endpoints kept; restarted: synced", func(t *testing.T) {
		if err := envB.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		l.awaitState(t, "b", clusterstate.Unreachable)
		awaitMetric(t, m, `meshpilot_remote_cluster_state{cluster="b",state="unreachable"} 1`)
		if got := l.c.Clusters()[0]; !strings.Contains(got.LastError, "/readyz") {
			t.Errorf("last error %q does not name the probe", got.LastError)
		}
		l.awaitEndpoints(t, shopHost, "b", 1)
		if err := envB.StartAPIServer(); err != nil {
			t.Fatal(err)
		}
		l.awaitState(t, "b", clusterstate.Synced)
		awaitMetric(t, m, `meshpilot_remote_cluster_state{cluster="b",state="synced"} 1`)
		awaitMetric(t, m, `meshpilot_remote_cluster_state{cluster="b",state="unreachable"} 0`)
	})
}

// watchBlink checks ok every millisecond until stop; blinked then says
// whether ok was ever false.
func watchBlink(ok func() bool) (stop func(), blinked <-chan bool) {
	done := make(chan struct{})
	out := make(chan bool, 1)
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if !ok() {
				out <- true
				return
			}
			select {
			case <-done:
				out <- false
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done) }, out
}

func awaitMetric(t *testing.T, m *metrics.Metrics, series string) {
	t.Helper()
	testenv.Eventually(t, series, func() (bool, string) {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return strings.Contains(rec.Body.String(), series), rec.Body.String()
	})
}

// TestReplacementHangingHoldsUpNoOtherSecret: a cluster's new kubeconfig
// names a server that accepts connections and never answers, so its
// replacement waits (for an hour); meanwhile another Secret's cluster is
// added and syncs.
func TestReplacementHangingHoldsUpNoOtherSecret(t *testing.T) {
	ns := env.Namespace(t, nil)
	host := serveEcho(t, env, ns, "192.0.2.3")
	l := startLive(t, func(o *Options) { o.SyncTimeout = time.Hour }, nil)
	kc := readKubeconfig(t, env)
	l.secret(t, "remote-one", map[string][]byte{"one": kc}, nil)
	l.awaitState(t, "one", clusterstate.Synced)
	l.awaitEndpoints(t, host, "one", 1)

	l.secret(t, "remote-one", map[string][]byte{"one": hangingKubeconfig(t)}, nil)
	pending := func() bool {
		l.c.mu.Lock()
		defer l.c.mu.Unlock()
		return l.c.clusters["one"].pending != nil
	}
	testenv.Eventually(t, "one's replacement waiting", func() (bool, string) { return pending(), "" })

	// Two reads the same API server: its endpoints are one's, which the
	// aggregate serves once; that it is served and synced is what counts.
	l.secret(t, "remote-two", map[string][]byte{"two": kc}, nil)
	l.awaitState(t, "two", clusterstate.Synced)
	if !slices.Contains(l.agg.Sources(), SourceName("two")) {
		t.Fatalf("two is not served: sources %q", l.agg.Sources())
	}
	if !pending() {
		t.Fatal("one's replacement ended before two was added: it was not the one waiting")
	}
	l.awaitEndpoints(t, host, "one", 1)
}

// hangingKubeconfig names a server that accepts connections and never
// says a word: every request waits for its timeout.
func hangingKubeconfig(t *testing.T) []byte {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // guards conns
	var conns []net.Conn
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, lis.Addr()))
}
