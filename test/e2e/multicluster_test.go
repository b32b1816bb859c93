package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/meshpilot/meshpilot/internal/debug"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/metrics"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/multicluster"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/server"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// TestRemoteClusterSecret runs two real API servers: cluster A (the
// package's) is meshpilot's own, cluster B comes and goes through a remote
// Secret in A, as istioctl create-remote-secret writes it. The same
// Service "echo" in both is one hostname whose endpoints are the union.
func TestRemoteClusterSecret(t *testing.T) {
	envB, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = envB.Stop() })

	ns := env.Namespace(t, nil)
	system := env.Namespace(t, nil)
	inA := grpctest.StartBackends(t, "127.0.0.71", "127.0.0.72")
	inB := grpctest.StartBackends(t, "127.0.0.73", "127.0.0.74")
	createService(t, ns, "echo", 7070)
	writeSlice(t, ns, "echo", inA)
	// The same namespace, Service and port in B, other endpoints.
	if _, err := envB.Client.CoreV1().Namespaces().Create(ctx(t),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := envB.Client.CoreV1().Services(ns).Create(ctx(t), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "grpc", Port: 7070}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sliceB := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "echo-slice", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "echo"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("grpc"), Port: ptr.To(int32(inB[0].Port))}},
	}
	for _, b := range inB {
		sliceB.Endpoints = append(sliceB.Endpoints, discoveryv1.Endpoint{Addresses: []string{docAddr(b)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	envB.ApplyEndpointSlice(t, sliceB)
	// "ports" in both, its port named otherwise in B: a port conflict.
	createService(t, ns, "ports", 7071)
	if _, err := envB.Client.CoreV1().Services(ns).Create(ctx(t), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ports", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 7071}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	logs := testutil.NewLines()
	log := slog.New(slog.NewTextHandler(logs, nil))
	srv := startObserved(t, ns, server.Options{})
	remotes, err := multicluster.New(multicluster.Options{
		Secrets:        env.API.Secrets(system),
		Namespace:      system,
		LocalClusterID: model.DefaultClusterID,
		Logger:         log,
		SyncTimeout:    2 * time.Second,
		NewRegistry:    remoteRegistry(ns, log, srv.Metrics()),
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, remotes, srv.Registry())

	cc := grpctest.Channel(t, srv.XDSAddr(), "xds:///echo."+ns+".svc.cluster.local:7070",
		grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, inA...)

	kubeconfigB, err := os.ReadFile(envB.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	secrets := env.Client.CoreV1().Secrets(system)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "istio-remote-secret-b", Namespace: system,
			Labels: map[string]string{multicluster.Label: multicluster.LabelValue}},
		Data: map[string][]byte{"cluster-b": kubeconfigB},
	}
	both := append(append([]grpctest.Backend{}, inA...), inB...)

	t.Run("a remote Secret added brings B's endpoints", func(t *testing.T) {
		if _, err := secrets.Create(ctx(t), secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		grpctest.AwaitSpread(t, cc, both...)
		// Each endpoint carries the cluster it came from: B's their Secret
		// key, A's the local cluster's (empty).
		for _, ep := range srv.Registry().Endpoints(model.Hostname("echo."+ns+".svc.cluster.local"), 7070, nil) {
			want := ""
			if ep.Address == docAddr(inB[0]) || ep.Address == docAddr(inB[1]) {
				want = "cluster-b"
			}
			if ep.ClusterID != want {
				t.Errorf("endpoint %s has cluster ID %q, want %q", ep.Address, ep.ClusterID, want)
			}
		}
	})
	t.Run("B's port conflict, metrics and clients are shown by cluster", func(t *testing.T) {
		awaitConflicts(t, srv.HTTPAddr(), []debug.ServiceConflict{{
			Hostname: model.Hostname("ports." + ns + ".svc.cluster.local"), Served: "Kubernetes", DefinedBy: []string{"Kubernetes", "cluster-b"},
			Why: `ports differ; the first definition, Kubernetes's, is served: port 7071 is named "grpc" in Kubernetes, "http" in cluster-b: none of cluster-b's endpoints serve it`,
		}})
		// Each cluster's work queue: the initial lists queue nothing (the
		// first model is built from the caches), so a change in each
		// cluster after its sync makes the queue's adds.
		for _, c := range []kubernetes.Interface{env.Client, envB.Client} {
			patch := []byte(`{"metadata":{"annotations":{"touched":"` + ns + `"}}}`)
			if _, err := c.CoreV1().Services(ns).Patch(ctx(t), "ports", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var checks []metricCheck
		for _, cluster := range []string{"Kubernetes", "cluster-b"} {
			checks = append(checks,
				metricCheck{"meshpilot_registry_services", []string{"cluster", cluster}, exactly(2), "2"},
				metricCheck{"meshpilot_registry_endpoints", []string{"cluster", cluster}, exactly(2), "2"},
				metricCheck{"meshpilot_informer_events_total", []string{"cluster", cluster, "kind", "Service", "event", "add"}, atLeast(2), ">= 2"},
				metricCheck{"meshpilot_workqueue_adds_total", []string{"cluster", cluster, "name", kube.QueueName}, atLeast(1), ">= 1"})
		}
		awaitMetrics(t, srv.HTTPAddr(), checks)
		// A client of cluster B beside the one of A (no CLUSTER_ID: the
		// local cluster).
		grpctest.AwaitSpread(t, grpctest.Channel(t, srv.XDSAddr(), "xds:///echo."+ns+".svc.cluster.local:7070",
			grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback, ClusterID: "cluster-b"}), both...)
		awaitSyncz(t, srv.HTTPAddr(), "a client of each cluster", func(cs []debug.SyncStatus) bool {
			var clusters []string
			for _, c := range cs {
				clusters = append(clusters, c.Cluster)
			}
			slices.Sort(clusters)
			return slices.Equal(clusters, []string{"", "cluster-b"})
		})
	})
	t.Run("the Secret removed takes them away", func(t *testing.T) {
		if err := secrets.Delete(ctx(t), secret.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		grpctest.AwaitSpread(t, cc, inA...)
		awaitConflicts(t, srv.HTTPAddr(), nil)
		gone := func(v float64) bool { return math.IsNaN(v) }
		awaitMetrics(t, srv.HTTPAddr(), []metricCheck{
			{"meshpilot_registry_services", []string{"cluster", "cluster-b"}, gone, "no series"},
			{"meshpilot_registry_services", []string{"cluster", "Kubernetes"}, exactly(2), "2"},
		})
	})
	t.Run("a changed kubeconfig swaps in only once it has synced", func(t *testing.T) {
		secret.ResourceVersion = ""
		if _, err := secrets.Create(ctx(t), secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		grpctest.AwaitSpread(t, cc, both...)
		update := func(kubeconfig []byte) {
			t.Helper()
			cur, err := secrets.Get(ctx(t), secret.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cur.Data = map[string][]byte{"cluster-b": kubeconfig}
			if _, err := secrets.Update(ctx(t), cur, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// A kubeconfig whose API server never answers: the registry built
		// from it does not sync in --remote-sync-timeout, B's stays.
		from := logs.Len()
		update(unreachableKubeconfigBytes(t))
		logs.Await(t, "the failed replacement", from, func(l string) bool {
			return containsAll(l, []string{"keeping the previous one", "cluster=cluster-b"})
		})
		grpctest.AwaitSpread(t, cc, both...)
		// The same cluster's kubeconfig rewritten (a rotated credential):
		// swapped in, B's endpoints in the served model at every look
		// meanwhile.
		from = logs.Len()
		watching := make(chan struct{})
		blinked := make(chan bool, 1)
		go func() {
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				if countCluster(srv.Registry().Endpoints(model.Hostname("echo."+ns+".svc.cluster.local"), 7070, nil), "cluster-b") != len(inB) {
					blinked <- true
					return
				}
				select {
				case <-watching:
					blinked <- false
					return
				case <-tick.C:
				}
			}
		}()
		update(append(slices.Clone(kubeconfigB), "\n# rotated\n"...))
		logs.Await(t, "the replacement", from, func(l string) bool {
			return containsAll(l, []string{"kubeconfig replaced", "cluster=cluster-b"})
		})
		close(watching)
		if <-blinked {
			t.Fatal("B's endpoints left the served model during the swap")
		}
		grpctest.AwaitSpread(t, cc, both...)
	})
	t.Run("B's API server stopped: A serves on, B's last endpoints stay", func(t *testing.T) {
		if err := envB.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		// A's changes still reach clients, beside B's last endpoints.
		writeSlice(t, ns, "echo", inA[:1])
		grpctest.AwaitSpread(t, cc, append([]grpctest.Backend{inA[0]}, inB...)...)
		grpctest.AwaitSpread(t, grpctest.Channel(t, srv.XDSAddr(), "xds:///echo."+ns+".svc.cluster.local:7070",
			grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback}), append([]grpctest.Backend{inA[0]}, inB...)...)
	})
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") && !strings.Contains(l, "keeping the previous one") {
			t.Errorf("logged: %s", l)
		}
	}
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs", n)
	}
}

// TestRemoteClusterUnreachableAtStart: a remote Secret naming an API
// server that does not answer holds up neither readiness nor the local
// cluster, and says so in the log.
func TestRemoteClusterUnreachableAtStart(t *testing.T) {
	ns := env.Namespace(t, nil)
	system := env.Namespace(t, nil)
	inA := grpctest.StartBackends(t, "127.0.0.75")
	createService(t, ns, "echo", 7070)
	writeSlice(t, ns, "echo", inA)
	kc := unreachableKubeconfigBytes(t)
	createRemoteSecret(t, system, "istio-remote-secret-gone", map[string][]byte{"gone": kc})
	logs := testutil.NewLines()
	log := slog.New(slog.NewTextHandler(logs, nil))
	srv := startMeshpilot(t, ns)
	remotes, err := multicluster.New(multicluster.Options{
		Secrets: env.API.Secrets(system), Namespace: system, LocalClusterID: "Kubernetes", Logger: log,
		SyncTimeout: 500 * time.Millisecond,
		NewRegistry: remoteRegistry(ns, log, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, remotes, srv.Registry())

	logs.Await(t, "the unreachable cluster logged", 0, func(l string) bool {
		return strings.Contains(l, "not synced after") && strings.Contains(l, "cluster=gone")
	})
	testutil.AwaitHTTP(t, "http://"+srv.HTTPAddr()+"/readyz", 200)
	grpctest.AwaitSpread(t, grpctest.Channel(t, srv.XDSAddr(), "xds:///echo."+ns+".svc.cluster.local:7070",
		grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback}), inA...)
}

// remoteRegistry builds a remote cluster's registry watching ns, as serve
// builds them: its metrics, when m is set, under its cluster ID.
func remoteRegistry(ns string, log *slog.Logger, m *metrics.Metrics) multicluster.NewRegistry {
	return func(clusterID string, cfg *rest.Config, _ multicluster.Scope) (multicluster.Registry, error) {
		client, err := kubeapi.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		o := kube.Options{ClusterID: clusterID, Namespaces: []string{ns}, Logger: log.With("cluster", clusterID)}
		if m != nil {
			o.QueueMetrics, o.OnInformerEvent = m.WorkqueueProviderFor(clusterID), m.InformerEventsFor(clusterID)
		}
		reg, err := kube.New(client, o)
		if err != nil {
			return nil, err
		}
		return reg, nil
	}
}

// awaitConflicts reads /debug/configz until its serviceConflicts are want
// (their ports aside).
func awaitConflicts(t *testing.T, addr string, want []debug.ServiceConflict) {
	t.Helper()
	testenv.Eventually(t, "the port conflicts on /debug/configz", func() (bool, string) {
		var z debug.Configz
		getJSON(t, "http://"+addr+"/debug/configz", &z)
		got := slices.Clone(z.ServiceConflicts)
		for i := range got {
			if len(got[i].Ports) != len(got[i].DefinedBy) {
				return false, fmt.Sprintf("ports of %v: %v", got[i].DefinedBy, got[i].Ports)
			}
			got[i].Ports = nil
		}
		return reflect.DeepEqual(got, want) || (len(got) == 0 && len(want) == 0), fmt.Sprintf("%+v", z.ServiceConflicts)
	})
}

// runUntilCleanup runs the remote-Secret controller until the test ends.
func runUntilCleanup(t *testing.T, c *multicluster.Controller, sources multicluster.Sources) {
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(runCtx, sources) }()
	t.Cleanup(func() { stop(); <-done })
}

// TestServeRemoteSecrets runs the real binary: serve follows the remote
// Secrets of --system-namespace, refuses one naming its own --cluster-id,
// and reports a remote cluster it cannot reach after
// --remote-sync-timeout while it stays ready and serves the local one.
func TestServeRemoteSecrets(t *testing.T) {
	ns := env.Namespace(t, nil)
	system := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.76")
	createService(t, ns, "echo", 7070)
	writeSlice(t, ns, "echo", bs)
	kc := unreachableKubeconfigBytes(t)
	createRemoteSecret(t, system, "istio-remote-secret-x", map[string][]byte{"east": kc, "west": kc})

	bin := testutil.BuildMeshpilot(t)
	xdsAddr, httpAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	out := startProcess(t, bin, "serve", "--kubeconfig", env.Kubeconfig, "--namespaces", ns,
		"--system-namespace", system, "--cluster-id", "west", "--remote-sync-timeout", "1s",
		"--xds-addr", xdsAddr, "--http-addr", httpAddr)
	testutil.AwaitHTTP(t, "http://"+httpAddr+"/readyz", http.StatusOK)
	grpctest.AwaitSpread(t, grpctest.Channel(t, xdsAddr, "xds:///echo:7070",
		grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback}), bs...)
	for _, want := range [][]string{
		{"names the local cluster", "cluster=west", "secret=" + system + "/istio-remote-secret-x"},
		{"remote cluster added", "cluster=east"},
		{"not synced after 1s", "cluster=east"},
		// A remote cluster's clients wait out its outage behind a gate.
		{"API server unreachable; requests to it wait", "cluster=east"},
	} {
		testenv.Eventually(t, "log line "+strings.Join(want, " "), func() (bool, string) {
			for _, l := range strings.Split(out.String(), "\n") {
				if containsAll(l, want) {
					return true, ""
				}
			}
			return false, out.String()
		})
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// createRemoteSecret creates a remote-cluster Secret in system.
func createRemoteSecret(t *testing.T, system, name string, data map[string][]byte) {
	t.Helper()
	if _, err := env.Client.CoreV1().Secrets(system).Create(ctx(t), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: system,
			Labels: map[string]string{multicluster.Label: multicluster.LabelValue}},
		Data: data,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// unreachableKubeconfigBytes is a kubeconfig naming an API server that
// refuses connections.
func unreachableKubeconfigBytes(t *testing.T) []byte {
	t.Helper()
	kc, err := os.ReadFile(unreachableKubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// countCluster counts the endpoints of cluster id.
func countCluster(eps []*model.Endpoint, id string) int {
	n := 0
	for _, ep := range eps {
		if ep.ClusterID == id {
			n++
		}
	}
	return n
}
