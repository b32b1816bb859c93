package e2e

// The chart's alerts and dashboard (prometheusRule.enabled,
// grafanaDashboard.enabled): its copies of deploy/observability/'s files
// stay byte-equal to them, the rendered PrometheusRule's spec is the
// alerts' with their job made the chart's Service name and their own
// templates ({{ $labels.pod }}) left as written, its expressions still
// parse with Prometheus' parser, and the ConfigMap holds the dashboard's
// bytes with the label Grafana's sidecar looks for. TestChartDeploys
// applies both (ci/secure-values.yaml) to an API server with the
// PrometheusRule CRD installed; TestChartMatchesDeploy shows the defaults
// render neither.

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/meshpilot/meshpilot/internal/testutil"
)

// chartObservabilityCopies maps each file of the chart's files/ folder to
// the file of deploy/observability/ it copies: Helm reads only files
// inside the chart, and deploy/observability/ stays the one to edit.
var chartObservabilityCopies = map[string]string{
	"meshpilot-alerts.yaml":    "deploy/observability/meshpilot-alerts.yaml",
	"meshpilot-dashboard.json": "deploy/observability/meshpilot-dashboard.json",
}

// TestChartObservabilityFilesAreCopies: charts/meshpilot/files/ holds
// exactly the copies of deploy/observability/'s files, byte for byte.
func TestChartObservabilityFilesAreCopies(t *testing.T) {
	root := testutil.RepoRoot(t)
	dir := filepath.Join(root, chartDir, "files")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		src, ok := chartObservabilityCopies[e.Name()]
		if !ok {
			t.Errorf("%s/files/%s copies nothing the chart's tests know of", chartDir, e.Name())
			continue
		}
		seen[e.Name()] = true
		if !e.Type().IsRegular() {
			t.Errorf("%s/files/%s is not a regular file (helm package and lint mishandle links): copy %s there", chartDir, e.Name(), src)
			continue
		}
		got, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(root, src))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/files/%s differs from %s: run cp %s %s/files/", chartDir, e.Name(), src, src, chartDir)
		}
	}
	for name, src := range chartObservabilityCopies {
		if !seen[name] {
			t.Errorf("%s/files/%s is missing: run cp %s %s/files/", chartDir, name, src, chartDir)
		}
	}
}

// jobMatcher finds the job matchers of the alerts' expressions.
var jobMatcher = regexp.MustCompile(`job="([^"]*)"`)

// alertsSpec reads deploy/observability's PrometheusRule's spec, each
// job="meshpilot" of its expressions made job="<job>", and how many it
// replaced.
func alertsSpec(t *testing.T, job string) (map[string]any, int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), chartObservabilityCopies["meshpilot-alerts.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	var rule map[string]any
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatal(err)
	}
	spec, ok := rule["spec"].(map[string]any)
	if !ok {
		t.Fatalf("deploy/observability's PrometheusRule has no spec")
	}
	n := 0
	for _, r := range alertRules(t, spec) {
		expr, _ := r["expr"].(string)
		n += strings.Count(expr, `job="meshpilot"`)
		r["expr"] = strings.ReplaceAll(expr, `job="meshpilot"`, `job="`+job+`"`)
	}
	return spec, n
}

// alertRules lists the rules of a PrometheusRule's spec, in place, so
// that a change to one changes the spec.
func alertRules(t *testing.T, spec map[string]any) []map[string]any {
	t.Helper()
	var rules []map[string]any
	groups, _ := spec["groups"].([]any)
	for _, g := range groups {
		group, ok := g.(map[string]any)
		if !ok {
			t.Fatalf("a rule group that is not a map: %v", g)
		}
		rs, _ := group["rules"].([]any)
		for _, r := range rs {
			rule, ok := r.(map[string]any)
			if !ok {
				t.Fatalf("group %v: a rule that is not a map: %v", group["name"], r)
			}
			rules = append(rules, rule)
		}
	}
	if len(rules) == 0 {
		t.Fatalf("a PrometheusRule spec without rules: %v", spec)
	}
	return rules
}

