package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestWatchServiceSliceAndPod(t *testing.T) {
	ns := env.Namespace(t, nil)
	c := ctx(t)
	p := start(t, nil, "watch", "services,endpointslices,po", "-n", ns, "--kubeconfig", env.Kubeconfig)

	// Service: added, modified, deleted.
	svc, err := env.Client.CoreV1().Services(ns).Create(c, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	line := p.expect(" ADDED ", " Service "+ns+"/web ", "rv="+svc.ResourceVersion, "type=ClusterIP clusterIP="+svc.Spec.ClusterIP, "ports=http:80/TCP")
	if _, err := time.Parse("2006-01-02T15:04:05.000Z07:00", strings.Fields(line)[0]); err != nil || !strings.Contains(strings.Fields(line)[0], ".") {
		t.Errorf("time %q is not RFC 3339 with milliseconds", strings.Fields(line)[0])
	}
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
	if svc, err = env.Client.CoreV1().Services(ns).Update(c, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.expect(" MODIFIED ", "Service "+ns+"/web ", "rv="+svc.ResourceVersion, "ports=http:80/TCP,dns:53/UDP")

	// EndpointSlice: one of two endpoints ready, then both.
	yes, no := true, false
	port, proto, name := int32(8080), corev1.ProtocolTCP, "http"
	slice, err := env.Client.DiscoveryV1().EndpointSlices(ns).Create(c, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"192.0.2.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
			{Addresses: []string{"192.0.2.2"}, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.expect(" ADDED ", "EndpointSlice "+ns+"/web-1 ", "service=web ready=1/2 addressType=IPv4 ports=http:8080/TCP")
	slice.Endpoints[1].Conditions.Ready = &yes
	if slice, err = env.Client.DiscoveryV1().EndpointSlices(ns).Update(c, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.expect(" MODIFIED ", "EndpointSlice "+ns+"/web-1 ", "rv="+slice.ResourceVersion, "ready=2/2")

	// Pod: pending, then running and ready (the status a kubelet would write).
	pod, err := env.Client.CoreV1().Pods(ns).Create(c, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0"},
		Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.expect(" ADDED ", "Pod "+ns+"/web-0 ", "phase=Pending ready=false ip=<none> node=node-a")
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		PodIP:      "10.1.2.3",
		PodIPs:     []corev1.PodIP{{IP: "10.1.2.3"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
	}
	if pod, err = env.Client.CoreV1().Pods(ns).UpdateStatus(c, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.expect(" MODIFIED ", "Pod "+ns+"/web-0 ", "rv="+pod.ResourceVersion, "phase=Running ready=true ip=10.1.2.3 node=node-a")

	// Deletions.
	if err := env.Client.CoreV1().Services(ns).Delete(c, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p.expect(" DELETED ", "Service "+ns+"/web ")
	if err := env.Client.DiscoveryV1().EndpointSlices(ns).Delete(c, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p.expect(" DELETED ", "EndpointSlice "+ns+"/web-1 ")
	zero := int64(0)
	if err := env.Client.CoreV1().Pods(ns).Delete(c, "web-0", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	p.expect(" DELETED ", "Pod "+ns+"/web-0 ")
	p.waitStderr("level=INFO msg=watching")
	p.interrupt()
}

func TestWatchNodeAndNamespaceWithLabelSelector(t *testing.T) {
	run := fmt.Sprintf("r%d", time.Now().UnixNano())
	c := ctx(t)
	p := start(t, nil, "watch", "nodes,ns", "-l", "run="+run, "--kubeconfig", env.Kubeconfig)
	p.waitStderr("msg=watching")

	// Neither is printed: the selector does not match.
	if _, err := env.Client.CoreV1().Nodes().Create(c, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "other-" + run, Labels: map[string]string{"run": "other"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Namespace(t, map[string]string{"run": "other"})

	node, err := env.Client.CoreV1().Nodes().Create(c, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:   "node-" + run,
		Labels: map[string]string{"run": run, "topology.kubernetes.io/zone": "zone-b"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The first line must be the matching node: the other one was filtered
	// by the server, and events of one resource arrive in order.
	if l := p.next(); !containsAll(l, []string{" ADDED ", " Node node-" + run + " ", "zone=zone-b ready=Unknown"}) {
		t.Fatalf("first line %q", l)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if node, err = env.Client.CoreV1().Nodes().UpdateStatus(c, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.expect(" MODIFIED ", "Node node-"+run+" ", "rv="+node.ResourceVersion, "zone=zone-b ready=True")

	ns := env.Namespace(t, map[string]string{"run": run})
	p.expect(" ADDED ", "Namespace "+ns+" ", "phase=Active labels=kubernetes.io/metadata.name="+ns+",run="+run)

	if err := env.Client.CoreV1().Nodes().Delete(c, node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p.expect(" DELETED ", "Node node-"+run+" ")
	p.interrupt()
	for _, l := range p.seen {
		if strings.Contains(l, "other") {
			t.Errorf("printed an object the selector excludes: %q", l)
		}
	}
}

func TestWatchDefaultNamespaceFromKubeconfigAndFieldSelector(t *testing.T) {
	ns := env.Namespace(t, nil)
	elsewhere := env.Namespace(t, nil)
	c := ctx(t)
	kc := kubeconfigWithNamespace(t, ns)
	p := start(t, nil, "watch", "services", "--field-selector", "metadata.name!=skipped", "--kubeconfig", kc)
	p.waitStderr("msg=watching")
	mk := func(ns, name string) {
		t.Helper()
		if _, err := env.Client.CoreV1().Services(ns).Create(c, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "grpc", Port: 9000}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk(elsewhere, "a")
	mk(ns, "skipped")
	mk(ns, "b")
	if l := p.next(); !containsAll(l, []string{" ADDED ", "Service " + ns + "/b ", "type=ClusterIP clusterIP=None ports=grpc:9000/TCP"}) {
		t.Fatalf("first line %q, want service b of the kubeconfig's namespace", l)
	}
	p.interrupt()
}

func TestWatchCustomResourceJSON(t *testing.T) {
	ns := env.Namespace(t, nil)
	c := ctx(t)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	// A group and short name of its own, so that repeated runs against the
	// same API server never meet a CRD still being deleted.
	id := fmt.Sprint(time.Now().UnixNano() % 1e9)
	group, short := "t"+id+".meshpilot.io", "wdg"+id
	crdName := "widgets." + group
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": crdName},
		"spec": map[string]any{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": []any{short}},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	if _, err := dyn.Resource(crdGVR).Create(c, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dyn.Resource(crdGVR).Delete(context.Background(), crdName, metav1.DeleteOptions{})
	})
	err = wait.PollUntilContextTimeout(c, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, cond := range conds {
			m := cond.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD not established: %v", err)
	}

	p := start(t, nil, "watch", crdName, "-n", ns, "-o", "json", "--kubeconfig", env.Kubeconfig)
	p.waitStderr("msg=watching")
	widgets := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}).Namespace(ns)
	w, err := widgets.Create(c, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1", "labels": map[string]any{"size": "big"}},
		"spec":     map[string]any{"color": "blue"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type event struct {
		Time, Event, Kind, APIVersion, Namespace, Name, ResourceVersion string
		Summary                                                         map[string]string
	}
	parse := func(l string) event {
		t.Helper()
		var e event
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("line %q is not an event object: %v", l, err)
		}
		return e
	}
	e := parse(p.next())
	want := event{Time: e.Time, Event: "ADDED", Kind: "Widget", APIVersion: group + "/v1", Namespace: ns, Name: "w1",
		ResourceVersion: w.GetResourceVersion(), Summary: map[string]string{"labels": "size=big"}}
	if fmt.Sprint(e) != fmt.Sprint(want) {
		t.Errorf("event %+v\nwant %+v", e, want)
	}
	if _, err := time.Parse(time.RFC3339, e.Time); err != nil {
		t.Errorf("time %q: %v", e.Time, err)
	}

	w, err = widgets.Patch(c, "w1", types.MergePatchType, []byte(`{"metadata":{"labels":{"size":"small"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e := parse(p.next()); e.Event != "MODIFIED" || e.ResourceVersion != w.GetResourceVersion() || e.Summary["labels"] != "size=small" {
		t.Errorf("event %+v", e)
	}

	// The short name from the CRD resolves too, and lists existing objects.
	byShort := start(t, nil, "watch", short, "-n", ns, "--kubeconfig", env.Kubeconfig)
	byShort.expect(" ADDED ", "Widget "+ns+"/w1 ", "labels=size=small")
	byShort.interrupt()

	if err := widgets.Delete(c, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if e := parse(p.next()); e.Event != "DELETED" || e.Name != "w1" {
		t.Errorf("event %+v", e)
	}
	p.interrupt()
}

func TestWatchUnknownResource(t *testing.T) {
	binary(t) // built before the clock starts
	start := time.Now()
	out, stderr, code := runToEnd(t, cleanEnv("HOME="+t.TempDir()), "watch", "services,foo", "--kubeconfig", env.Kubeconfig)
	want := `meshpilot: the server has no resource "foo"; see "kubectl api-resources" for the names it serves, and name custom resources <plural>.<group>` + "\n"
	if code != 1 || stderr != want || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q, want %q", code, out, stderr, want)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestWatchWithoutKubeconfig(t *testing.T) {
	home := t.TempDir()
	out, stderr, code := runToEnd(t, cleanEnv("HOME="+home), "watch")
	want := "meshpilot: no Kubernetes configuration found: tried --kubeconfig (not given), $KUBECONFIG (not set), " +
		filepath.Join(home, ".kube", "config") + " (no such file), the in-cluster service account (not running in a Pod); pass --kubeconfig FILE or set KUBECONFIG\n"
	if code != 1 || stderr != want || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q\nwant %q", code, out, stderr, want)
	}
}

func TestWatchUnreachableServer(t *testing.T) {
	addr := closedPort(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
users: [{name: u, user: {token: abc}}]
`, addr)
	if err := os.WriteFile(kc, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	// Through $KUBECONFIG this time.
	out, stderr, code := runToEnd(t, cleanEnv("HOME="+t.TempDir(), "KUBECONFIG="+kc), "watch")
	want := "meshpilot: cannot reach the API server at https://" + addr + ": connection refused; is it running? is the address in the kubeconfig right?\n"
	if code != 1 || stderr != want || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q\nwant %q", code, out, stderr, want)
	}
}

// kubeconfigEdited writes a copy of the test kubeconfig changed by edit.
func kubeconfigEdited(t *testing.T, edit func(*clientcmdapi.AuthInfo)) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	edit(cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo])
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWatchForbidden(t *testing.T) {
	// The test admin impersonates a user without any RBAC permissions: it
	// may read /version and discovery, but not list Pods.
	kc := kubeconfigEdited(t, func(a *clientcmdapi.AuthInfo) { a.Impersonate = "meshpilot-nobody" })
	binary(t) // built before the clock starts
	start := time.Now()
	out, stderr, code := runToEnd(t, cleanEnv("HOME="+t.TempDir()), "watch", "pods", "-n", "default", "--kubeconfig", kc)
	want := "meshpilot: watching pods in namespace default: the API server at " + strings.TrimSuffix(env.Config.Host, "/") +
		` accepted the credentials but forbids this request (403 Forbidden: pods is forbidden: User "meshpilot-nobody" cannot list resource "pods" in API group "" in the namespace "default"); the user needs more RBAC permissions` + "\n"
	if code != 1 || stderr != want || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q\nwant %q", code, out, stderr, want)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestWatchBadCredentials(t *testing.T) {
	kc := kubeconfigEdited(t, func(a *clientcmdapi.AuthInfo) {
		*a = clientcmdapi.AuthInfo{Token: "not-a-valid-token"}
	})
	out, stderr, code := runToEnd(t, cleanEnv("HOME="+t.TempDir()), "watch", "--kubeconfig", kc)
	want := "meshpilot: the API server at " + strings.TrimSuffix(env.Config.Host, "/") + " refused the credentials (401 Unauthorized); the token or client certificate in the kubeconfig is wrong or expired: log in again or fix the user of the current context\n"
	if code != 1 || stderr != want || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q\nwant %q", code, out, stderr, want)
	}
}

// TestWatchSurvivesAPIServerRestart: after the API server comes back, the
// watch resumes; objects it already printed are not printed again, and
// changes made meanwhile or afterwards are.
func TestWatchSurvivesAPIServerRestart(t *testing.T) {
	ns := env.Namespace(t, nil)
	c := ctx(t)
	p := start(t, nil, "watch", "services", "-n", ns, "--kubeconfig", env.Kubeconfig)
	mk := func(name string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(c, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := env.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
			}, metav1.CreateOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("creating service %s: %v", name, err)
		}
	}
	mk("before")
	p.expect(" ADDED ", "Service "+ns+"/before ")
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	mk("after")
	if l := p.next(); !containsAll(l, []string{" ADDED ", "Service " + ns + "/after "}) {
		t.Fatalf("first line after the restart %q, want only the new service", l)
	}
	p.interrupt()
}

func TestWatchUnwatchableResource(t *testing.T) {
	out, stderr, code := runToEnd(t, cleanEnv("HOME="+t.TempDir()), "watch", "tokenreviews", "--kubeconfig", env.Kubeconfig)
	want := "meshpilot: tokenreviews.authentication.k8s.io cannot be watched: the API server does not support listing and watching it\n"
	if code != 1 || stderr != want || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q\nwant %q", code, out, stderr, want)
	}
}
