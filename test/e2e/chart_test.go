package e2e

// The Helm chart, charts/meshpilot, with the helm operators run (built
// from helm.sh/helm/v4 by tools/helm): it lints, refuses bad values by its
// schema, documents every value, renders exactly deploy/'s objects by
// default and deploy-secure/'s with xdsTLS.enabled, maps its values to
// meshpilot's flags, and each value set it ships applies to a real API
// server and runs: meshpilot, with the rendered Deployment's args and a
// token of the rendered ServiceAccount, syncs and serves with no
// forbidden error. The README's helm commands run in readmeFlows
// (runChartReadme).

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testpki"
	"github.com/meshpilot/meshpilot/internal/testutil"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

const chartDir = "charts/meshpilot"

// The value sets the chart ships for its tests (chart-testing's ci/
// folder convention), beside the defaults.
var chartValueSets = []string{"ci/secure-values.yaml", "ci/custom-values.yaml"}

// helmLabels are the labels the chart adds to deploy/'s on every object,
// Helm's usual ones; the equivalence with deploy/ leaves them out.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"}

// helm runs tools/helm's helm from the repository's root against the test
// API server, with Helm's folders of the test's own (no repositories,
// plugins or registry logins of this machine), and returns its output and
// whether it exited 0.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := testenv.Helm()
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, bin, args...)
	cmd.Dir = testutil.RepoRoot(t)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustHelm is helm where a failing exit fails the test.
func mustHelm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// renderChart renders the chart as release in namespace ns with extra
// helm template arguments (-f, --set) and decodes every object.
func renderChart(t *testing.T, release, ns string, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	out := mustHelm(t, append([]string{"template", release, chartDir, "-n", ns}, extra...)...)
	objs := decodeObjects(t, "helm template "+strings.Join(extra, " "), []byte(out))
	if len(objs) == 0 {
		t.Fatalf("helm template %v rendered nothing", extra)
	}
	return objs
}

// decodeObjects decodes a stream of YAML documents; empty ones are
// skipped.
func decodeObjects(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("%s: %v", what, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, &u)
		}
	}
	return objs
}

func objectKey(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}

func findObject(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	t.Fatalf("no %s %s among the rendered objects", kind, name)
	return nil
}

// renderedDeployment converts the rendered Deployment of name.
func renderedDeployment(t *testing.T, objs []*unstructured.Unstructured, name string) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(findObject(t, objs, "Deployment", name).Object, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("the rendered Deployment has %d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	return &d
}

// TestChartLint runs helm lint --strict on the chart with its defaults
// and with each value set it ships.
func TestChartLint(t *testing.T) {
	for _, values := range append([]string{""}, chartValueSets...) {
		args := []string{"lint", "--strict", chartDir}
		if values != "" {
			args = append(args, "-f", filepath.Join(chartDir, values))
		}
		out := mustHelm(t, args...)
		if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") || strings.Contains(out, "[WARNING]") {
			t.Errorf("helm %s:\n%s", strings.Join(args, " "), out)
		}
	}
}

// TestChartRefusesBadValues: values.schema.json refuses a typo, a wrong
// type and a value out of range before anything renders, naming the key.
func TestChartRefusesBadValues(t *testing.T) {
	for _, c := range []struct{ set, key string }{
		{"--set=replica=3", "replica"}, // a typo of replicas
		{"--set=image.pullpolicy=Always", "pullpolicy"},
		{"--set-string=replicas=two", "replicas"},
		{"--set=maxClients=-1", "maxClients"},
		{"--set=memoryLimitRatio=1.5", "memoryLimitRatio"},
		{"--set=logFormat=yaml", "logFormat"},
		{"--set=image.pullPolicy=Sometimes", "pullPolicy"},
		{"--set=balance.interval=5", "interval"},
		{"--set=balance.shedRate=0", "shedRate"},
		{"--set=drainDuration=30 seconds", "drainDuration"},
		{"--set=systemNamespace=Istio_System", "systemNamespace"},
		{"--set=extraArgs[0]=balance", "extraArgs"},
		{"--set=podDisruptionBudget.maxUnavailable=0", "maxUnavailable"},
	} {
		out, err := helm(t, "template", "meshpilot", chartDir, "-n", "meshpilot-system", c.set)
		if err == nil {
			t.Errorf("helm template %s rendered; the schema should refuse it", c.set)
			continue
		}
		if !strings.Contains(out, "schema") || !strings.Contains(out, c.key) {
			t.Errorf("helm template %s failed without naming the schema and %s:\n%s", c.set, c.key, out)
		}
	}
}