// TestChartObservability renders both objects as a release whose Service
// is not deploy/'s (edge-meshpilot), the dashboard in another namespace,
// each with labels of the user's.
func TestChartObservability(t *testing.T) {
	const release, ns = "edge", "edge"
	sets := []string{"--set=prometheusRule.enabled=true", "--set=prometheusRule.labels.release=prometheus",
		"--set=grafanaDashboard.enabled=true", "--set=grafanaDashboard.namespace=monitoring", "--set=grafanaDashboard.labels.team=platform"}
	objs := renderChart(t, release, ns, sets...)
	service := findObject(t, objs, "Service", "edge-meshpilot").GetName()

	t.Run("the PrometheusRule is deploy/observability's, its job the Service's", func(t *testing.T) {
		rule := findObject(t, objs, "PrometheusRule", service)
		if rule.GetNamespace() != ns {
			t.Errorf("the PrometheusRule is in %q, want the release's namespace %q", rule.GetNamespace(), ns)
		}
		if l := rule.GetLabels(); l["release"] != "prometheus" || l["app.kubernetes.io/name"] != "meshpilot" {
			t.Errorf("the PrometheusRule's labels %v lack prometheusRule.labels' or the chart's", l)
		}
		spec, _, _ := unstructured.NestedMap(rule.Object, "spec")
		want, replaced := alertsSpec(t, service)
		if replaced == 0 {
			t.Fatalf(`deploy/observability's alerts no longer select job="meshpilot": what should the chart replace?`)
		}
		for _, d := range diffValues("spec", spec, want) {
			t.Errorf("rendered against deploy/observability's with job %q: %s", service, d)
		}

		// The annotations' templates are Prometheus', evaluated when an
		// alert fires: Helm must leave them as they are.
		templated := 0
		for _, r := range alertRules(t, spec) {
			annotations, _, _ := unstructured.NestedStringMap(r, "annotations")
			for _, v := range annotations {
				if strings.Contains(v, "{{ $labels.") || strings.Contains(v, "{{ $value") {
					templated++
				}
			}
			if r["alert"] == "MeshpilotXDSClientsStale" && annotations["summary"] != "xDS clients of {{ $labels.pod }} do not answer its {{ $labels.type }} responses" {
				t.Errorf("MeshpilotXDSClientsStale's summary: %q", annotations["summary"])
			}
		}
		if templated < len(alertRules(t, spec)) {
			t.Errorf("only %d annotations hold Prometheus' templates, want at least one per alert (%d)", templated, len(alertRules(t, spec)))
		}
	})

	t.Run("its expressions parse, selecting the Service's job", func(t *testing.T) {
		out := mustHelm(t, append([]string{"template", release, chartDir, "-n", ns, "--show-only", "templates/prometheusrule.yaml"}, sets...)...)
		file := filepath.Join(t.TempDir(), "prometheusrule.yaml")
		if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		uses, errs, ok := runPromQLCheck(t, file)
		if !ok {
			t.Fatalf("the checker refused the rendered PrometheusRule:\n%s", errs)
		}
		want, _ := alertsSpec(t, service)
		if len(uses.Expressions) != len(alertRules(t, want)) {
			t.Errorf("the checker read %d expressions, the alerts have %d rules", len(uses.Expressions), len(alertRules(t, want)))
		}
		jobs := 0
		for _, x := range uses.Expressions {
			for _, s := range x.Selectors {
				for _, m := range s.Matchers {
					if m.Label != "job" {
						continue
					}
					jobs++
					if m.Op != "=" || m.Value != service {
						t.Errorf("%s: %s{job%s%q}, want the Service's name %q", x.Where, s.Metric, m.Op, m.Value, service)
					}
				}
			}
		}
		if jobs == 0 {
			t.Errorf("no expression of the rendered rule selects a job")
		}
	})

	t.Run("the ConfigMap holds the dashboard for Grafana's sidecar", func(t *testing.T) {
		cm := findObject(t, objs, "ConfigMap", service+"-dashboard")
		if cm.GetNamespace() != "monitoring" {
			t.Errorf("the dashboard's ConfigMap is in %q, want grafanaDashboard.namespace monitoring", cm.GetNamespace())
		}
		if l := cm.GetLabels(); l["grafana_dashboard"] != "1" || l["team"] != "platform" || l["app.kubernetes.io/name"] != "meshpilot" {
			t.Errorf("the dashboard's ConfigMap's labels %v: want the sidecar's grafana_dashboard=1 beside grafanaDashboard.labels' and the chart's", l)
		}
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		want, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), chartObservabilityCopies["meshpilot-dashboard.json"]))
		if err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		if len(data) != 1 || data["meshpilot-dashboard.json"] != string(want) {
			t.Errorf("the ConfigMap's data: keys %v, meshpilot-dashboard.json the dashboard's bytes: %v", keys, data["meshpilot-dashboard.json"] == string(want))
		}
	})

	t.Run("as the README installs it, the job stays meshpilot", func(t *testing.T) {
		rule := findObject(t, renderChart(t, readmeRelease, readmeReleaseNS, "--set=prometheusRule.enabled=true"), "PrometheusRule", "meshpilot")
		spec, _, _ := unstructured.NestedMap(rule.Object, "spec")
		want, _ := alertsSpec(t, "meshpilot")
		for _, d := range diffValues("spec", spec, want) {
			t.Errorf("release meshpilot against deploy/observability's: %s", d)
		}
		for _, r := range alertRules(t, spec) {
			for _, m := range jobMatcher.FindAllStringSubmatch(r["expr"].(string), -1) {
				if m[1] != "meshpilot" {
					t.Errorf("alert %v selects job %q, want meshpilot", r["alert"], m[1])
				}
			}
		}
	})

	t.Run("the schema refuses bad values", func(t *testing.T) {
		for _, c := range []struct{ set, key string }{
			{"--set=prometheusRule.label.release=prometheus", "label"}, // a typo of labels
			{"--set-string=prometheusRule.enabled=yes", "enabled"},
			{"--set=grafanaDashboard.namespace=Monitoring", "namespace"},
			{"--set=grafanaDashboard.labels.grafana_dashboard=1", "grafana_dashboard"}, // a number, not a label value
		} {
			out, err := helm(t, "template", release, chartDir, "-n", ns, c.set)
			if err == nil {
				t.Errorf("helm template %s rendered; the schema should refuse it", c.set)
				continue
			}
			if !strings.Contains(out, "schema") || !strings.Contains(out, c.key) {
				t.Errorf("helm template %s failed without naming the schema and %s:\n%s", c.set, c.key, out)
			}
		}
	})
}
