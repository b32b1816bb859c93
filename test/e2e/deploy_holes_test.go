package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testpki"
	"github.com/meshpilot/meshpilot/internal/testutil"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// secureSection is the README's section of the secured variant, whose
// kubectl commands TestDeploySecuredVariant runs as written.
const secureSection = "### Secured: xDS over mTLS"

func isSecureDeployCommand(c testutil.ReadmeCommand) bool {
	return c.Section == secureSection && strings.HasPrefix(c.Line, "kubectl ")
}

// kubectlIn is kubectl run from dir instead of the repository's root.
func kubectlIn(t *testing.T, dir, command string) string {
	t.Helper()
	bin, err := testenv.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(command, `'"$|&;<>*\`+"`") {
		t.Fatalf("%q needs a shell; run only plain commands", command)
	}
	args := strings.Fields(command)
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, bin, args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig, "KUBECACHEDIR="+t.TempDir(), "KUBERC=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
	return string(out)
}

// TestDeploySecuredVariant runs the README's commands of the secured
// variant as written, from a folder holding the certificate files they
// name (and deploy/ and deploy-secure/): meshpilot, run with the
// Deployment's args, its Secret's files where the volume mounts them and
// a token of its ServiceAccount, serves a client whose certificate names
// its namespace, refuses one whose node claims another namespace and one
// without a certificate. The ServiceAccount cannot get a Secret by name,
// nor create, update or delete a Lease that is not a replica's (another
// controller's leader election), while its own replica Lease (--balance)
// is written.
func TestDeploySecuredVariant(t *testing.T) {
	useOwnAPIServer(t)
	root := testutil.RepoRoot(t)
	dir := t.TempDir()
	for _, d := range []string{"deploy", "deploy-secure"} {
		if err := os.Symlink(filepath.Join(root, d), filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	ca := testpki.New(t)
	server := ca.IssuePEM(t, testpki.Leaf{Name: "meshpilot", IPs: []string{"127.0.0.1"}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	for name, data := range map[string][]byte{"meshpilot.crt": server.CertPEM, "meshpilot.key": server.KeyPEM, "ca.crt": ca.PEM()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ran := 0
	for _, c := range testutil.ReadmeCommands(t) {
		if isSecureDeployCommand(c) {
			t.Logf("$ %s\n%s", c.Line, kubectlIn(t, dir, c.Line))
			ran++
		}
	}
	if ran == 0 {
		t.Fatalf("README.md shows no kubectl command under %s", secureSection)
	}

	deploy, err := env.Client.AppsV1().Deployments("meshpilot-system").Get(ctx(t), "meshpilot", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := deploy.Spec.Template.Spec.Containers[0]
	args, addrs := localArgs(t, c)
	args = mountSecretVolumes(t, deploy.Spec.Template.Spec, c, args)
	sa := deploy.Spec.Template.Spec.ServiceAccountName
	kubeconfig := serviceAccountKubeconfig(t, deploy.Namespace, sa)
	args = append(args, "--kubeconfig", kubeconfig, "--balance")
	for _, want := range []string{"--xds-cert=", "--xds-key=", "--xds-client-ca="} {
		if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, want) }) {
			t.Fatalf("the secured Deployment's args lack %s...: %q", want, c.Args)
		}
	}

	ns := env.Namespace(t, nil)
	createService(t, ns, "secure", 7070)
	writeSlice(t, ns, "secure", grpctest.StartBackends(t, "127.0.0.26"))
	out := startProcess(t, testutil.BuildMeshpilot(t), args...)
	testutil.AwaitHTTP(t, "http://"+addrs["http-monitoring"]+"/readyz", http.StatusOK)

	listener := "secure." + ns + ".svc.cluster.local:7070"
	// open returns the client's stream, subscribed to the listener, or
	// the error that kept it from opening.
	open := func(cert []tls.Certificate, claim string) (*xdstest.TestClient, error) {
		cfg := &tls.Config{RootCAs: ca.Pool(), Certificates: cert, ServerName: "127.0.0.1"}
		cc, err := grpc.NewClient(addrs["grpc-xds"], grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		o := xdstest.Options{AutoACK: true, Wait: testutil.Wait,
			Node: xdstest.GRPCNode(xdstest.NodeOptions{ID: xdstest.SidecarID("10.0.0.9", "client", claim), Namespace: claim})}
		if cert == nil {
			// Connect would fail the test: the refusal can come at
			// the stream's opening.
			c, err := xdstest.Open(ctx(t), cc, o)
			if err != nil {
				return nil, err
			}
			defer c.Close()
			c.Subscribe(resourcev3.ListenerType, listener)
			select {
			case <-c.Done():
				return nil, c.Err()
			case <-time.After(testutil.Wait):
				return nil, nil
			}
		}
		x := xdstest.Connect(t, cc, o)
		x.Subscribe(resourcev3.ListenerType, listener)
		return x, nil
	}
	workload := ca.IssuePEM(t, testpki.Leaf{Name: "client", URIs: []string{"spiffe://cluster.local/ns/" + ns + "/sa/default"},
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}).KeyPair(t)
	served, err := open([]tls.Certificate{workload}, ns)
	if err != nil {
		t.Fatalf("a client with its namespace's certificate: %v", err)
	}
	served.WaitFor(resourcev3.ListenerType, listener)
	impostor, err := open([]tls.Certificate{workload}, "meshpilot-system")
	if err == nil {
		err = impostor.ExpectEnd(testutil.Wait)
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a client claiming another namespace than its certificate's: %v, want PermissionDenied", err)
	}
	if _, err := open(nil, ns); err == nil || status.Code(err) == codes.OK {
		t.Fatalf("a client without a certificate was served: %v", err)
	}
	awaitReplicaLease(t, deploy.Namespace)

	checkServiceAccountCannot(t, kubeconfig, deploy.Namespace)
	if strings.Contains(strings.ToLower(out.String()), "forbidden") {
		t.Fatalf("meshpilot met a forbidden error with the deploy/ RBAC:\n%s", out.String())
	}
}

// mountSecretVolumes writes, for each Secret volume the container mounts,
// the Secret's keys to a folder of the test, as the kubelet would, and
// points args at it instead of the mount path.
func mountSecretVolumes(t *testing.T, spec corev1.PodSpec, c corev1.Container, args []string) []string {
	t.Helper()
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || spec.Volumes[i].Secret == nil {
			t.Fatalf("volume mount %s: no Secret volume of that name", m.Name)
		}
		s, err := env.Client.CoreV1().Secrets("meshpilot-system").Get(ctx(t), spec.Volumes[i].Secret.SecretName, metav1.GetOptions{})
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

// checkServiceAccountCannot tries, as meshpilot's ServiceAccount, what
// the deploy/ RBAC and Lease policy must refuse it.
func checkServiceAccountCannot(t *testing.T, kubeconfig, ns string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as.CoreV1().Secrets(ns).Get(ctx(t), "meshpilot-xds-tls", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the ServiceAccount got a Secret by name: %v", err)
	}
	// The API server enforces a ValidatingAdmissionPolicy once its
	// admission plugin has seen the policy and its binding, which takes
	// a moment after they are written (longer on a busy machine): wait
	// until a dry run of a refused write is refused.
	probe := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe", Namespace: ns}}
	testenv.Eventually(t, "the Lease policy in force", func() (bool, string) {
		_, err := as.CoordinationV1().Leases(ns).Create(ctx(t), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, "a Lease that is not a replica's was admitted"
	})
	// Another controller's leader election in the same namespace.
	holder := "istiod-1"
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "istio-leader", Namespace: ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	if _, err := env.Client.CoordinationV1().Leases(ns).Create(ctx(t), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := as.CoordinationV1().Leases(ns).Get(ctx(t), "istio-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	taken := "meshpilot"
	cur.Spec.HolderIdentity = &taken
	if _, err := as.CoordinationV1().Leases(ns).Update(ctx(t), cur, metav1.UpdateOptions{}); err == nil {
		t.Error("the ServiceAccount took over another controller's Lease")
	}
	cur.Labels = map[string]string{"app.kubernetes.io/component": "replica-clients"}
	if _, err := as.CoordinationV1().Leases(ns).Update(ctx(t), cur, metav1.UpdateOptions{}); err == nil {
		t.Error("the ServiceAccount labelled another controller's Lease as a replica's")
	}
	if err := as.CoordinationV1().Leases(ns).Delete(ctx(t), "istio-leader", metav1.DeleteOptions{}); err == nil {
		t.Error("the ServiceAccount deleted another controller's Lease")
	}
	fresh := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "not-a-replica", Namespace: ns}}
	if _, err := as.CoordinationV1().Leases(ns).Create(ctx(t), fresh, metav1.CreateOptions{}); err == nil {
		t.Error("the ServiceAccount created a Lease that is not a replica's")
	}
}

// TestDeployPoliciesSelectTheDeployment: deploy/'s NetworkPolicy and
// PodDisruptionBudget select the Deployment's Pods, and the policy opens
// only ports the container names.
func TestDeployPoliciesSelectTheDeployment(t *testing.T) {
	objs := readManifests(t)
	var labels map[string]any
	ports := map[string]bool{}
	for _, u := range objs {
		if u.GetKind() == "Deployment" {
			labels, _, _ = unstructured.NestedMap(u.Object, "spec", "template", "metadata", "labels")
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			for _, c := range cs {
				ps, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
				for _, p := range ps {
					ports[p.(map[string]any)["name"].(string)] = true
				}
			}
		}
	}
	for kind, path := range map[string][]string{"NetworkPolicy": {"spec", "podSelector", "matchLabels"}, "PodDisruptionBudget": {"spec", "selector", "matchLabels"}} {
		if n := countKind(objs, kind); n != 1 {
			t.Fatalf("deploy/ has %d %s objects, want 1", n, kind)
		}
		for _, u := range objs {
			if u.GetKind() != kind {
				continue
			}
			sel, _, _ := unstructured.NestedMap(u.Object, path...)
			if len(sel) == 0 {
				t.Errorf("%s selects nothing", kind)
			}
			for k, v := range sel {
				if labels[k] != v {
					t.Errorf("%s selects %s=%v, which the Deployment's Pods do not carry (%v)", kind, k, v, labels)
				}
			}
			if kind != "NetworkPolicy" {
				continue
			}
			rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "ingress")
			for _, r := range rules {
				ps, _, _ := unstructured.NestedSlice(r.(map[string]any), "ports")
				for _, p := range ps {
					if name, _ := p.(map[string]any)["port"].(string); !ports[name] {
						t.Errorf("NetworkPolicy opens port %v, which the container does not name", p)
					}
				}
			}
		}
	}
}
