package bench

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// smallConfig is a tiny workload of services services over 2 namespaces,
// 2 endpoints each, 3 clients of 2 services, 3 changes, against the
// package's API server.
func smallConfig(services int, prefix string) Config {
	cfg := Defaults()
	cfg.Services, cfg.Namespaces, cfg.Endpoints = services, 2, 2
	cfg.Clients, cfg.PerClient = 3, 2
	cfg.Changes, cfg.Rate = 3, 20
	cfg.Nodes = 3
	cfg.Timeout = 5 * time.Minute
	cfg.Settle = 200 * time.Millisecond
	cfg.Prefix = prefix
	cfg.Env = env
	cfg.MeshpilotArgs = []string{"--debounce-after=50ms"}
	return cfg
}

// runSmall runs cfg and returns its result and progress log.
func runSmall(t *testing.T, cfg Config) (*Result, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	cfg.Log = &log
	// The build of meshpilot is bounded by the test's deadline alone;
	// cfg.Timeout bounds what follows it.
	res, err := Run(testutil.Context(t), cfg)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, log.String())
	}
	return res, &log
}

// TestSmallRun runs the whole benchmark on a tiny workload against the
// package's API server and checks that every figure is there and sane;
// it sets no timing thresholds.
func TestSmallRun(t *testing.T) {
	cfg := smallConfig(5, "small")
	res, log := runSmall(t, cfg)
	// 2 namespaces + 3 nodes + 5 services + 10 pods (create and status) + 5 slices.
	if want := int64(2 + 3 + 5 + 2*10 + 5); res.Setup.Writes != want || newWorkload(nil, &cfg).setupWrites() != want {
		t.Errorf("setup writes = %d, expected %d, want %d", res.Setup.Writes, newWorkload(nil, &cfg).setupWrites(), want)
	}
	cv := res.Convergence
	if cv.Clients != 3 || cv.P50MS <= 0 || cv.P50MS > cv.P99MS || cv.P99MS > cv.MaxMS || cv.MaxMS > cv.AllMS {
		t.Errorf("convergence figures out of order: %+v", cv)
	}
	ch := res.Churn
	if ch == nil {
		t.Fatal("no churn result")
	}
	if ch.Changes != 3 || ch.Misses != 0 || ch.Pairs < 3 || ch.Pairs > 9 {
		t.Errorf("churn: %+v, want 3 changes, 3 to 9 pairs (each change reaches 1 to 3 clients), no misses", *ch)
	}
	if ch.P50MS > ch.P90MS || ch.P90MS > ch.P99MS || ch.P99MS > ch.MaxMS || ch.MaxMS >= cfg.MissTimeout.Seconds()*1000 {
		t.Errorf("churn percentiles out of order: %+v", *ch)
	}
	// The pause between convergence and churn is a phase of its own, so
	// that churn's CPU time is churn's alone.
	var phases []string
	for _, p := range res.Phases {
		phases = append(phases, p.Name)
	}
	if want := []string{"sync", "converged", "settled", "churn"}; !slices.Equal(phases, want) {
		t.Fatalf("phases %v, want %v", phases, want)
	}
	for i, p := range res.Phases {
		if p.RSS <= 0 || p.HWM < p.RSS || p.CPUSeconds <= 0 || p.CPUDelta < 0 || p.Threads <= 0 {
			t.Errorf("phase %s: implausible usage %+v", p.Name, p)
		}
		if i > 0 && p.CPUSeconds < res.Phases[i-1].CPUSeconds {
			t.Errorf("phase %s: CPU time went down", p.Name)
		}
	}
	// The peak is the kernel's over the whole run, at least every phase's
	// RSS; the sampled peak's split adds up to it.
	pk := res.Peak
	if pk.HWM < slices.MaxFunc(res.Phases, func(a, b Phase) int { return int(a.RSS - b.RSS) }).RSS ||
		pk.SampledRSS <= 0 || pk.SampledRSS > pk.HWM || pk.SampledAnon+pk.SampledFile > pk.SampledRSS+(1<<20) {
		t.Errorf("implausible peak %+v for phases %+v", pk, res.Phases)
	}
	// The API server and etcd worked during the setup, and every phase
	// says what each process used in it, meshpilot's among them.
	if res.Setup.WritesPerSecond <= 0 || cpuOf(res.Setup.Processes, "kube-apiserver") <= 0 || cpuOf(res.Setup.Processes, "etcd") <= 0 {
		t.Errorf("setup: %+v, want a write rate and the CPU of kube-apiserver and etcd", res.Setup)
	}
	for _, p := range res.Phases {
		if cpuOf(p.Processes, "meshpilot") < 0 || cpuOf(p.Processes, selfName) < 0 {
			t.Errorf("phase %s: processes %+v, want meshpilot and %s", p.Name, p.Processes, selfName)
		}
	}
	// Each client gets one response per type at least, EDS also at least
	// one more during churn (changes close together may share a push).
	for _, typ := range []string{"lds", "rds", "cds"} {
		if res.XDS.Responses[typ] < 3 {
			t.Errorf("%s responses = %d, want at least one per client", typ, res.XDS.Responses[typ])
		}
	}
	if res.XDS.Responses["eds"] < 4 {
		t.Errorf("eds responses = %d, want at least 4", res.XDS.Responses["eds"])
	}
	if len(ch.PerChange) != 3 {
		t.Errorf("per-change records: %+v, want 3", ch.PerChange)
	}

	var sum bytes.Buffer
	res.WriteSummary(&sum)
	// Without --meshpilot the run measures the image's binary.
	if res.MeshpilotBuild != releaseBuild.name {
		t.Errorf("meshpilot build %q, want %q", res.MeshpilotBuild, releaseBuild.name)
	}
	for _, want := range []string{"meshpilot: release build", "converge (3 clients)", "churn (", "sync", "converged", "peak RSS:", "cores used in", "kube-apiserver"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	if t.Failed() {
		t.Logf("progress:\n%s\nsummary:\n%s", log.String(), sum.String())
	}
}

// TestSmallRunNoPods runs the tiny workload with NoPods and Headless:
// setup writes only namespaces, nodes, Services and slices, the cluster
// holds no Pod, and the endpoints that only slices describe (node and
// zone, no targetRef) of Services without a cluster IP reach every
// client as HEALTHY, at convergence and in churn.
func TestSmallRunNoPods(t *testing.T) {
	cfg := smallConfig(5, "nopods")
	cfg.NoPods, cfg.Headless = true, true
	res, log := runSmall(t, cfg)
	// 2 namespaces + 3 nodes + 5 services + 5 slices.
	if want := int64(2 + 3 + 5 + 5); res.Setup.Writes != want || newWorkload(nil, &cfg).setupWrites() != want {
		t.Errorf("setup writes = %d, expected %d, want %d", res.Setup.Writes, newWorkload(nil, &cfg).setupWrites(), want)
	}
	if cv := res.Convergence; cv.Clients != 3 || cv.P50MS <= 0 || cv.P99MS > cv.AllMS {
		t.Errorf("convergence: %+v, want 3 clients converged", cv)
	}
	// A churn pair counts only when the client holds the new endpoint as
	// HEALTHY.
	if ch := res.Churn; ch == nil || ch.Changes != 3 || ch.Misses != 0 || ch.Pairs < 3 {
		t.Errorf("churn: %+v, want 3 changes, every one seen, no misses", ch)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range cfg.Namespaces {
		ns := newWorkload(nil, &cfg).namespace(i)
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != 0 {
			t.Errorf("pods in %s: %d (%v), want none", ns, len(pods.Items), err)
		}
		svcs, err := env.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range svcs.Items {
			if s.Spec.Selector != nil || s.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Errorf("service %s/%s selects %v, cluster IP %q, want no selector, headless", ns, s.Name, s.Spec.Selector, s.Spec.ClusterIP)
			}
		}
		slices, err := env.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.TargetRef != nil || e.NodeName == nil || e.Zone == nil || e.Conditions.Ready == nil || !*e.Conditions.Ready {
					t.Errorf("slice %s/%s endpoint %+v, want ready with node and zone, no targetRef", ns, s.Name, e)
				}
			}
		}
	}

	var sum bytes.Buffer
	res.WriteSummary(&sum)
	if first, _, _ := strings.Cut(sum.String(), "\n"); !strings.HasPrefix(first, "no Pods:") {
		t.Errorf("summary's first line %q, want it to say the run had no Pods", first)
	}
	if t.Failed() {
		t.Logf("progress:\n%s\nsummary:\n%s", log.String(), sum.String())
	}
}

