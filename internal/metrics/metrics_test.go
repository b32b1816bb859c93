package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"
)

// TestInstancesAreIndependent: two sets of metrics in one process (as in
// tests running several meshpilots) register without conflict and count
// apart, work queue metrics included.
func TestInstancesAreIndependent(t *testing.T) {
	a, b := New(), New()
	for _, m := range []*Metrics{a, b} {
		m.WatchRegistry(func() map[string]Size { return map[string]Size{"Kubernetes": {Services: 3, Endpoints: 7}} })
		m.WatchClients(func() (int, int) { return 2, 1 })
	}
	a.WatchRefusedStreams(func() (uint64, uint64, uint64) { return 4, 9, 3 })
	a.WatchShedStreams(func() uint64 { return 6 })
	a.WatchHostileClients(func() uint64 { return 2 }, func() uint64 { return 1 })
	qa := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "q", MetricsProvider: a.WorkqueueProviderFor("Kubernetes")})
	defer qa.ShutDown()
	qb := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "q", MetricsProvider: b.WorkqueueProviderFor("Kubernetes")})
	defer qb.ShutDown()
	qa.Add("x")
	qa.Add("y")
	qb.Add("z")
	a.ResponseSent("EDS", true, 5*time.Millisecond)
	a.ResponseSent("EDS", true, 0) // not caused by a change: counted, no convergence
	a.ACKed("EDS", true, 8*time.Millisecond)
	a.NACKed("CDS", false)
	a.Pushed(4, time.Millisecond)
	a.Pushed(1, time.Millisecond)
	a.InformerEventsFor("Kubernetes")("Service", "add")

	scrape := func(m *Metrics) string {
		srv := httptest.NewServer(m.Handler())
		defer srv.Close()
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	body := scrape(a)
	for _, want := range []string{
		`meshpilot_xds_clients{type="grpc"} 2`,
		`meshpilot_xds_clients{type="envoy"} 1`,
		`meshpilot_xds_refused_streams_total{reason="not_ready"} 4`,
		`meshpilot_xds_refused_streams_total{reason="max_clients"} 9`,
		`meshpilot_xds_refused_streams_total{reason="rate_limited"} 3`,
		`meshpilot_xds_shed_streams_total 6`,
		`meshpilot_xds_refused_requests_total 2`,
		`meshpilot_xds_send_timeouts_total 1`,
		`meshpilot_registry_services{cluster="Kubernetes"} 3`,
		`meshpilot_registry_endpoints{cluster="Kubernetes"} 7`,
		`meshpilot_xds_convergence_sent_seconds_count{type="EDS"} 1`,
		`meshpilot_xds_convergence_acked_seconds_count{type="EDS"} 1`,
		`meshpilot_workqueue_depth{cluster="Kubernetes",name="q"} 2`,
		`meshpilot_workqueue_adds_total{cluster="Kubernetes",name="q"} 2`,
		`meshpilot_xds_pushes_total{type="EDS"} 2`,
		`meshpilot_xds_nacks_total{type="CDS"} 1`,
		`meshpilot_debounce_events_total 5`,
		`meshpilot_debounce_pushes_total 2`,
		`meshpilot_debounce_merged_events_total 3`,
		`meshpilot_push_duration_seconds_count 2`,
		`meshpilot_informer_events_total{cluster="Kubernetes",event="add",kind="Service"} 1`,
		`go_goroutines `,
		`go_gc_heap_live_bytes `,
		`go_memstats_heap_inuse_bytes `,
		`process_cpu_seconds_total `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics of a lacks %q", want)
		}
	}
	body = scrape(b)
	for _, want := range []string{`meshpilot_workqueue_depth{cluster="Kubernetes",name="q"} 1`, `meshpilot_workqueue_adds_total{cluster="Kubernetes",name="q"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics of b lacks %q", want)
		}
	}
	if strings.Contains(body, "meshpilot_xds_pushes_total{") {
		t.Errorf("b counts a's pushes:\n%s", body)
	}
}

// TestClustersCountApart: the registries of two clusters in one
// meshpilot, each with a work queue of the same name, count apart under
// their cluster label: the second queue does not collide with the first.
func TestClustersCountApart(t *testing.T) {
	m := New()
	m.WatchRegistry(func() map[string]Size {
		return map[string]Size{"Kubernetes": {Services: 3, Endpoints: 7}, "cluster-b": {Services: 2, Endpoints: 4}}
	})
	for cluster, adds := range map[string]int{"Kubernetes": 2, "cluster-b": 1} {
		q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[int](),
			workqueue.TypedRateLimitingQueueConfig[int]{Name: "meshpilot_services", MetricsProvider: m.WorkqueueProviderFor(cluster)})
		defer q.ShutDown()
		for i := range adds {
			q.Add(i)
		}
		events := m.InformerEventsFor(cluster)
		for range adds {
			events("Service", "add")
		}
	}
	want := `
# HELP meshpilot_informer_events_total Kubernetes informer events, by cluster, kind of object and event (add, update, delete); updates that change nothing included.
# TYPE meshpilot_informer_events_total counter
meshpilot_informer_events_total{cluster="Kubernetes",event="add",kind="Service"} 2
meshpilot_informer_events_total{cluster="cluster-b",event="add",kind="Service"} 1
# HELP meshpilot_registry_endpoints Endpoints the registries of each cluster hold, each address and port of each service port counted once.
# TYPE meshpilot_registry_endpoints gauge
meshpilot_registry_endpoints{cluster="Kubernetes"} 7
meshpilot_registry_endpoints{cluster="cluster-b"} 4
# HELP meshpilot_registry_services Services the registries of each cluster hold; a service several clusters define counts in each.
# TYPE meshpilot_registry_services gauge
meshpilot_registry_services{cluster="Kubernetes"} 3
meshpilot_registry_services{cluster="cluster-b"} 2
# HELP meshpilot_workqueue_adds_total Items added to the work queue.
# TYPE meshpilot_workqueue_adds_total counter
meshpilot_workqueue_adds_total{cluster="Kubernetes",name="meshpilot_services"} 2
meshpilot_workqueue_adds_total{cluster="cluster-b",name="meshpilot_services"} 1
# HELP meshpilot_workqueue_depth Items waiting in the work queue.
# TYPE meshpilot_workqueue_depth gauge
meshpilot_workqueue_depth{cluster="Kubernetes",name="meshpilot_services"} 2
meshpilot_workqueue_depth{cluster="cluster-b",name="meshpilot_services"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"meshpilot_informer_events_total", "meshpilot_registry_endpoints", "meshpilot_registry_services",
		"meshpilot_workqueue_adds_total", "meshpilot_workqueue_depth"); err != nil {
		t.Fatal(err)
	}
}
