package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// The dashboard and the alerts, as the README tells operators to import
// and apply them.
var observabilityFiles = []string{
	"deploy/observability/meshpilot-dashboard.json",
	"deploy/observability/meshpilot-alerts.yaml",
}

// targetLabels are the labels Prometheus adds to every series it scrapes
// from a Pod behind a ServiceMonitor (or its Kubernetes service
// discovery): the dashboard and alerts may use them although /metrics
// has none.
var targetLabels = []string{"namespace", "pod", "job", "instance", "service", "container", "endpoint"}

// scrapeSeries are the series Prometheus makes of every scrape itself:
// they carry the target labels only.
var scrapeSeries = []string{"up"}

// promqlUses is what tools/promql's checker prints.
type promqlUses struct {
	Expressions []struct {
		File      string `json:"file"`
		Where     string `json:"where"`
		Expr      string `json:"expr"`
		Selectors []struct {
			Metric   string `json:"metric"`
			Matchers []struct {
				Label string `json:"label"`
				Op    string `json:"op"`
				Value string `json:"value"`
			} `json:"matchers"`
		} `json:"selectors"`
		Groupings []struct {
			Clause  string   `json:"clause"`
			Labels  []string `json:"labels"`
			Metrics []string `json:"metrics"`
		} `json:"groupings"`
	} `json:"expressions"`
}

// runPromQLCheck runs the checker on files; it returns what they use, or
// the checker's error output when it refused them.
func runPromQLCheck(t *testing.T, files ...string) (promqlUses, string, bool) {
	t.Helper()
	bin, err := testenv.PromQLCheck()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, files...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
		return promqlUses{}, stderr.String(), false
	}
	var uses promqlUses
	if err := json.Unmarshal(stdout.Bytes(), &uses); err != nil {
		t.Fatalf("the checker's output: %v\n%s", err, stdout.String())
	}
	return uses, "", true
}

// exposed is, per series name as Prometheus stores it (a histogram's
// _bucket, _sum and _count apart), the labels and the values of each.
type exposed map[string]map[string]map[string]bool

func exposedSeries(fams map[string]*dto.MetricFamily) exposed {
	out := exposed{}
	add := func(name string, labels []*dto.LabelPair, extra ...string) {
		if out[name] == nil {
			out[name] = map[string]map[string]bool{}
		}
		set := func(l, v string) {
			if out[name][l] == nil {
				out[name][l] = map[string]bool{}
			}
			out[name][l][v] = true
		}
		for _, l := range labels {
			set(l.GetName(), l.GetValue())
		}
		for i := 0; i+1 < len(extra); i += 2 {
			set(extra[i], extra[i+1])
		}
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				for _, b := range m.GetHistogram().GetBucket() {
					add(name+"_bucket", m.GetLabel(), "le", fmt.Sprint(b.GetUpperBound()))
				}
				add(name+"_sum", m.GetLabel())
				add(name+"_count", m.GetLabel())
			case dto.MetricType_SUMMARY:
				for _, q := range m.GetSummary().GetQuantile() {
					add(name, m.GetLabel(), "quantile", fmt.Sprint(q.GetQuantile()))
				}
				add(name+"_sum", m.GetLabel())
				add(name+"_count", m.GetLabel())
			default:
				add(name, m.GetLabel())
			}
		}
	}
	return out
}

// unknownUses lists what the expressions use that the scrape lacks: a
// metric, a label of a matcher or a grouping, or the value an equality
// matcher asks for.
func unknownUses(uses promqlUses, series exposed) []string {
	var problems []string
	has := func(metric, label string) bool {
		if slices.Contains(targetLabels, label) {
			return true
		}
		_, ok := series[metric][label]
		return ok
	}
	for _, x := range uses.Expressions {
		at := x.File + ": " + x.Where
		for _, s := range x.Selectors {
			scraped := slices.Contains(scrapeSeries, s.Metric)
			if _, ok := series[s.Metric]; !ok && !scraped {
				problems = append(problems, fmt.Sprintf("%s: metric %q is not on /metrics", at, s.Metric))
				continue
			}
			for _, m := range s.Matchers {
				switch {
				case !has(s.Metric, m.Label):
					problems = append(problems, fmt.Sprintf("%s: %s has no label %q", at, s.Metric, m.Label))
				case m.Op == "=" && !slices.Contains(targetLabels, m.Label) && !series[s.Metric][m.Label][m.Value]:
					problems = append(problems, fmt.Sprintf("%s: %s{%s=%q}: no such value on /metrics", at, s.Metric, m.Label, m.Value))
				}
			}
		}
		for _, g := range x.Groupings {
			for _, metric := range g.Metrics {
				if _, ok := series[metric]; !ok {
					continue // reported with its selector
				}
				for _, l := range g.Labels {
					if !has(metric, l) {
						problems = append(problems, fmt.Sprintf("%s: %s (%s) has no label %q", at, metric, g.Clause, l))
					}
				}
			}
		}
	}
	return problems
}