func TestValidateNoPodsWithoutRules(t *testing.T) {
	cfg := Defaults()
	cfg.NoPods, cfg.TrafficRules = true, true
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "need Pods") {
		t.Fatalf("validate = %v, want traffic rules refused without Pods", err)
	}
}

// cpuOf is the CPU seconds of the processes named name, -1 when there
// are none.
func cpuOf(us []ProcessUsage, name string) float64 {
	for _, u := range us {
		if u.Name == name {
			return u.CPUSeconds
		}
	}
	return -1
}

func TestValidate(t *testing.T) {
	cfg := Defaults()
	cfg.PerClient = cfg.Services + 1
	cfg.Clients = 0
	err := cfg.validate()
	if err == nil || !strings.Contains(err.Error(), "per-client") || !strings.Contains(err.Error(), "clients must be positive") {
		t.Fatalf("validate = %v, want errors naming per-client and clients", err)
	}
}

func TestReadUsage(t *testing.T) {
	u, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.HWM < u.RSS || u.Threads <= 0 || u.RSSAnon <= 0 {
		t.Fatalf("implausible usage of this process: %+v", u)
	}
}

func TestDist(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(101-i)*time.Millisecond)
	}
	ds := newDist(d)
	if ds.p(50) != 50 || ds.p(99) != 99 || ds.p(100) != 100 || ds.mean() != 50.5 {
		t.Fatalf("p50 %v p99 %v max %v mean %v", ds.p(50), ds.p(99), ds.p(100), ds.mean())
	}
	if newDist(nil).p(99) != 0 {
		t.Fatal("empty distribution")
	}
}

