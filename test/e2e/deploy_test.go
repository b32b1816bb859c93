package e2e

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// readManifests decodes every document of deploy/*.yaml.
func readManifests(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "deploy", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) > 0 {
				objs = append(objs, &u)
			}
		}
		r.Close()
	}
	return objs
}

// apply applies objects server-side; dryRun asks the API server to
// validate and admit them without storing them.
func apply(t *testing.T, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Client.Discovery()))
	opts := metav1.ApplyOptions{FieldManager: "meshpilot-e2e", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, u.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if u.GetNamespace() != "" {
			ri = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		if _, err := ri.Apply(ctx(t), u.GetName(), u, opts); err != nil {
			t.Fatalf("applying %s %s (dry run %v): %v", gvk.Kind, u.GetName(), dryRun, err)
		}
	}
}

func kinds(objs []*unstructured.Unstructured, want ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if slices.Contains(want, u.GetKind()) {
			out = append(out, u)
		}
	}
	return out
}

// TestDeployManifests applies deploy/ to the real API server and runs
// meshpilot with a token of its ServiceAccount: it must sync and serve
// without a single forbidden error, and the role must ask for no more
// than list and watch.
func TestDeployManifests(t *testing.T) {
	objs := readManifests(t)
	apply(t, kinds(objs, "Namespace"), false)
	apply(t, objs, true)
	apply(t, kinds(objs, "ServiceAccount", "ClusterRole", "ClusterRoleBinding"), false)
	for _, want := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service"} {
		if len(kinds(objs, want)) != 1 {
			t.Errorf("deploy/ has %d %s objects, want 1", len(kinds(objs, want)), want)
		}
	}

	// No more than read access.
	var role rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(kinds(objs, "ClusterRole")[0].Object, &role); err != nil {
		t.Fatal(err)
	}
	for _, r := range role.Rules {
		for _, v := range r.Verbs {
			if v != "list" && v != "watch" {
				t.Errorf("ClusterRole grants %q on %v", v, r.Resources)
			}
		}
		if slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
			t.Errorf("ClusterRole rule uses a wildcard: %+v", r)
		}
	}

	// meshpilot with the ServiceAccount's token.
	sa := kinds(objs, "ServiceAccount")[0]
	tok, err := env.Client.CoreV1().ServiceAccounts(sa.GetNamespace()).CreateToken(ctx(t), sa.GetName(),
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", sa.GetNamespace(), sa.GetName(), err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos["meshpilot"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "meshpilot"}
	kc.CurrentContext = "test"
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kcPath); err != nil {
		t.Fatal(err)
	}

	ns := env.Namespace(t, map[string]string{"mesh": "on"})
	bs := grpctest.StartBackends(t, "127.0.0.25")
	createService(t, ns, "rbac", 7070)
	writeSlice(t, ns, "rbac", bs)

	bin := testutil.BuildMeshpilot(t)
	xdsAddr, httpAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	out := startProcess(t, bin, "serve", "--kubeconfig", kcPath, "--discovery-selectors", "mesh=on",
		"--xds-addr", xdsAddr, "--http-addr", httpAddr)
	testutil.AwaitHTTP(t, "http://"+httpAddr+"/readyz", http.StatusOK)
	cc := grpctest.Channel(t, xdsAddr, "xds:///rbac:7070", grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, bs...)
	if strings.Contains(strings.ToLower(out.String()), "forbidden") {
		t.Fatalf("meshpilot met a forbidden error with the deploy/ RBAC:\n%s", out.String())
	}
}