// TestChartValuesDocumented: every key of values.yaml that the chart
// defines (down to the free-form maps, such as podAnnotations) has a
// comment above it and a schema, and the schema names no key values.yaml
// lacks.
func TestChartValuesDocumented(t *testing.T) {
	root := testutil.RepoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) != 1 {
		t.Fatalf("values.yaml: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(root, chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	keys := checkDocumented(t, "", doc.Content[0], schema)
	if keys < 30 {
		t.Errorf("only %d documented keys checked: the walk missed values.yaml's structure", keys)
	}
}

// checkDocumented walks a mapping of values.yaml with its schema and
// returns how many keys it checked.
func checkDocumented(t *testing.T, path string, m *yaml.Node, schema map[string]any) int {
	t.Helper()
	where := path
	if where == "" {
		where = "(the top level)"
	}
	props, _ := schema["properties"].(map[string]any)
	if m.Kind != yaml.MappingNode {
		t.Errorf("values.yaml %s: not a map, the schema says an object", where)
		return 0
	}
	if schema["additionalProperties"] != false {
		t.Errorf("values.schema.json %s: an object of the chart's own keys should refuse others (additionalProperties: false)", where)
	}
	seen := map[string]bool{}
	n := 0
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := strings.TrimPrefix(path+"."+k.Value, ".")
		seen[k.Value] = true
		n++
		if strings.TrimSpace(k.HeadComment) == "" {
			t.Errorf("values.yaml: %s has no comment above it", key)
		}
		sub, ok := props[k.Value].(map[string]any)
		if !ok {
			t.Errorf("values.schema.json: no schema for %s", key)
			continue
		}
		if _, ok := sub["properties"]; ok {
			n += checkDocumented(t, key, v, sub)
		}
	}
	for k := range props {
		if !seen[k] {
			t.Errorf("values.schema.json names %s, which values.yaml lacks", strings.TrimPrefix(path+"."+k, "."))
		}
	}
	return n
}

// chartLabelsOff removes the labels the chart adds to deploy/'s (Helm's
// usual ones) from an object and its Pod template, failing the test when
// the object lacks one: every object carries them.
func chartLabelsOff(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	labels := u.GetLabels()
	for _, l := range helmLabels {
		if _, ok := labels[l]; !ok {
			t.Errorf("%s lacks the label %s", objectKey(u), l)
		}
		delete(labels, l)
	}
	u.SetLabels(labels)
	if tl, ok, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels"); ok {
		if _, ok := tl["app.kubernetes.io/instance"]; !ok {
			t.Errorf("%s: its Pods lack the label app.kubernetes.io/instance", objectKey(u))
		}
		delete(tl, "app.kubernetes.io/instance")
		if err := unstructured.SetNestedStringMap(u.Object, tl, "spec", "template", "metadata", "labels"); err != nil {
			t.Fatal(err)
		}
	}
}

// sameObjects compares what the chart rendered with the manifests, object
// by object and field by field, leaving out the Namespace, which the
// chart leaves to helm install --create-namespace.
func sameObjects(t *testing.T, what string, chart, manifests []*unstructured.Unstructured) {
	t.Helper()
	want := map[string]*unstructured.Unstructured{}
	for _, u := range manifests {
		if u.GetKind() != "Namespace" {
			want[objectKey(u)] = u
		}
	}
	got := map[string]*unstructured.Unstructured{}
	for _, u := range chart {
		if u.GetKind() == "Namespace" {
			t.Errorf("the chart renders Namespace %s: helm install --create-namespace makes it", u.GetName())
		}
		chartLabelsOff(t, u)
		got[objectKey(u)] = u
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: the chart does not render %s", what, k)
			continue
		}
		for _, d := range diffValues(k, g.Object, w.Object) {
			t.Errorf("%s: %s", what, d)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: the chart renders %s, which the manifests lack", what, k)
		}
	}
}

