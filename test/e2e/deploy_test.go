package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/replicas"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// isDeployCommand selects the README's commands that TestDeployManifests
// runs as written.
func isDeployCommand(c testutil.ReadmeCommand) bool {
	return c.Section == "## Deploying" && strings.HasPrefix(c.Line, "kubectl ")
}

// kubectl runs the kubectl built from Kubernetes' source (tools/kubectl)
// from the repository's root against the test API server, as a user would
// type command, and returns its output; a failing exit fails the test.
func kubectl(t *testing.T, command string) string {
	t.Helper()
	bin, err := testenv.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(command, `'"$|&;<>*\`+"`") {
		t.Fatalf("%q needs a shell; run only plain commands", command)
	}
	args := strings.Fields(command)
	if args[0] != "kubectl" {
		t.Fatalf("%q is not a kubectl command", command)
	}
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, bin, args[1:]...)
	cmd.Dir = testutil.RepoRoot(t)
	// The test API server, a discovery cache of the test's own and no
	// user preferences (kuberc) from this machine.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig, "KUBECACHEDIR="+t.TempDir(), "KUBERC=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
	return string(out)
}

// readManifests decodes every document of deploy/'s manifest files.
func readManifests(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var files []string
	for _, ext := range []string{"*.yaml", "*.yml", "*.json"} {
		m, err := filepath.Glob(filepath.Join(testutil.RepoRoot(t), "deploy", ext))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/")
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

// awaitStored checks that the API server holds every object.
func awaitStored(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	eachObject(t, objs, func(r dynamic.ResourceInterface, u *unstructured.Unstructured) {
		if _, err := r.Get(ctx(t), u.GetName(), metav1.GetOptions{}); err != nil {
			t.Errorf("after the README's command: %s: %v", objectKey(u), err)
		}
	})
}

// eachObject calls f with each object and the API server's resource for
// it (in its namespace), found by discovery as kubectl finds it.
func eachObject(t *testing.T, objs []*unstructured.Unstructured, f func(dynamic.ResourceInterface, *unstructured.Unstructured)) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Client.Discovery()))
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", objectKey(u), err)
		}
		f(dyn.Resource(m.Resource).Namespace(u.GetNamespace()), u)
	}
}

func countKind(objs []*unstructured.Unstructured, kind string) int {
	n := 0
	for _, u := range objs {
		if u.GetKind() == kind {
			n++
		}
	}
	return n
}

// TestDeployManifests runs the README's deploy command, as written, with
// kubectl against the empty test API server: every object of deploy/ must
// be created in that one pass. kubectl apply -k deploy/ must render and
// apply the same objects. Then meshpilot runs with the Deployment's own
// container args and a token of the Deployment's ServiceAccount: it must
// answer the Deployment's probes, sync and serve without a single
// forbidden error, and start watching Istio's traffic rules when their
// CRDs are installed while it runs.
func TestDeployManifests(t *testing.T) {
	useOwnAPIServer(t)
	objs := readManifests(t)
	for _, want := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service"} {
		if n := countKind(objs, want); n != 1 {
			t.Errorf("deploy/ has %d %s objects, want 1", n, want)
		}
	}
	ran := 0
	for _, c := range testutil.ReadmeCommands(t) {
		if isDeployCommand(c) {
			t.Logf("$ %s\n%s", c.Line, kubectl(t, c.Line))
			ran++
		}
	}
	if ran == 0 {
		t.Fatal("README.md shows no kubectl command under ## Deploying")
	}
	awaitStored(t, objs)

	t.Run("kustomize renders the same objects, the Namespace first", func(t *testing.T) {
		rendered := kubectl(t, "kubectl kustomize deploy/")
		if first := strings.TrimSpace(strings.SplitN(rendered, "\n---\n", 2)[0]); !strings.Contains(first, "\nkind: Namespace\n") {
			t.Fatalf("kubectl kustomize deploy/ does not start with the Namespace:\n%s", rendered)
		}
		out := kubectl(t, "kubectl apply -k deploy/")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		for _, l := range lines {
			// Client-side apply patches a field whose patch strategy is
			// replace every time, changed or not: a PodDisruptionBudget's
			// selector, a ValidatingAdmissionPolicy's resource rules.
			// kubectl diff below says whether anything really differs.
			always := strings.HasPrefix(l, "poddisruptionbudget.") || strings.HasPrefix(l, "validatingadmissionpolicy.")
			if !strings.HasSuffix(l, " unchanged") && !(always && strings.HasSuffix(l, " configured")) {
				t.Errorf("apply -k after apply -f: %q, want every object unchanged", l)
			}
		}
		// Exits 1, failing the command, when an object differs.
		kubectl(t, "kubectl diff -k deploy/")
		if len(lines) != len(objs) {
			t.Errorf("apply -k applied %d objects, deploy/ has %d:\n%s", len(lines), len(objs), out)
		}
	})

	deploy := theDeployment(t, objs)
	role, err := env.Client.RbacV1().ClusterRoles().Get(ctx(t), "meshpilot", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range role.Rules {
		if routeStatusRule(r) {
			continue
		}
		for _, v := range r.Verbs {
			if v != "list" && v != "watch" {
				t.Errorf("ClusterRole grants %q on %v", v, r.Resources)
			}
		}
		if slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
			t.Errorf("ClusterRole rule uses a wildcard: %+v", r)
		}
	}

	// The test's own service, in a namespace of its own: the Deployment
	// watches every namespace.
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.25")
	createService(t, ns, "rbac", 7070)
	writeSlice(t, ns, "rbac", bs)

	c := deploy.Spec.Template.Spec.Containers[0]
	args, addrs := localArgs(t, c)
	kubeconfig := serviceAccountKubeconfig(t, deploy.Namespace, deploy.Spec.Template.Spec.ServiceAccountName)
	args = append(args, "--kubeconfig", kubeconfig)
	checkGatewayStatusAccess(t, kubeconfig, deploy.Namespace, deploy.Spec.Template.Spec.ServiceAccountName)
	// --balance, which the Deployment's comment offers, needs the Role on
	// Leases: the replica must publish its count with that RBAC alone.
	args = append(args, "--balance")
	bin := testutil.BuildMeshpilot(t)
	out := startProcess(t, bin, args...)
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || addrs[p.HTTPGet.Port.StrVal] == "" {
			t.Fatalf("probe %+v: want an HTTP probe on a named port meshpilot listens on", p)
		}
		testutil.AwaitHTTP(t, "http://"+addrs[p.HTTPGet.Port.StrVal]+p.HTTPGet.Path, http.StatusOK)
	}
	testutil.AwaitHTTP(t, "http://"+addrs["debug"]+"/debug/syncz", http.StatusOK)
	cc := grpctest.Channel(t, addrs["grpc-xds"], "xds:///rbac:7070", grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, bs...)
	checkServiceAccountIstioAccess(t, deploy.Namespace, deploy.Spec.Template.Spec.ServiceAccountName)
	awaitReplicaLease(t, deploy.Namespace)
	checkIstioLateInstall(t, out)
	if strings.Contains(strings.ToLower(out.String()), "forbidden") {
		t.Fatalf("meshpilot met a forbidden error with the deploy/ RBAC:\n%s", out.String())
	}
}

