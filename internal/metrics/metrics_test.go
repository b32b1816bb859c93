package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// TestInstancesAreIndependent: two sets of metrics in one process (as in
// tests running several meshpilots) register without conflict and count
// apart, work queue metrics included.
func TestInstancesAreIndependent(t *testing.T) {
	a, b := New(), New()
	for _, m := range []*Metrics{a, b} {
		m.WatchRegistry(func() (int, int) { return 3, 7 })
		m.WatchClients(func() (int, int) { return 2, 1 })
	}
	a.WatchRefusedStreams(func() (uint64, uint64) { return 4, 9 })
	a.WatchShedStreams(func() uint64 { return 6 })
	qa := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "q", MetricsProvider: a.WorkqueueProvider()})
	defer qa.ShutDown()
	qb := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "q", MetricsProvider: b.WorkqueueProvider()})
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
	a.InformerEvent("Service", "add")

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
		`meshpilot_xds_shed_streams_total 6`,
		`meshpilot_registry_services 3`,
		`meshpilot_registry_endpoints 7`,
		`meshpilot_xds_convergence_sent_seconds_count{type="EDS"} 1`,
		`meshpilot_xds_convergence_acked_seconds_count{type="EDS"} 1`,
		`meshpilot_workqueue_depth{name="q"} 2`,
		`meshpilot_workqueue_adds_total{name="q"} 2`,
		`meshpilot_xds_pushes_total{type="EDS"} 2`,
		`meshpilot_xds_nacks_total{type="CDS"} 1`,
		`meshpilot_debounce_events_total 5`,
		`meshpilot_debounce_pushes_total 2`,
		`meshpilot_debounce_merged_events_total 3`,
		`meshpilot_push_duration_seconds_count 2`,
		`meshpilot_informer_events_total{event="add",kind="Service"} 1`,
		`go_goroutines `,
		`process_cpu_seconds_total `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics of a lacks %q", want)
		}
	}
	body = scrape(b)
	for _, want := range []string{`meshpilot_workqueue_depth{name="q"} 1`, `meshpilot_workqueue_adds_total{name="q"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics of b lacks %q", want)
		}
	}
	if strings.Contains(body, "meshpilot_xds_pushes_total{") {
		t.Errorf("b counts a's pushes:\n%s", body)
	}
}