// diffValues lists where two decoded documents differ, by path.
func diffValues(path string, got, want any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: chart %v, manifests %v", path, got, want)}
		}
		var d []string
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			d = append(d, diffValues(path+"."+k, g[k], w[k])...)
		}
		return d
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: chart %v, manifests %v", path, got, want)}
		}
		var d []string
		for i := range w {
			d = append(d, diffValues(fmt.Sprintf("%s[%d]", path, i), g[i], w[i])...)
		}
		return d
	default:
		if !reflect.DeepEqual(got, want) {
			return []string{fmt.Sprintf("%s: chart %v, manifests %v", path, got, want)}
		}
		return nil
	}
}

// TestChartMatchesDeploy: installed as the README says (release
// meshpilot in meshpilot-system), the chart's defaults render exactly
// deploy/'s objects but its Namespace, and xdsTLS.enabled exactly
// deploy-secure/'s, Helm's labels aside.
func TestChartMatchesDeploy(t *testing.T) {
	sameObjects(t, "the defaults against deploy/", renderChart(t, "meshpilot", "meshpilot-system"), readManifests(t))
	secure := decodeObjects(t, "kubectl kustomize deploy-secure/", []byte(kubectl(t, "kubectl kustomize deploy-secure/")))
	sameObjects(t, "xdsTLS.enabled against deploy-secure/", renderChart(t, "meshpilot", "meshpilot-system", "--set=xdsTLS.enabled=true"), secure)
}