// awaitReplicaLease waits for the replica's Lease (--balance) in its
// namespace, carrying its client count.
func awaitReplicaLease(t *testing.T, ns string) {
	t.Helper()
	testenv.Eventually(t, "the replica's Lease in "+ns, func() (bool, string) {
		leases, err := env.Client.CoordinationV1().Leases(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=meshpilot"})
		if err != nil {
			return false, err.Error()
		}
		for _, l := range leases.Items {
			if _, ok := l.Annotations[replicas.ClientsAnnotation]; ok && l.Spec.RenewTime != nil {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Leases, none with a client count", len(leases.Items))
	})
}

// useOwnAPIServer points the package's env at an API server of the
// test's own until it ends. The deploy command must work on an empty
// cluster and meshpilot must see Istio's CRDs arrive while it runs, so
// the test cannot share the package's API server, where other tests
// install those CRDs and leave objects behind in whatever order they
// run. e2e tests never run in parallel, so swapping env is safe.
func useOwnAPIServer(t *testing.T) {
	t.Helper()
	own, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	shared := env
	env = own
	t.Cleanup(func() {
		env = shared
		if err := own.Stop(); err != nil {
			t.Errorf("stopping the test's own API server: %v", err)
		}
	})
}

// theDeployment reads deploy/'s Deployment back from the API server and
// checks that its Service reaches the container's named ports.
func theDeployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	var svc *corev1.Service
	for _, u := range objs {
		var err error
		switch u.GetKind() {
		case "Deployment":
			d, err = env.Client.AppsV1().Deployments(u.GetNamespace()).Get(ctx(t), u.GetName(), metav1.GetOptions{})
		case "Service":
			svc, err = env.Client.CoreV1().Services(u.GetNamespace()).Get(ctx(t), u.GetName(), metav1.GetOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if d == nil || svc == nil || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("deploy/ needs a Deployment with one container and a Service")
	}
	named := map[string]bool{}
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		named[p.Name] = true
	}
	for _, p := range svc.Spec.Ports {
		if !named[p.TargetPort.StrVal] {
			t.Errorf("Service port %s targets %q, which the container does not name", p.Name, p.TargetPort.String())
		}
	}
	return d
}

// listenFlags maps each flag on which meshpilot listens to the container
// port it must serve; the debug pages have none and stay on loopback.
var listenFlags = map[string]string{"--xds-addr": "grpc-xds", "--http-addr": "http-monitoring", "--debug-addr": "debug"}

// localArgs returns the container's args with each listening address moved
// to a free loopback port, after checking it against the container's
// ports; addrs maps port names ("debug" for the debug pages) to the new
// addresses.
func localArgs(t *testing.T, c corev1.Container) (args []string, addrs map[string]string) {
	t.Helper()
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	addrs = map[string]string{}
	for _, a := range c.Args {
		flag, value, _ := strings.Cut(a, "=")
		portName, listens := listenFlags[flag]
		if !listens {
			if flag == "--kubeconfig" {
				t.Fatalf("the Deployment sets %s: it must use its ServiceAccount", a)
			}
			args = append(args, a)
			continue
		}
		host, port, err := net.SplitHostPort(value)
		if err != nil {
			t.Fatalf("the Deployment's %s: %v (want the --flag=value form)", a, err)
		}
		if want, ok := ports[portName]; ok && port != strconv.Itoa(int(want)) {
			t.Errorf("the Deployment's %s is not its container port %s (%d)", a, portName, want)
		}
		if portName == "debug" && host != "127.0.0.1" && host != "localhost" {
			t.Errorf("the Deployment's %s puts the debug pages on the network", a)
		}
		local := testutil.FreeAddr(t)
		addrs[portName] = local
		args = append(args, flag+"="+local)
	}
	for flag, portName := range listenFlags {
		if _, ok := addrs[portName]; !ok {
			t.Fatalf("the Deployment's args lack %s: meshpilot would listen on its default", flag)
		}
	}
	return args, addrs
}

// serviceAccountKubeconfig writes a kubeconfig holding a TokenRequest
// token of the ServiceAccount, as its Pod would get one.
func serviceAccountKubeconfig(t *testing.T, ns, name string) string {
	t.Helper()
	tok, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx(t), name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, name, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name}
	kc.CurrentContext = "test"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}
