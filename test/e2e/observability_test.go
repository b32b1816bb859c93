package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	prommodel "github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/meshpilot/meshpilot/internal/debug"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/metrics"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/server"
	"github.com/meshpilot/meshpilot/internal/testutil"
	"github.com/meshpilot/meshpilot/internal/xds"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// running is an in-process meshpilot whose shutdown the test controls.
type running struct {
	*server.Server
	// stop starts the shutdown, as SIGTERM does; done yields Run's result.
	stop context.CancelFunc
	done chan error
}

// startObserved runs meshpilot in-process on loopback, watching ns only,
// with its metrics wired to the registry as meshpilot serve does. Without
// o.Sources it builds the Kubernetes registry of ns.
func startObserved(t *testing.T, ns string, o server.Options) *running {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := metrics.New()
	if len(o.Sources) == 0 {
		reg, err := kube.New(env.API, kube.Options{Namespaces: []string{ns}, Logger: log,
			QueueMetrics: m.WorkqueueProviderFor(model.DefaultClusterID), OnInformerEvent: m.InformerEventsFor(model.DefaultClusterID)})
		if err != nil {
			t.Fatal(err)
		}
		o.Sources = []aggregate.Source{{Name: "kubernetes", Controller: reg}}
	}
	o.Metrics, o.Logger = m, log
	o.XDSAddr, o.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	srv, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Server: srv, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err, ok := <-r.done:
			if ok && err != nil {
				t.Errorf("meshpilot: %v", err)
			}
		case <-time.After(grpctest.Wait):
			t.Errorf("meshpilot did not stop")
		}
	})
	testutil.AwaitHTTP(t, "http://"+srv.HTTPAddr()+"/readyz", http.StatusOK)
	return r
}

// wait returns Run's result once it ends, failing after d.
func (r *running) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case err := <-r.done:
		close(r.done)
		return err
	case <-time.After(d):
		t.Fatalf("meshpilot still running after %v", d)
	}
	return nil
}

// openRawADS opens a state-of-the-world ADS stream as an Envoy node, for
// what grpc-go never does (NACK on demand, hang up).
func openRawADS(t *testing.T, addr, nodeID string) *xdstest.TestClient {
	t.Helper()
	return xdstest.Dial(t, addr, xdstest.Options{Node: xdstest.EnvoyNode(xdstest.NodeOptions{ID: nodeID}), Wait: grpctest.Wait})
}

// writeZonedSlice writes the one slice of a service with every endpoint in
// zone; notReady lists backends whose endpoint is not ready.
func writeZonedSlice(t *testing.T, ns, service, zone string, backends []grpctest.Backend, notReady ...grpctest.Backend) {
	t.Helper()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: service + "-slice", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("grpc"), Port: ptr.To(int32(backends[0].Port))}},
	}
	for _, b := range backends {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{docAddr(b)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(!slices.Contains(notReady, b))},
			Zone:       ptr.To(zone),
		})
	}
	env.ApplyEndpointSlice(t, s)
}

// scrape reads /metrics and parses it.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(prommodel.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not the Prometheus text format: %v", err)
	}
	return fams
}

// value is the value of the metric with those labels: a counter's or
// gauge's value, a histogram's sample count; NaN when absent.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return math.NaN()
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			return m.GetUntyped().GetValue()
		}
	}
	return math.NaN()
}

// metricCheck is one expectation on a scrape.
type metricCheck struct {
	name   string
	labels []string
	ok     func(float64) bool
	want   string
}