// TestDashboardAndAlerts parses every expression of the dashboard and the
// alerts with Prometheus' parser, then drives a real meshpilot so that
// every metric they use exists (a gRPC client, a push, a NACK, an audit,
// a remote cluster, an Istio object) and checks each metric, label and
// label value they use against its /metrics.
func TestDashboardAndAlerts(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range observabilityFiles {
		files = append(files, filepath.Join(root, f))
	}
	uses, errs, ok := runPromQLCheck(t, files...)
	if !ok {
		t.Fatalf("the checker refused the dashboard or the alerts:\n%s", errs)
	}
	perFile := map[string]int{}
	for _, x := range uses.Expressions {
		perFile[x.File]++
	}
	for _, f := range files {
		if perFile[f] == 0 {
			t.Fatalf("no expression read from %s", f)
		}
	}

	t.Run("the checker refuses a broken expression", func(t *testing.T) {
		for _, tc := range []struct{ file, from, to, want string }{
			{files[0], `sum by (type) (rate(meshpilot_xds_nacks_total`, `sum by (type) rate(meshpilot_xds_nacks_total`, `panel 11 "NACKs, by type" target A`},
			{files[0], `rate(meshpilot_push_triggers_total{namespace=\"$namespace\", pod=~\"$pod\"}[$__rate_interval]`, `rate(meshpilot_push_triggers_total{namespace=\"$namespace\", pod=~\"$pod\"}[$window]`, "undefined variable $window"},
			{files[1], `(meshpilot_xds_stale_streams) > 0`, `(meshpilot_xds_stale_streams > 0`, `alert "MeshpilotXDSClientsStale"`},
			{files[1], `for: 10m`, `for: ten minutes`, "ten minutes"},
		} {
			data, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte(tc.from)) {
				t.Fatalf("%s no longer holds %q", tc.file, tc.from)
			}
			broken := filepath.Join(t.TempDir(), filepath.Base(tc.file))
			if err := os.WriteFile(broken, bytes.Replace(data, []byte(tc.from), []byte(tc.to), 1), 0o644); err != nil {
				t.Fatal(err)
			}
			_, errs, ok := runPromQLCheck(t, broken)
			if ok || !strings.Contains(errs, broken) || !strings.Contains(errs, tc.want) {
				t.Fatalf("%q -> %q: ok %v, errors:\n%s\nwant a refusal naming the file and %q", tc.from, tc.to, ok, errs, tc.want)
			}
		}
	})

	ns := env.Namespace(t, nil)
	system := env.Namespace(t, nil)
	env.InstallIstioCRDs(t)
	bs := grpctest.StartBackends(t, "127.0.0.41", "127.0.0.42")
	createService(t, ns, "dash", 7070)
	writeSlice(t, ns, "dash", bs)
	// A remote cluster: this same API server under another cluster ID.
	kubeconfig, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	createRemoteSecret(t, system, "remote-dash", map[string][]byte{"dash-remote": kubeconfig})

	bin := testutil.BuildMeshpilot(t)
	xdsAddr, httpAddr, debugAddr := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	startProcess(t, bin, "serve", "--kubeconfig", env.Kubeconfig, "--namespaces", ns, "--system-namespace", system,
		"--xds-addr", xdsAddr, "--http-addr", httpAddr, "--debug-addr", debugAddr, "--drain-duration", "1s")
	testutil.AwaitHTTP(t, "http://"+httpAddr+"/readyz", http.StatusOK)

	host := "dash." + ns + ".svc.cluster.local"
	cc := grpctest.Channel(t, xdsAddr, "xds:///"+host+":7070", grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, bs...)
	// A push: a backend goes unready.
	writeSlice(t, ns, "dash", bs, bs[1])
	grpctest.AwaitSpread(t, cc, bs[0])
	// A NACK.
	raw := openRawADS(t, xdsAddr, "dash-envoy~"+ns)
	raw.Subscribe(resource.EndpointType, "outbound|7070||"+host)
	raw.NACK(raw.Next(), "rejected by the dashboard test")
	// An Istio object.
	ic, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ic.NetworkingV1().DestinationRules(ns).Create(ctx(t), &networkingv1.DestinationRule{
		ObjectMeta: metav1.ObjectMeta{Name: "dash", Namespace: ns},
		Spec: apinetworking.DestinationRule{Host: "dash", TrafficPolicy: &apinetworking.TrafficPolicy{
			LoadBalancer: &apinetworking.LoadBalancerSettings{LbPolicy: &apinetworking.LoadBalancerSettings_Simple{Simple: apinetworking.LoadBalancerSettings_ROUND_ROBIN}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An audit.
	if code := httpStatus(t, "http://"+debugAddr+"/debug/consistencyz"); code != http.StatusOK {
		t.Fatalf("/debug/consistencyz: %d", code)
	}

	fams := awaitMetrics(t, httpAddr, []metricCheck{
		{"meshpilot_xds_clients", []string{"type", "grpc"}, exactly(1), "1"},
		{"meshpilot_xds_nacked_streams", []string{"type", "EDS"}, exactly(1), "1 (the raw client)"},
		{"meshpilot_xds_convergence_acked_seconds", []string{"type", "EDS"}, atLeast(1), ">= 1 observation"},
		{"meshpilot_push_triggers_total", []string{"kind", "Endpoints"}, atLeast(1), ">= 1"},
		{"meshpilot_push_triggers_total", []string{"kind", "DestinationRule"}, atLeast(1), ">= 1"},
		{"meshpilot_config_objects", []string{"kind", "DestinationRule", "state", "applied"}, exactly(1), "1"},
		{"meshpilot_audit_runs_total", nil, exactly(1), "1"},
		{"meshpilot_remote_cluster_state", []string{"cluster", "dash-remote", "state", "synced"}, exactly(1), "1"},
	})
	if problems := unknownUses(uses, exposedSeries(fams)); len(problems) > 0 {
		t.Fatalf("the dashboard and alerts use what a running meshpilot does not expose:\n%s", strings.Join(problems, "\n"))
	}

	t.Run("a metric or label that is not exposed is found", func(t *testing.T) {
		data, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		for from, to := range map[string]string{
			`sum by (type) (rate(meshpilot_xds_nacks_total`:           `sum by (type) (rate(meshpilot_xds_nack_total`,
			`sum by (kind) (rate(meshpilot_push_triggers_total`:       `sum by (reason) (rate(meshpilot_push_triggers_total`,
			`meshpilot_remote_cluster_state{namespace=\"$namespace\"`: `meshpilot_remote_cluster_state{state=\"lost\", namespace=\"$namespace\"`,
		} {
			if !bytes.Contains(data, []byte(from)) {
				t.Fatalf("the dashboard no longer holds %q", from)
			}
			data = bytes.Replace(data, []byte(from), []byte(to), 1)
		}
		broken := filepath.Join(t.TempDir(), "dashboard.json")
		if err := os.WriteFile(broken, data, 0o644); err != nil {
			t.Fatal(err)
		}
		uses, errs, ok := runPromQLCheck(t, broken)
		if !ok {
			t.Fatalf("the checker refused a dashboard that parses:\n%s", errs)
		}
		got := unknownUses(uses, exposedSeries(fams))
		for _, want := range []string{`metric "meshpilot_xds_nack_total" is not on /metrics`,
			`meshpilot_push_triggers_total (by) has no label "reason"`,
			`meshpilot_remote_cluster_state{state="lost"}: no such value`} {
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, want) }) {
				t.Errorf("not found: %s; found:\n%s", want, strings.Join(got, "\n"))
			}
		}
		if len(got) != 3 {
			t.Errorf("found %d problems, want 3:\n%s", len(got), strings.Join(got, "\n"))
		}
	})
}

// observabilityCommands are the README's commands that install the
// alerts and the dashboard.
var observabilityCommands = []string{
	"kubectl apply -f deploy/observability/meshpilot-alerts.yaml",
	"kubectl -n monitoring create configmap meshpilot-dashboard --from-file=deploy/observability/meshpilot-dashboard.json",
	"kubectl -n monitoring label configmap meshpilot-dashboard grafana_dashboard=1",
}

// runObservabilityCommands runs them as written against the test API
// server, with the Prometheus Operator's PrometheusRule CRD installed so
// that the API server checks the rule against the operator's schema, and
// checks what they stored.
func runObservabilityCommands(t *testing.T, cmds []testutil.ReadmeCommand) {
	crdPath, err := testenv.PrometheusRuleCRD()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.InstallCRDs(crdPath); err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, "meshpilot-system")
	ensureNamespace(t, "monitoring")
	for _, c := range cmds {
		kubectl(t, c.Line)
	}

	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	rule, err := dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}).
		Namespace("meshpilot-system").Get(ctx(t), "meshpilot", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alerts := 0
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			if name, _, _ := unstructured.NestedString(r.(map[string]any), "alert"); name != "" {
				alerts++
			}
		}
	}
	if alerts == 0 {
		t.Fatalf("the stored PrometheusRule holds no alert: %v", rule.Object["spec"])
	}

	cm, err := env.Client.CoreV1().ConfigMaps("monitoring").Get(ctx(t), "meshpilot-dashboard", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "deploy/observability/meshpilot-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["meshpilot-dashboard.json"] != string(want) || cm.Labels["grafana_dashboard"] != "1" {
		t.Fatalf("the dashboard ConfigMap: labels %v, keys %d, dashboard intact %v", cm.Labels, len(cm.Data), cm.Data["meshpilot-dashboard.json"] == string(want))
	}
}