// The benchmark builds meshpilot when no binary is given; a missing
// binary is a clear error before anything starts.
func TestMissingBinary(t *testing.T) {
	cfg := Defaults()
	cfg.Env = env
	cfg.Prefix = "missing"
	cfg.Services, cfg.Namespaces, cfg.Endpoints, cfg.Clients, cfg.PerClient, cfg.Changes = 1, 1, 1, 1, 1, 0
	cfg.Meshpilot = filepath.Join(t.TempDir(), "no-such-meshpilot")
	_, err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "no-such-meshpilot") {
		t.Fatalf("err = %v, want one naming the binary", err)
	}
}

// sightings records what an adsClient reports.
type sightings struct{ addrs []string }

func (s *sightings) observe(_ int, addr string, _ time.Time) { s.addrs = append(s.addrs, addr) }
func (s *sightings) converged(int, time.Time)                {}

func loadAssignment(name string, health map[string]core.HealthStatus) *endpoint.ClusterLoadAssignment {
	var lbs []*endpoint.LbEndpoint
	for _, addr := range slices.Sorted(maps.Keys(health)) {
		lbs = append(lbs, &endpoint.LbEndpoint{
			HealthStatus: health[addr],
			HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{Address: &core.Address{
				Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{Address: addr}},
			}}},
		})
	}
	return &endpoint.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpoint.LocalityLbEndpoints{{LbEndpoints: lbs}}}
}

// receiveCLA gives c the ClusterLoadAssignment name with these endpoints
// as it comes on the wire, subscribing c to it first.
func receiveCLA(t *testing.T, c *adsClient, name string, health map[string]core.HealthStatus) {
	t.Helper()
	if _, ok := slices.BinarySearch(c.subs[3], name); !ok {
		c.subs[3] = sortedUnique(append(slices.Clone(c.subs[3]), name))
	}
	if got, err := c.updateCLA(mustMarshal(t, loadAssignment(name, health)), time.Now()); err != nil || got != name {
		t.Fatalf("updateCLA = %q, %v; want %q", got, err, name)
	}
}