func atLeast(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
func exactly(n float64) func(float64) bool { return func(v float64) bool { return v == n } }

// awaitMetrics scrapes until every check holds.
func awaitMetrics(t *testing.T, addr string, checks []metricCheck) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(grpctest.Wait)
	for {
		fams := scrape(t, addr)
		var failed []string
		for _, c := range checks {
			if v := value(fams, c.name, c.labels...); !c.ok(v) {
				failed = append(failed, fmt.Sprintf("%s%v = %v, want %s", c.name, c.labels, v, c.want))
			}
		}
		if len(failed) == 0 {
			return fams
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never matched:\n  %s", strings.Join(failed, "\n  "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %s: %s", url, resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q", url, ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

// awaitSyncz reads /debug/syncz until ok holds.
func awaitSyncz(t *testing.T, debugAddr, what string, ok func([]debug.SyncStatus) bool) []debug.SyncStatus {
	t.Helper()
	deadline := time.Now().Add(grpctest.Wait)
	for {
		var got []debug.SyncStatus
		getJSON(t, "http://"+debugAddr+"/debug/syncz", &got)
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(got, "", "  ")
			t.Fatalf("syncz never showed %s:\n%s", what, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func clientByType(cs []debug.SyncStatus, typ string) *debug.SyncStatus {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// TestMetricsAndDebugPages drives real traffic (a grpc-go client through
// Kubernetes changes, a raw ADS client that NACKs and hangs up) and reads
// every metric and debug page, and `meshpilot status`, afterwards.
func TestMetricsAndDebugPages(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.31", "127.0.0.32")
	createService(t, ns, "obs", 7070)
	writeZonedSlice(t, ns, "obs", "zone-a", bs)
	srv := startObserved(t, ns, server.Options{
		DebugAddr: "127.0.0.1:0",
		// Leading edge: an isolated change goes at once; the burst below
		// falls within a quiet period and is merged.
		Debounce: push.Options{LeadingEdge: true, DebounceAfter: time.Second, DebounceMax: 3 * time.Second},
	})
	httpAddr, debugAddr := srv.HTTPAddr(), srv.DebugAddr()
	host := "obs." + ns + ".svc.cluster.local"
	cluster := "outbound|7070||" + host

	cc := grpctest.Channel(t, srv.XDSAddr(), "xds:///"+host+":7070", grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, bs...)

	// A burst: two new services and a backend going unready.
	createService(t, ns, "obs-b", 7071)
	createService(t, ns, "obs-c", 7072)
	writeZonedSlice(t, ns, "obs", "zone-a", bs, bs[1])
	grpctest.AwaitSpread(t, cc, bs[0])

	// A raw Envoy-like client ACKs the cluster and NACKs its endpoints.
	raw := openRawADS(t, srv.XDSAddr(), "raw-envoy~"+ns)
	raw.Subscribe(resource.ClusterType, cluster)
	cds := raw.Next()
	raw.ACK(cds)
	raw.Subscribe(resource.EndpointType, cluster)
	eds := raw.Next()
	// The NACK repeats the version last ACKed: none.
	raw.NACK(eds, "endpoints rejected by the test")

	t.Run("metrics", func(t *testing.T) {
		checks := []metricCheck{
			{"meshpilot_xds_clients", []string{"type", "grpc"}, exactly(1), "1"},
			{"meshpilot_xds_clients", []string{"type", "envoy"}, exactly(1), "1"},
			{"meshpilot_xds_nacks_total", []string{"type", "EDS"}, exactly(1), "1"},
			{"meshpilot_push_duration_seconds", nil, atLeast(2), ">= 2 pushes"},
			{"meshpilot_debounce_merged_events_total", nil, atLeast(1), ">= 1"},
			{"meshpilot_registry_services", nil, exactly(3), "3"},
			{"meshpilot_registry_endpoints", nil, exactly(2), "2"},
			{"meshpilot_informer_events_total", []string{"kind", "Service", "event", "add"}, exactly(3), "3"},
			{"meshpilot_informer_events_total", []string{"kind", "EndpointSlice", "event", "add"}, exactly(1), "1"},
			// A relist replays objects as updates: at least the one update written.
			{"meshpilot_informer_events_total", []string{"kind", "EndpointSlice", "event", "update"}, atLeast(1), ">= 1"},
			{"meshpilot_workqueue_adds_total", []string{"name", kube.QueueName}, atLeast(3), ">= 3"},
			{"meshpilot_workqueue_depth", []string{"name", kube.QueueName}, exactly(0), "0"},
			{"meshpilot_workqueue_queue_duration_seconds", []string{"name", kube.QueueName}, atLeast(3), ">= 3 observations"},
			{"meshpilot_workqueue_work_duration_seconds", []string{"name", kube.QueueName}, atLeast(3), ">= 3 observations"},
			{"go_goroutines", nil, atLeast(1), "> 0"},
			{"process_resident_memory_bytes", nil, atLeast(1), "> 0"},
		}
		for _, typ := range []string{"LDS", "RDS", "CDS", "EDS"} {
			checks = append(checks, metricCheck{"meshpilot_xds_pushes_total", []string{"type", typ}, atLeast(1), ">= 1"})
		}
		// The unready backend reached the gRPC client as an EDS push
		// caused by a Kubernetes event: sent and ACKed.
		checks = append(checks,
			metricCheck{"meshpilot_xds_convergence_sent_seconds", []string{"type", "EDS"}, atLeast(1), ">= 1 observation"},
			metricCheck{"meshpilot_xds_convergence_acked_seconds", []string{"type", "EDS"}, atLeast(1), ">= 1 observation"})
		fams := awaitMetrics(t, httpAddr, checks)
		events := value(fams, "meshpilot_debounce_events_total")
		pushes := value(fams, "meshpilot_debounce_pushes_total")
		merged := value(fams, "meshpilot_debounce_merged_events_total")
		if !(events >= pushes && pushes >= 2 && merged >= events-pushes) {
			t.Fatalf("debounce: %v events, %v pushes, %v merged", events, pushes, merged)
		}
		for _, f := range []string{"meshpilot_xds_convergence_sent_seconds", "meshpilot_xds_convergence_acked_seconds"} {
			for _, m := range fams[f].GetMetric() {
				h := m.GetHistogram()
				if h.GetSampleCount() > 0 && (h.GetSampleSum() <= 0 || h.GetSampleSum()/float64(h.GetSampleCount()) > grpctest.Wait.Seconds()) {
					t.Fatalf("%s: implausible sum %v for %d samples", f, h.GetSampleSum(), h.GetSampleCount())
				}
			}
		}
	})

	t.Run("registryz and endpointz", func(t *testing.T) {
		var svcs []model.Service
		getJSON(t, "http://"+debugAddr+"/debug/registryz", &svcs)
		var names []string
		for _, s := range svcs {
			names = append(names, string(s.Hostname))
		}
		// Ordered by hostname: "obs-b." sorts before "obs.".
		if want := []string{"obs-b." + ns + ".svc.cluster.local", "obs-c." + ns + ".svc.cluster.local", host}; !slices.Equal(names, want) {
			t.Fatalf("registryz: %v, want %v", names, want)
		}
		if p := svcs[2].Ports; len(p) != 1 || p[0].Port != 7070 || p[0].Name != "grpc" || p[0].Protocol != model.GRPC {
			t.Fatalf("registryz ports of %s: %+v", host, p)
		}
		var eps []debug.ServiceEndpoints
		getJSON(t, "http://"+debugAddr+"/debug/endpointz", &eps)
		if len(eps) != 3 || eps[2].Hostname != model.Hostname(host) || len(eps[2].Ports) != 1 || len(eps[2].Ports[0].Endpoints) != 2 ||
			len(eps[0].Ports) != 1 || len(eps[0].Ports[0].Endpoints) != 0 {
			t.Fatalf("endpointz: %+v", eps)
		}
		health := map[string]model.Health{}
		for _, e := range eps[2].Ports[0].Endpoints {
			health[e.Address] = e.Health
			if e.Locality.Zone != "zone-a" || e.Port != bs[0].Port {
				t.Fatalf("endpoint %+v: want zone-a and port %d", e, bs[0].Port)
			}
		}
		if health[docAddr(bs[0])] != model.Healthy || health[docAddr(bs[1])] != model.Unhealthy {
			t.Fatalf("endpoint health %v", health)
		}
	})

	t.Run("syncz", func(t *testing.T) {
		cs := awaitSyncz(t, debugAddr, "a synced gRPC client and a NACKing one", func(cs []debug.SyncStatus) bool {
			g, r := clientByType(cs, "grpc"), clientByType(cs, "envoy")
			if len(cs) != 2 || g == nil || r == nil {
				return false
			}
			for _, typ := range []string{"LDS", "RDS", "CDS", "EDS"} {
				if g.Types[typ] == nil || g.Types[typ].Status != xds.Synced {
					return false
				}
			}
			return r.Types["CDS"] != nil && r.Types["CDS"].Status == xds.Synced &&
				r.Types["EDS"] != nil && r.Types["EDS"].Status == xds.NACKed
		})
		g, r := clientByType(cs, "grpc"), clientByType(cs, "envoy")
		if g.Namespace != ns || !strings.HasPrefix(g.NodeID, "sidecar~") || !slices.Equal(g.Types["LDS"].Subscribed, []string{host + ":7070"}) ||
			g.Types["EDS"].LastACK.Version != g.Types["EDS"].LastSent.Version {
			t.Fatalf("gRPC client: %+v", g)
		}
		e := r.Types["EDS"]
		if r.NodeID != "raw-envoy~"+ns || r.NACKs != 1 || e.LastNACK.Error != "endpoints rejected by the test" ||
			e.LastNACK.Version != eds.Version || e.LastNACK.Nonce != eds.Nonce ||
			e.LastSent.Nonce != eds.Nonce || e.LastACK != nil || !slices.Equal(e.Subscribed, []string{cluster}) {
			t.Fatalf("raw client: %+v; EDS %+v", r, e)
		}
		if c := r.Types["CDS"]; c.LastACK.Version != cds.Version || c.LastACK.Nonce != cds.Nonce {
			t.Fatalf("raw client CDS %+v", c)
		}
	})

	t.Run("config_dump", func(t *testing.T) {
		var dump debug.Dump
		getJSON(t, "http://"+debugAddr+"/debug/config_dump?node="+url.QueryEscape(raw.Node().GetId()), &dump)
		if len(dump.Streams) != 1 {
			t.Fatalf("dump %+v", dump)
		}
		types := dump.Streams[0].Types
		if c := types["CDS"]; c.Version != cds.Version || len(c.Resources) != 1 ||
			resourceField(t, c.Resources[0], "name") != cluster ||
			resourceField(t, c.Resources[0], "@type") != "type.googleapis.com/envoy.config.cluster.v3.Cluster" {
			t.Fatalf("CDS dump %+v", c)
		}
		if _, ok := types["EDS"]; ok {
			t.Fatalf("the NACKed endpoints are not held, yet dumped: %+v", types["EDS"])
		}
		var cs []debug.SyncStatus
		getJSON(t, "http://"+debugAddr+"/debug/syncz", &cs)
		grpcNode := clientByType(cs, "grpc").NodeID
		getJSON(t, "http://"+debugAddr+"/debug/config_dump?node="+url.QueryEscape(grpcNode), &dump)
		if l := dump.Streams[0].Types["LDS"]; len(l.Resources) != 1 || resourceField(t, l.Resources[0], "name") != host+":7070" {
			t.Fatalf("LDS dump of the gRPC client: %+v", l)
		}
		for path, code := range map[string]int{
			"/debug/config_dump":                http.StatusBadRequest,
			"/debug/config_dump?node=nobody":    http.StatusNotFound,
			"/debug/pprof/":                     http.StatusOK,
			"/debug/pprof/cmdline":              http.StatusOK,
			"/debug/pprof/goroutine?debug=1":    http.StatusOK,
			"/debug/registryz?unused=parameter": http.StatusOK,
		} {
			if got := httpStatus(t, "http://"+debugAddr+path); got != code {
				t.Errorf("%s: %d, want %d", path, got, code)
			}
		}
		// With --debug-addr the HTTP port keeps them off.
		if got := httpStatus(t, "http://"+httpAddr+"/debug/syncz"); got != http.StatusNotFound {
			t.Errorf("/debug/syncz on the HTTP port: %d, want 404", got)
		}
	})

	t.Run("meshpilot status", func(t *testing.T) {
		bin := testutil.BuildMeshpilot(t)
		out, code := runProcess(t, bin, nil, "status", "--server", "http://"+debugAddr)
		if code != 0 {
			t.Fatalf("status exited %d:\n%s", code, out)
		}
		lines := strings.Split(out, "\n")
		if !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "LDS") {
			t.Fatalf("no header:\n%s", out)
		}
		var rawLine, grpcLine string
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, "raw-envoy~"):
				rawLine = l
			case strings.HasPrefix(l, "sidecar~"):
				grpcLine = l
			}
		}
		if f := strings.Fields(rawLine); len(f) < 8 || f[2] != "envoy" || f[3] != "-" || f[4] != "-" || f[5] != "SYNCED" || f[6] != "NACKED" || f[7] != "1" {
			t.Fatalf("the NACKing client's line %q:\n%s", rawLine, out)
		}
		if f := strings.Fields(grpcLine); len(f) < 7 || f[2] != "grpc" || strings.Join(f[3:7], " ") != "SYNCED SYNCED SYNCED SYNCED" {
			t.Fatalf("the gRPC client's line %q:\n%s", grpcLine, out)
		}
		if !strings.Contains(out, "endpoints rejected by the test") {
			t.Fatalf("the NACK's error is not shown:\n%s", out)
		}

		out, code = runProcess(t, bin, nil, "status", "--server", debugAddr, "services")
		if code != 0 || !strings.Contains(out, host) {
			t.Fatalf("status services exited %d:\n%s", code, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, host) {
				if f := strings.Fields(l); len(f) != 5 || f[1] != ns || f[2] != "ClientSideLB" || f[3] != "7070/GRPC" || f[4] != "1/2" {
					t.Fatalf("service line %q", l)
				}
			}
		}

		out, code = runProcess(t, bin, nil, "status", "--server", "http://"+httpAddr)
		if code == 0 || !strings.Contains(out, "--debug-addr") {
			t.Fatalf("status against the HTTP port of a meshpilot with --debug-addr: exit %d\n%s", code, out)
		}
	})

	t.Run("a client that disconnects", func(t *testing.T) {
		raw.Close()
		awaitMetrics(t, httpAddr, []metricCheck{
			{"meshpilot_xds_clients", []string{"type", "envoy"}, exactly(0), "0"},
			{"meshpilot_xds_clients", []string{"type", "grpc"}, exactly(1), "1"},
			{"meshpilot_xds_nacks_total", []string{"type", "EDS"}, exactly(1), "1 (counters stay)"},
		})
		awaitSyncz(t, debugAddr, "only the gRPC client", func(cs []debug.SyncStatus) bool {
			return len(cs) == 1 && cs[0].Type == "grpc"
		})
		if got := httpStatus(t, "http://"+debugAddr+"/debug/config_dump?node="+url.QueryEscape(raw.Node().GetId())); got != http.StatusNotFound {
			t.Fatalf("config_dump of a gone client: %d", got)
		}
	})
}

// resourceField reads a top-level string field of a protojson resource.
func resourceField(t *testing.T, raw json.RawMessage, field string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("resource %s: %v", raw, err)
	}
	s, _ := m[field].(string)
	return s
}

func httpStatus(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestShutdownDrainsStreams: once shutdown begins, readiness fails and new
// streams are refused, open streams still get changes while the drain
// lasts, and it ends as soon as they are gone; Run then returns. The
// drain lasts longer than the test may run, so that nothing here races
// its end on a busy machine; TestServeDrainsOnSIGTERM shows the streams
// still open at its end closed.
func TestShutdownDrainsStreams(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.33", "127.0.0.34")
	createService(t, ns, "drain", 7070)
	writeZonedSlice(t, ns, "drain", "z", bs[:1])
	const drain = time.Hour
	srv := startObserved(t, ns, server.Options{DrainDuration: drain, Debounce: push.Options{LeadingEdge: true}})
	cluster := "outbound|7070||drain." + ns + ".svc.cluster.local"

	open := openRawADS(t, srv.XDSAddr(), "draining-envoy")
	open.Subscribe(resource.EndpointType, cluster)
	open.ACK(open.Next())

	srv.stop()
	testutil.AwaitHTTP(t, "http://"+srv.HTTPAddr()+"/readyz", http.StatusServiceUnavailable)

	late := openRawADS(t, srv.XDSAddr(), "late-envoy")
	late.Subscribe(resource.EndpointType, cluster)
	if err := late.ExpectEnd(grpctest.Wait); status.Code(err) != codes.Unavailable {
		t.Fatalf("a new stream while draining: %v, want Unavailable", err)
	}

	// The open stream still follows Kubernetes.
	writeZonedSlice(t, ns, "drain", "z", bs)
	if r := open.Next(); len(r.Resources) != 1 {
		t.Fatalf("push while draining: %d resources", len(r.Resources))
	}

	// The last stream goes: the drain ends long before its hour.
	open.Close()
	if err := srv.wait(t, grpctest.Wait); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestShutdownWithoutStreamsIsQuick: with no stream open the drain ends at
// once, however long it may last.
func TestShutdownWithoutStreamsIsQuick(t *testing.T) {
	ns := env.Namespace(t, nil)
	srv := startObserved(t, ns, server.Options{DrainDuration: time.Hour})
	began := time.Now()
	srv.stop()
	if err := srv.wait(t, grpctest.Wait); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("shutdown without streams took %v", took)
	}
}

// TestMaxConnectionAge: connections are closed after their age so that
// clients reconnect. A raw stream is ended; the grpc-go client's first
// stream is ended too, and a change made after that still reaches it,
// which it can only get over a stream it opened again.
func TestMaxConnectionAge(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.35", "127.0.0.36")
	createService(t, ns, "aged", 7070)
	writeZonedSlice(t, ns, "aged", "z", bs)
	srv := startObserved(t, ns, server.Options{MaxConnectionAge: time.Second, MaxConnectionAgeGrace: time.Second})
	cc := grpctest.Channel(t, srv.XDSAddr(), "xds:///aged:7070", grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, bs...)
	first := grpcStreams(srv)
	if len(first) != 1 {
		t.Fatalf("gRPC streams %v, want one", first)
	}

	raw := openRawADS(t, srv.XDSAddr(), "aging-envoy")
	raw.Subscribe(resource.ClusterType, "outbound|7070||aged."+ns+".svc.cluster.local")
	raw.Next()
	if err := raw.ExpectEnd(grpctest.Wait); err == nil {
		t.Fatal("stream ended without an error")
	}

	deadline := time.Now().Add(grpctest.Wait)
	for slices.Contains(grpcStreams(srv), first[0]) {
		if time.Now().After(deadline) {
			t.Fatalf("the gRPC client's stream %d is still open after %v", first[0], grpctest.Wait)
		}
		time.Sleep(20 * time.Millisecond) // between polls
	}
	writeZonedSlice(t, ns, "aged", "z", bs, bs[0])
	grpctest.AwaitSpread(t, cc, bs[1])
}

// grpcStreams lists the numbers of the open streams of gRPC clients.
func grpcStreams(srv *running) []int64 {
	var ids []int64
	for _, c := range srv.XDS().Clients() {
		if c.GRPC {
			ids = append(ids, c.Stream)
		}
	}
	return ids
}

// TestServeDrainsOnSIGTERM: the serve command answers SIGTERM with the
// drain: readiness fails at once, the open stream is closed after
// --drain-duration, and the process exits cleanly.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	ns := env.Namespace(t, nil)
	createService(t, ns, "sig", 7070)
	bin := testutil.BuildMeshpilot(t)
	xdsAddr, httpAddr, debugAddr := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	const drain = 3 * time.Second
	cmd := exec.Command(bin, "serve", "--kubeconfig", env.Kubeconfig, "--namespaces", ns,
		"--xds-addr", xdsAddr, "--http-addr", httpAddr, "--debug-addr", debugAddr, "--drain-duration", drain.String())
	out := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("output:\n%s", out.String())
		}
	})
	testutil.AwaitHTTP(t, "http://"+httpAddr+"/readyz", http.StatusOK)
	testutil.AwaitHTTP(t, "http://"+httpAddr+"/metrics", http.StatusOK)
	testutil.AwaitHTTP(t, "http://"+debugAddr+"/debug/syncz", http.StatusOK)

	raw := openRawADS(t, xdsAddr, "sigterm-envoy")
	raw.Subscribe(resource.ClusterType, "outbound|7070||sig."+ns+".svc.cluster.local")
	raw.Next()

	began := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testutil.AwaitHTTP(t, "http://"+httpAddr+"/readyz", http.StatusServiceUnavailable)
	if err := raw.ExpectEnd(drain + grpctest.Wait); err == nil {
		t.Fatal("the stream ended without an error")
	}
	if took := time.Since(began); took < drain {
		t.Fatalf("the stream was closed after %v, before --drain-duration %v", took, drain)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("meshpilot exited with %v", err)
		}
	case <-time.After(grpctest.Wait):
		t.Fatal("meshpilot did not exit after the drain")
	}
	if !strings.Contains(out.String(), "draining") {
		t.Fatalf("the drain is not logged:\n%s", out.String())
	}
}
