package bench

import (
	"bytes"
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSmallRunTwoClusters runs the benchmark over two clusters: a second
// API server with the same services, given to meshpilot by a remote
// Secret. Clients converge only once they hold both clusters' endpoints
// of every service (2 x 2 here), churn adds endpoints in each cluster in
// turn and every change reaches every subscribed client.
func TestSmallRunTwoClusters(t *testing.T) {
	cfg := smallConfig(4, "mc")
	cfg.Clusters = 2
	cfg.Changes = 4
	cfg.MeshpilotArgs = append(cfg.MeshpilotArgs, "--system-namespace=mc-system")
	res, log := runSmall(t, cfg)
	// Per cluster: 2 namespaces + 3 nodes + 4 services + 8 pods (create
	// and status) + 4 slices; the Secret is not counted.
	if want := int64(2 * (2 + 3 + 4 + 2*8 + 4)); res.Setup.Writes != want {
		t.Errorf("setup writes = %d, want %d", res.Setup.Writes, want)
	}
	if res.RemoteSyncSeconds < res.SyncSeconds || res.SyncSeconds <= 0 {
		t.Errorf("remote sync %.2fs, sync %.2fs: want the remote cluster in after readiness", res.RemoteSyncSeconds, res.SyncSeconds)
	}
	if res.Convergence.Clients != 3 {
		t.Errorf("convergence: %+v, want 3 clients", res.Convergence)
	}
	ch := res.Churn
	if ch == nil {
		t.Fatal("no churn result")
	}
	if ch.Changes != 4 || ch.Misses != 0 || ch.Pairs < 4 {
		t.Errorf("churn: %d changes, %d pairs, %d misses; want 4 changes, at least 4 pairs, no misses", ch.Changes, ch.Pairs, ch.Misses)
	}
	// Changes alternate between the clusters, whose addresses differ.
	local, remote := netip.MustParsePrefix("10.128.0.0/12"), netip.MustParsePrefix("10.144.0.0/12")
	for i, rec := range ch.PerChange {
		want := local
		if i%2 == 1 {
			want = remote
		}
		if !want.Contains(netip.MustParseAddr(rec.Address)) {
			t.Errorf("change %d added %s, want an address of %s", i, rec.Address, want)
		}
	}
	if bc := ch.ByCluster; len(bc) != 2 || bc[0].Cluster != "Kubernetes" || bc[1].Cluster != "cluster-2" ||
		bc[0].Changes != 2 || bc[1].Changes != 2 || bc[0].Pairs+bc[1].Pairs != ch.Pairs || bc[0].Misses+bc[1].Misses != 0 {
		t.Errorf("churn by cluster: %+v, want 2 changes in Kubernetes and 2 in cluster-2, every pair, no misses", bc)
	}
	// A later run against this API server must not find the Secret
	// naming this run's stopped API server.
	secrets, err := env.Client.CoreV1().Secrets("mc-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("%d remote Secrets left after the run", len(secrets.Items))
	}
	var sum bytes.Buffer
	res.WriteSummary(&sum)
	if !strings.Contains(sum.String(), "clusters: 2, the same services in each (4 endpoints per hostname)") {
		t.Errorf("summary does not give the clusters:\n%s", sum.String())
	}
	if t.Failed() {
		t.Logf("progress:\n%s\nsummary:\n%s", log.String(), sum.String())
	}
}

// With several clusters a client has converged once every service's
// load assignments hold every cluster's endpoints between them (one
// assignment, or one per subset), counting only those that take traffic.
func TestClientWaitsForEveryClusterEndpoints(t *testing.T) {
	const host = "svc-0.bench-0.svc.cluster.local"
	healthy := func(addrs ...string) map[string]core.HealthStatus {
		m := map[string]core.HealthStatus{}
		for _, a := range addrs {
			m[a] = core.HealthStatus_HEALTHY
		}
		return m
	}
	for _, tc := range []struct {
		name string
		clas map[string]map[string]core.HealthStatus // by CLA name
		want bool
	}{
		{"one cluster's endpoints only", map[string]map[string]core.HealthStatus{
			"outbound|7070||" + host: healthy("10.128.0.1", "10.128.0.2"),
		}, false},
		{"both clusters'", map[string]map[string]core.HealthStatus{
			"outbound|7070||" + host: healthy("10.128.0.1", "10.128.0.2", "10.144.0.1", "10.144.0.2"),
		}, true},
		{"both clusters' over two subsets", map[string]map[string]core.HealthStatus{
			"outbound|7070|v1|" + host: healthy("10.128.0.1", "10.144.0.2"),
			"outbound|7070|v2|" + host: healthy("10.128.0.2", "10.144.0.1"),
		}, true},
		{"one of them unhealthy", map[string]map[string]core.HealthStatus{
			"outbound|7070||" + host: {"10.128.0.1": core.HealthStatus_HEALTHY, "10.128.0.2": core.HealthStatus_HEALTHY,
				"10.144.0.1": core.HealthStatus_HEALTHY, "10.144.0.2": core.HealthStatus_UNHEALTHY},
		}, false},
		{"a second service short", map[string]map[string]core.HealthStatus{
			"outbound|7070||" + host:                         healthy("10.128.0.1", "10.128.0.2", "10.144.0.1", "10.144.0.2"),
			"outbound|7070||svc-1.bench-0.svc.cluster.local": healthy("10.128.0.3", "10.128.0.4", "10.144.0.3"),
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newADSClient(0, "bench-0", []string{host + ":7070"}, &sightings{}, &clientStats{})
			c.wantEndpoints = 4
			for name, health := range tc.clas {
				receiveCLA(t, c, name, health)
			}
			if got := c.holdsEveryEndpoint(); got != tc.want {
				t.Fatalf("holdsEveryEndpoint = %v, want %v", got, tc.want)
			}
		})
	}
}

// Churn's changes are split by the cluster whose address range holds
// their endpoint; a miss counts in its cluster.
func TestChurnByCluster(t *testing.T) {
	r := &ChurnResult{PerChange: []ChangeRecord{
		{Address: "10.128.0.7", WriteMS: 2, FromStartMS: []float64{3, 5}},
		{Address: "10.144.0.1", WriteMS: 4, FromStartMS: []float64{9, -1}},
		{Address: "10.144.0.2", WriteMS: 4, FromStartMS: []float64{6}},
	}}
	got := churnByCluster(r, []string{"Kubernetes", "cluster-2"})
	want := []ClusterChurn{
		{Cluster: "Kubernetes", Changes: 1, Pairs: 2,
			FromWriteStart: Percentiles{P50MS: 3, P90MS: 5, P99MS: 5, MaxMS: 5}, FromWriteReturn: Percentiles{P50MS: 1, P90MS: 3, P99MS: 3, MaxMS: 3}},
		{Cluster: "cluster-2", Changes: 2, Pairs: 3, Misses: 1,
			FromWriteStart: Percentiles{P50MS: 6, P90MS: 9, P99MS: 9, MaxMS: 9}, FromWriteReturn: Percentiles{P50MS: 2, P90MS: 5, P99MS: 5, MaxMS: 5}},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("by cluster:\n got %+v\nwant %+v", got, want)
	}
}

func TestArgValue(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "default"},
		{[]string{"--debounce-after=50ms"}, "default"},
		{[]string{"--system-namespace=a"}, "a"},
		{[]string{"--system-namespace", "b"}, "b"},
		{[]string{"--system-namespace=a", "--system-namespace", "b"}, "b"}, // the last one wins, as in meshpilot
		{[]string{"--system-namespace="}, "default"},
		{[]string{"--system-namespace"}, "default"},
		{[]string{"--system-namespace-x=c"}, "default"},
	} {
		if got := argValue(tc.args, "system-namespace", "default"); got != tc.want {
			t.Errorf("argValue(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestValidateClusters(t *testing.T) {
	for _, tc := range []struct {
		clusters, services, endpoints int
		wantErr                       string
	}{
		{1, 200, 5, ""},
		{2, 1000, 10, ""},
		{0, 200, 5, "clusters must be between 1 and 8"},
		{9, 200, 5, "clusters must be between 1 and 8"},
		{2, 1000, 1100, "each cluster's address range"},
	} {
		cfg := Defaults()
		cfg.Clusters, cfg.Services, cfg.Endpoints = tc.clusters, tc.services, tc.endpoints
		err := cfg.validate()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("clusters %d, %d x %d: validate = %v, want %q", tc.clusters, tc.services, tc.endpoints, err, tc.wantErr)
		}
	}
}