// A churn change adds a ready endpoint: it has reached a client when the
// client would send it requests, which grpc-go does for HEALTHY and
// UNKNOWN endpoints only.
func TestClientCountsAnEndpointWhenItTakesTraffic(t *testing.T) {
	const name = "outbound|7070||svc-0.bench-0.svc.cluster.local"
	obs := &sightings{}
	c := newADSClient(0, "bench-0", []string{"svc-0.bench-0.svc.cluster.local:7070"}, obs, &clientStats{})
	for _, step := range []struct {
		health core.HealthStatus
		want   []string // addresses newly counted
	}{
		{core.HealthStatus_UNHEALTHY, []string{"10.128.0.1"}},
		{core.HealthStatus_DRAINING, nil},
		{core.HealthStatus_HEALTHY, []string{"10.128.0.2"}},
		{core.HealthStatus_HEALTHY, nil}, // still there: not new
		{core.HealthStatus_UNHEALTHY, nil},
		{core.HealthStatus_UNKNOWN, []string{"10.128.0.2"}}, // back in service
	} {
		obs.addrs = nil
		receiveCLA(t, c, name, map[string]core.HealthStatus{
			"10.128.0.1": core.HealthStatus_HEALTHY, "10.128.0.2": step.health,
		})
		if !slices.Equal(obs.addrs, step.want) {
			t.Fatalf("10.128.0.2 %s: counted %v, want %v", step.health, obs.addrs, step.want)
		}
	}
}

// Pairs seen before the write returned keep their true, negative latency
// from the write returning, and the result says how many there were.
func TestChurnReportsPairsSeenBeforeTheWriteReturned(t *testing.T) {
	tr := newTracker(3)
	tr.byService = [][]int{{0, 1, 2}}
	ch := tr.expect("10.128.0.9", 0)
	start := ch.writeStart
	tr.written(ch, start.Add(10*time.Millisecond))
	// Two clients hold the change before the write returned.
	tr.observe(0, ch.addr, start.Add(6*time.Millisecond))
	tr.observe(1, ch.addr, start.Add(9*time.Millisecond))
	tr.observe(2, ch.addr, start.Add(30*time.Millisecond))
	services := []*service{{hostname: "svc-0.bench-0.svc.cluster.local"}}

	r := tr.churn([]*change{ch}, services, start, time.Second)
	if r.Pairs != 3 || r.Misses != 0 || r.BeforeWriteReturned != 2 {
		t.Fatalf("pairs %d, misses %d, seen before the write returned %d; want 3, 0, 2", r.Pairs, r.Misses, r.BeforeWriteReturned)
	}
	if r.P50MS != -1 || r.MaxMS != 20 || r.MeanMS != 5 {
		t.Errorf("from the write returning: p50 %v, max %v, mean %v; want -1, 20, 5 (over -4, -1 and 20 ms)", r.P50MS, r.MaxMS, r.MeanMS)
	}
	if fs := r.FromWriteStart; fs.P50MS != 9 || fs.MaxMS != 30 {
		t.Errorf("from the write's start: %+v; want p50 9, max 30", fs)
	}
	if pc := r.PerChange; len(pc) != 1 || !slices.Equal(pc[0].FromStartMS, []float64{6, 9, 30}) || pc[0].WriteMS != 10 {
		t.Errorf("per-change record %+v; want 6, 9 and 30 ms from the start of a 10 ms write", pc)
	}

	res := &Result{Churn: r}
	var sum bytes.Buffer
	res.WriteSummary(&sum)
	if want := "2 of 3 (client, change) pairs were seen before the slice write returned"; !strings.Contains(sum.String(), want) {
		t.Errorf("summary does not say %q:\n%s", want, sum.String())
	}
}