// TestChartValuesMapToArgs: each value reaches the flag, field or object
// it documents.
func TestChartValuesMapToArgs(t *testing.T) {
	t.Run("custom", func(t *testing.T) {
		objs := renderChart(t, "edge", "edge", "-f", filepath.Join(chartDir, "ci/custom-values.yaml"))
		d := renderedDeployment(t, objs, "edge-meshpilot")
		c := d.Spec.Template.Spec.Containers[0]
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
			t.Errorf("replicas: %v, want 3", d.Spec.Replicas)
		}
		for _, a := range []string{"--max-clients=12000", "--memory-limit-ratio=0.75", "--system-namespace=istio-config", "--audit-interval=10m"} {
			if !slices.Contains(c.Args, a) {
				t.Errorf("the container's args lack %s: %q", a, c.Args)
			}
		}
		if slices.ContainsFunc(c.Args, func(a string) bool {
			return strings.HasPrefix(a, "--balance") || strings.HasPrefix(a, "--xds-cert") || strings.HasPrefix(a, "--xds-client-ca")
		}) {
			t.Errorf("balance and xDS TLS are off, yet the args hold their flags: %q", c.Args)
		}
		if got := c.Resources.Limits.Memory().String(); got != "1Gi" {
			t.Errorf("memory limit %s, want 1Gi", got)
		}
		if got := c.Resources.Requests.Cpu().String(); got != "250m" {
			t.Errorf("CPU request %s, want 250m", got)
		}
		if d.Spec.Template.Labels["team"] != "platform" {
			t.Errorf("the Pods' labels lack podLabels: %v", d.Spec.Template.Labels)
		}
		for _, name := range []string{"edge-meshpilot-mesh-config", "edge-meshpilot-remote-secrets", "edge-meshpilot-replicas"} {
			for _, kind := range []string{"Role", "RoleBinding"} {
				if ns := findObject(t, objs, kind, name).GetNamespace(); ns != "istio-config" {
					t.Errorf("%s %s in %s, want the system namespace istio-config", kind, name, ns)
				}
			}
			subjects, _, _ := unstructured.NestedSlice(findObject(t, objs, "RoleBinding", name).Object, "subjects")
			if len(subjects) != 1 || subjects[0].(map[string]any)["namespace"] != "edge" || subjects[0].(map[string]any)["name"] != "edge-meshpilot" {
				t.Errorf("RoleBinding %s binds %v, want the ServiceAccount edge/edge-meshpilot", name, subjects)
			}
		}
		cm := findObject(t, objs, "ConfigMap", "istio")
		mesh, _, _ := unstructured.NestedString(cm.Object, "data", "mesh")
		if cm.GetNamespace() != "istio-config" || !strings.Contains(mesh, "trustDomain: example.org") {
			t.Errorf("ConfigMap %s/istio holds mesh %q, want the values' meshConfig in istio-config", cm.GetNamespace(), mesh)
		}
		vap := findObject(t, objs, "ValidatingAdmissionPolicy", "edge-meshpilot-replica-leases")
		conds, _, _ := unstructured.NestedSlice(vap.Object, "spec", "matchConditions")
		if len(conds) != 1 || !strings.Contains(conds[0].(map[string]any)["expression"].(string), `"system:serviceaccount:edge:edge-meshpilot"`) {
			t.Errorf("the Lease policy matches %v, want the ServiceAccount edge/edge-meshpilot", conds)
		}
		binding := findObject(t, objs, "ValidatingAdmissionPolicyBinding", "edge-meshpilot-replica-leases")
		if ns, _, _ := unstructured.NestedString(binding.Object, "spec", "matchResources", "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name"); ns != "istio-config" {
			t.Errorf("the Lease policy applies in %q, want istio-config, where the Leases are", ns)
		}
		if n, _, _ := unstructured.NestedFieldNoCopy(findObject(t, objs, "PodDisruptionBudget", "edge-meshpilot").Object, "spec", "maxUnavailable"); fmt.Sprint(n) != "2" {
			t.Errorf("PodDisruptionBudget maxUnavailable %v, want 2", n)
		}
		if countKind(objs, "NetworkPolicy") != 0 || countKind(objs, "ServiceMonitor") != 0 {
			t.Error("networkPolicy.enabled false and serviceMonitor off, yet rendered")
		}
	})
	t.Run("secure", func(t *testing.T) {
		objs := renderChart(t, "meshpilot", "meshpilot-system", "-f", filepath.Join(chartDir, "ci/secure-values.yaml"))
		d := renderedDeployment(t, objs, "meshpilot")
		c := d.Spec.Template.Spec.Containers[0]
		for _, a := range []string{"--balance", "--balance-interval=5s", "--balance-tolerance=0.1", "--shed-rate=4", "--shed-min-age=30s",
			"--xds-cert=/etc/meshpilot/xds/tls.crt", "--xds-key=/etc/meshpilot/xds/tls.key", "--xds-client-ca=/etc/meshpilot/xds/ca.crt"} {
			if !slices.Contains(c.Args, a) {
				t.Errorf("the container's args lack %s: %q", a, c.Args)
			}
		}
		vols := d.Spec.Template.Spec.Volumes
		if len(vols) != 1 || vols[0].Secret == nil || vols[0].Secret.SecretName != "meshpilot-xds-tls" {
			t.Errorf("volumes %+v, want Secret meshpilot-xds-tls", vols)
		}
		sm := findObject(t, objs, "ServiceMonitor", "meshpilot")
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if sm.GetLabels()["release"] != "prometheus" || len(eps) != 1 || eps[0].(map[string]any)["interval"] != "15s" || eps[0].(map[string]any)["port"] != "http-monitoring" {
			t.Errorf("ServiceMonitor labels %v, endpoints %v: want label release=prometheus, port http-monitoring every 15s", sm.GetLabels(), eps)
		}
	})
	t.Run("numbers stay integers, 0 clients means no cap", func(t *testing.T) {
		big := renderedDeployment(t, renderChart(t, "meshpilot", "meshpilot-system", "--set=maxClients=1000000"), "meshpilot")
		if !slices.Contains(big.Spec.Template.Spec.Containers[0].Args, "--max-clients=1000000") {
			t.Errorf("maxClients 1000000: args %q", big.Spec.Template.Spec.Containers[0].Args)
		}
		none := renderedDeployment(t, renderChart(t, "meshpilot", "meshpilot-system", "--set=maxClients=0"), "meshpilot")
		if slices.ContainsFunc(none.Spec.Template.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--max-clients") }) {
			t.Errorf("maxClients 0 should leave the flag out (no cap): %q", none.Spec.Template.Spec.Containers[0].Args)
		}
	})
}

// chartRun is one value set applied to the API server and run.
type chartRun struct {
	name, release, ns string
	args              []string // helm template's, for the value set
	deployment        string   // the rendered Deployment's name
	system            string   // where the Leases go: --system-namespace
}

// TestChartDeploys applies what the chart renders for its defaults and
// each value set it ships to an API server of the test's own (server-side
// apply: every object validated and stored), each as a release of its own
// namespace, and runs meshpilot with each rendered Deployment's container
// args (listening addresses moved to loopback, Secret volumes written
// where the args read them) and a token of the rendered ServiceAccount,
// with --balance: it syncs and serves a client, publishes its replica
// Lease where its Role allows, and meets no forbidden error.
func TestChartDeploys(t *testing.T) {
	useOwnAPIServer(t)
	// The ServiceMonitor's and PrometheusRule's CRDs, for the value set
	// that renders them: the API server checks them against the
	// operator's schemas.
	ruleCRD, err := testenv.PrometheusRuleCRD()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.InstallCRDs(prometheusOperatorCRD(t, "monitoring.coreos.com_servicemonitors.yaml"), ruleCRD); err != nil {
		t.Fatal(err)
	}
	runs := []chartRun{
		{name: "defaults", release: "meshpilot", ns: "meshpilot-system", deployment: "meshpilot", system: "meshpilot-system"},
		{name: "custom", release: "edge", ns: "edge", args: []string{"-f", filepath.Join(chartDir, "ci/custom-values.yaml")}, deployment: "edge-meshpilot", system: "istio-config"},
		{name: "secure", release: "meshpilot-secure", ns: "meshpilot-secure", args: []string{"-f", filepath.Join(chartDir, "ci/secure-values.yaml")}, deployment: "meshpilot-secure", system: "meshpilot-secure"},
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			// Helm makes the release's namespace (--create-namespace);
			// another system namespace is the operator's.
			ensureNamespace(t, r.ns)
			ensureNamespace(t, r.system)
			objs := renderChart(t, r.release, r.ns, r.args...)
			applyObjects(t, objs)
			awaitStored(t, objs)
			d := renderedDeployment(t, objs, r.deployment)
			switch r.name {
			case "defaults":
				runChartDefaults(t, d)
			case "custom":
				runChartCustom(t, d, r.system)
			case "secure":
				runChartSecure(t, d)
			}
		})
	}
}