// A client that never sees a change is a miss, whatever the order of the
// other pairs.
func TestChurnCountsMisses(t *testing.T) {
	tr := newTracker(2)
	tr.byService = [][]int{{0, 1}}
	ch := tr.expect("10.128.0.9", 0)
	start := ch.writeStart
	tr.written(ch, start.Add(5*time.Millisecond))
	tr.observe(1, ch.addr, start.Add(8*time.Millisecond))
	r := tr.churn([]*change{ch}, []*service{{hostname: "svc-0"}}, start, time.Second)
	if r.Pairs != 2 || r.Misses != 1 || !slices.Equal(r.PerChange[0].FromStartMS, []float64{-1, 8}) {
		t.Fatalf("pairs %d, misses %d, per change %+v; want 2 pairs, 1 miss, [-1 8]", r.Pairs, r.Misses, r.PerChange)
	}
}

// TestSmallRunWithTrafficRules runs the benchmark with a DestinationRule
// and a weighted VirtualService per service: clients converge on the
// subset clusters, and every route weight change reaches every
// subscribed client.
func TestSmallRunWithTrafficRules(t *testing.T) {
	cfg := smallConfig(4, "rules")
	cfg.TrafficRules = true
	res, log := runSmall(t, cfg)
	// 2 namespaces + 3 nodes + 4 services + 8 pods (create and status) +
	// 4 slices + a DestinationRule and a VirtualService per service.
	if want := int64(2 + 3 + 4 + 2*8 + 4 + 2*4); res.Setup.Writes != want {
		t.Errorf("setup writes = %d, want %d", res.Setup.Writes, want)
	}
	rc := res.RouteChurn
	if rc == nil {
		t.Fatal("no route churn result")
	}
	if rc.Changes != 3 || rc.Misses != 0 || rc.Pairs < 3 || rc.Pairs > 9 {
		t.Errorf("route churn: %+v, want 3 changes, 3 to 9 pairs, no misses", *rc)
	}
	for _, ch := range rc.PerChange {
		if !strings.Contains(ch.Address, "outbound|7070||") || !strings.Contains(ch.Address, "#") {
			t.Errorf("route change record %+v does not name a route and its weights", ch)
		}
	}
	if res.Churn == nil || res.Churn.Misses != 0 {
		t.Errorf("endpoint churn with subsets: %+v, want no misses", res.Churn)
	}
	var phases []string
	for _, p := range res.Phases {
		phases = append(phases, p.Name)
	}
	if want := []string{"sync", "converged", "settled", "churn", "route-churn"}; !slices.Equal(phases, want) {
		t.Errorf("phases %v, want %v", phases, want)
	}
	var sum bytes.Buffer
	res.WriteSummary(&sum)
	if !strings.Contains(sum.String(), "route weights (") {
		t.Errorf("summary lacks the route weights line:\n%s", sum.String())
	}
	if t.Failed() {
		t.Logf("progress:\n%s\nsummary:\n%s", log.String(), sum.String())
	}
}

// A client that does not watch the changed service but holds its
// endpoints (a route of its own service sends traffic there) is no pair
// of the change, before or after every subscriber saw it.
func TestChurnIgnoresClientsNotSubscribed(t *testing.T) {
	tr := newTracker(3)
	tr.byService = [][]int{{0}, {1, 2}}
	ch := tr.expect("10.128.0.9", 0)
	start := ch.writeStart
	tr.written(ch, start.Add(5*time.Millisecond))
	tr.observe(1, ch.addr, start.Add(6*time.Millisecond))
	tr.observe(0, ch.addr, start.Add(7*time.Millisecond))
	tr.observe(2, ch.addr, start.Add(8*time.Millisecond))
	select {
	case <-ch.done:
	default:
		t.Fatal("the change is not done once its one subscriber saw it")
	}
	r := tr.churn([]*change{ch}, []*service{{hostname: "svc-0"}, {hostname: "svc-1"}}, start, time.Second)
	if r.Pairs != 1 || r.Misses != 0 || !slices.Equal(r.PerChange[0].FromStartMS, []float64{7}) {
		t.Fatalf("pairs %d, misses %d, per change %+v; want 1 pair at 7 ms", r.Pairs, r.Misses, r.PerChange)
	}
}