// applyObjects applies objects with server-side apply, as Helm 4 does.
func applyObjects(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	eachObject(t, objs, func(r dynamic.ResourceInterface, u *unstructured.Unstructured) {
		if _, err := r.Apply(ctx(t), u.GetName(), u, metav1.ApplyOptions{FieldManager: "chart-test", Force: true}); err != nil {
			t.Errorf("applying %s: %v", objectKey(u), err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
}

// startRendered runs meshpilot as the rendered Deployment's container
// would run, with --balance, and waits until it is ready; it returns its
// output and the loopback addresses of its ports.
func startRendered(t *testing.T, d *appsv1.Deployment, extra ...string) (*testutil.Buffer, map[string]string, string) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	args, addrs := localArgs(t, c)
	args = writeSecretVolumes(t, d.Namespace, d.Spec.Template.Spec, c, args)
	sa := d.Spec.Template.Spec.ServiceAccountName
	kubeconfig := serviceAccountKubeconfig(t, d.Namespace, sa)
	args = append(args, "--kubeconfig", kubeconfig)
	if !slices.Contains(args, "--balance") {
		args = append(args, "--balance")
	}
	args = append(args, extra...)
	out := startProcess(t, testutil.BuildMeshpilot(t), args...)
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || addrs[p.HTTPGet.Port.StrVal] == "" {
			t.Fatalf("probe %+v: want an HTTP probe on a named port meshpilot listens on", p)
		}
		testutil.AwaitHTTP(t, "http://"+addrs[p.HTTPGet.Port.StrVal]+p.HTTPGet.Path, http.StatusOK)
	}
	return out, addrs, kubeconfig
}

// writeSecretVolumes writes, for each Secret volume the container mounts,
// the Secret's keys (of namespace ns) to a folder of the test, as the
// kubelet would, and points args at it instead of the mount path.
func writeSecretVolumes(t *testing.T, ns string, spec corev1.PodSpec, c corev1.Container, args []string) []string {
	t.Helper()
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || spec.Volumes[i].Secret == nil {
			t.Fatalf("volume mount %s: no Secret volume of that name", m.Name)
		}
		s, err := env.Client.CoreV1().Secrets(ns).Get(ctx(t), spec.Volumes[i].Secret.SecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		local := t.TempDir()
		for k, v := range s.Data {
			if err := os.WriteFile(filepath.Join(local, k), v, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for j, a := range args {
			args[j] = strings.ReplaceAll(a, m.MountPath, local)
		}
	}
	return args
}

func noForbidden(t *testing.T, out *testutil.Buffer) {
	t.Helper()
	if strings.Contains(strings.ToLower(out.String()), "forbidden") {
		t.Fatalf("meshpilot met a forbidden error with the chart's RBAC:\n%s", out.String())
	}
}

// runChartDefaults runs the defaults as TestDeployManifests runs deploy/:
// the routes' status writer and the Istio kinds with the ServiceAccount's
// rights, Istio's CRDs installed while meshpilot runs.
func runChartDefaults(t *testing.T, d *appsv1.Deployment) {
	sa := d.Spec.Template.Spec.ServiceAccountName
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.28")
	createService(t, ns, "chart", 7070)
	writeSlice(t, ns, "chart", bs)
	checkGatewayStatusAccess(t, serviceAccountKubeconfig(t, d.Namespace, sa), d.Namespace, sa)
	out, addrs, _ := startRendered(t, d)
	cc := grpctest.Channel(t, addrs["grpc-xds"], "xds:///chart:7070", grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, bs...)
	checkServiceAccountIstioAccess(t, d.Namespace, sa)
	awaitReplicaLease(t, d.Namespace)
	checkIstioLateInstall(t, out)
	noForbidden(t, out)
}

// runChartCustom runs the custom set, whose system namespace is not the
// release's: the mesh config comes from the chart's ConfigMap there (its
// discovery selectors decide which namespaces are served), and the
// replica's Lease is written there under the Roles the chart put there.
func runChartCustom(t *testing.T, d *appsv1.Deployment, system string) {
	ns := env.Namespace(t, map[string]string{"mesh": "on"})
	bs := grpctest.StartBackends(t, "127.0.0.29")
	createService(t, ns, "custom", 7070)
	writeSlice(t, ns, "custom", bs)
	out, addrs, _ := startRendered(t, d)
	cc := grpctest.Channel(t, addrs["grpc-xds"], "xds:///custom:7070", grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, bs...)
	var configz struct {
		MeshConfig struct {
			Source string `json:"source"`
			Mesh   struct {
				TrustDomain string `json:"trustDomain"`
			} `json:"mesh"`
		} `json:"meshConfig"`
	}
	getJSON(t, "http://"+addrs["debug"]+"/debug/configz", &configz)
	if configz.MeshConfig.Source != "configmap "+system+"/istio" || configz.MeshConfig.Mesh.TrustDomain != "example.org" {
		t.Errorf("mesh config in force: %+v, want the chart's ConfigMap %s/istio with trustDomain example.org", configz.MeshConfig, system)
	}
	awaitReplicaLease(t, system)
	noForbidden(t, out)
}

// runChartSecure runs the secured set with the Secret its Deployment
// mounts: a client with its namespace's certificate is served.
func runChartSecure(t *testing.T, d *appsv1.Deployment) {
	ca := testpki.New(t)
	server := ca.IssuePEM(t, testpki.Leaf{Name: "meshpilot", IPs: []string{"127.0.0.1"}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "meshpilot-xds-tls", Namespace: d.Namespace},
		Data: map[string][]byte{"tls.crt": server.CertPEM, "tls.key": server.KeyPEM, "ca.crt": ca.PEM()}}
	if _, err := env.Client.CoreV1().Secrets(d.Namespace).Create(ctx(t), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t, nil)
	createService(t, ns, "secure", 7070)
	writeSlice(t, ns, "secure", grpctest.StartBackends(t, "127.0.0.30"))
	out, addrs, _ := startRendered(t, d)
	cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", Certificates: []tls.Certificate{
		ca.IssuePEM(t, testpki.Leaf{Name: "client", URIs: []string{"spiffe://cluster.local/ns/" + ns + "/sa/default"},
			Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}).KeyPair(t)}}
	cc, err := grpc.NewClient(addrs["grpc-xds"], grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	listener := "secure." + ns + ".svc.cluster.local:7070"
	x := xdstest.Connect(t, cc, xdstest.Options{AutoACK: true, Wait: testutil.Wait,
		Node: xdstest.GRPCNode(xdstest.NodeOptions{ID: xdstest.SidecarID("10.0.0.9", "client", ns), Namespace: ns})})
	x.Subscribe(resourcev3.ListenerType, listener)
	x.WaitFor(resourcev3.ListenerType, listener)
	awaitReplicaLease(t, d.Namespace)
	noForbidden(t, out)
}

// prometheusOperator is the module holding the Prometheus Operator's
// CRDs, at the version the Go module proxy serves; it is downloaded into
// the module cache, not required by go.mod.
const prometheusOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

// prometheusOperatorCRD returns the path of one of the Prometheus
// Operator's CRD files in the module cache.
func prometheusOperatorCRD(t *testing.T, file string) string {
	t.Helper()
	cmd := exec.CommandContext(testutil.Context(t), "go", "mod", "download", "-json", prometheusOperator)
	// Outside any module, so that the download changes no go.mod.
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s", prometheusOperator, err, out)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %v %s\n%s", prometheusOperator, err, mod.Error, out)
	}
	return filepath.Join(mod.Dir, "example", "prometheus-operator-crd", file)
}

// The README's helm commands (## Deploying), run by readmeFlows.
const (
	readmeReleaseNS = "meshpilot-system"
	readmeRelease   = "meshpilot"
)

// runChartReadme runs the README's install, upgrade and uninstall
// commands as written against an API server of the test's own, helm
// finding it in ~/.kube/config: the install creates the namespace and
// every object the chart renders, the upgrade turns balancing on with
// three replicas on the running release, and the uninstall removes every
// object and the release.
func runChartReadme(t *testing.T, cmds []testutil.ReadmeCommand) {
	install, upgrade, uninstall := cmds[0], cmds[1], cmds[2]
	useOwnAPIServer(t)
	bin, err := testenv.Helm()
	if err != nil {
		t.Fatal(err)
	}
	vars := append(kubeHome(t), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	root := testutil.RepoRoot(t)
	objs := renderChart(t, readmeRelease, readmeReleaseNS)

	t.Logf("%s", runReadme(t, install, root, time.Minute, vars...))
	awaitStored(t, objs)
	awaitRelease(t, 1, "deployed")
	before := getDeployment(t)
	if slices.Contains(before.Spec.Template.Spec.Containers[0].Args, "--balance") || *before.Spec.Replicas != 2 {
		t.Fatalf("after %s: replicas %d, args %q; want the defaults", install.Line, *before.Spec.Replicas, before.Spec.Template.Spec.Containers[0].Args)
	}

	t.Logf("%s", runReadme(t, upgrade, root, time.Minute, vars...))
	awaitRelease(t, 2, "deployed")
	after := getDeployment(t)
	if !slices.Contains(after.Spec.Template.Spec.Containers[0].Args, "--balance") || *after.Spec.Replicas != 3 {
		t.Errorf("after %s: replicas %d, args %q; want 3 and --balance", upgrade.Line, *after.Spec.Replicas, after.Spec.Template.Spec.Containers[0].Args)
	}
	if !slices.Contains(after.Spec.Template.Spec.Containers[0].Args, "--max-clients=5000") {
		t.Errorf("after %s the other values changed: args %q", upgrade.Line, after.Spec.Template.Spec.Containers[0].Args)
	}

	t.Logf("%s", runReadme(t, uninstall, root, time.Minute, vars...))
	eachObject(t, objs, func(r dynamic.ResourceInterface, u *unstructured.Unstructured) {
		if _, err := r.Get(ctx(t), u.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after %s: %s is still there (%v)", uninstall.Line, objectKey(u), err)
		}
	})
	if releases := helmReleaseSecrets(t); len(releases) != 0 {
		t.Errorf("after %s the release's records remain: %v", uninstall.Line, releases)
	}
}

func getDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	d, err := env.Client.AppsV1().Deployments(readmeReleaseNS).Get(ctx(t), readmeRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// helmReleaseSecrets lists the Secrets in which Helm records the README's
// release (its storage driver's default), by name and status.
func helmReleaseSecrets(t *testing.T) map[string]string {
	t.Helper()
	list, err := env.Client.CoreV1().Secrets(readmeReleaseNS).List(ctx(t), metav1.ListOptions{LabelSelector: "owner=helm,name=" + readmeRelease})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range list.Items {
		got[s.Name] = s.Labels["status"]
	}
	return got
}

// awaitRelease checks that Helm recorded the README's release at version
// with status.
func awaitRelease(t *testing.T, version int, status string) {
	t.Helper()
	name := fmt.Sprintf("sh.helm.release.v1.%s.v%d", readmeRelease, version)
	if got := helmReleaseSecrets(t); got[name] != status {
		t.Fatalf("Helm's records of release %s: %v, want %s %s", readmeRelease, got, name, status)
	}
}
