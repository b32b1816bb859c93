package file

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
)

// clusterManifests is a small mesh with what the conversion reads: every
// locality source, a headless, an ExternalName and a kube-dns-like
// Service, a draining, a not-ready and a terminating endpoint, a slice
// endpoint found by IP (whose IP a finished Pod held before), a slice
// with a stale target port, an IPv6 and an FQDN slice, Services with an
// internal traffic policy and traffic distributions (PreferClose among
// them), one with Istio's exportTo annotation, and endpoints whose node only their slice names, or names
// otherwise than their Pod. {{ns}} is the
// test's namespace. Addresses are documentation ones (192.0.2.0/24,
// 2001:db8::/32): the API server refuses loopback endpoints. A folder has
// no allocator, so Services name their cluster IPs, as `kubectl get -o
// yaml` shows them.
var clusterManifests = map[string]string{
	"namespace.yaml": `apiVersion: v1
kind: Namespace
metadata: {name: {{ns}}}
`,
	"nodes.yaml": `apiVersion: v1
kind: Node
metadata:
  name: {{ns}}-a
  labels: {topology.kubernetes.io/region: eu-west, topology.kubernetes.io/zone: eu-west-a}
---
apiVersion: v1
kind: Node
metadata:
  name: {{ns}}-b
  labels: {failure-domain.beta.kubernetes.io/region: eu-west, failure-domain.beta.kubernetes.io/zone: eu-west-b, topology.istio.io/subzone: rack-2}
---
apiVersion: v1
kind: Node
metadata: {name: {{ns}}-c}
`,
	"services.yaml": `apiVersion: v1
kind: Service
metadata: {name: greeter, namespace: {{ns}}, labels: {app: greeter}}
spec:
  clusterIP: 10.96.200.10
  selector: {app: greeter}
  ports: [{name: grpc, port: 7070, targetPort: 50051}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: {{ns}}}
spec:
  clusterIP: None
  ports: [{name: tcp-db, port: 5432}, {name: metrics, port: 9090, appProtocol: http}]
---
apiVersion: v1
kind: Service
metadata: {name: search, namespace: {{ns}}}
spec: {type: ExternalName, externalName: search.example.com}
---
apiVersion: v1
kind: Service
metadata: {name: dns, namespace: {{ns}}}
spec:
  clusterIP: 10.96.200.11
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
  - {name: metrics, port: 9153, targetPort: metrics}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: {{ns}}}
spec:
  clusterIP: 10.96.200.12
  ports:
  - {name: http, port: 80, targetPort: http-web}
  - {name: h2, port: 81, appProtocol: kubernetes.io/h2c}
---
apiVersion: v1
kind: Service
metadata: {name: local, namespace: {{ns}}}
spec:
  clusterIP: 10.96.200.13
  internalTrafficPolicy: Local
  trafficDistribution: PreferClose
  ports: [{name: grpc, port: 7070}]
---
apiVersion: v1
kind: Service
metadata: {name: near, namespace: {{ns}}, annotations: {networking.istio.io/exportTo: "., web"}}
spec:
  clusterIP: 10.96.200.14
  trafficDistribution: PreferSameNode
  ports: [{name: grpc, port: 7070}]
`,
	"pods.yaml": `apiVersion: v1
kind: Pod
metadata: {name: greeter-1, namespace: {{ns}}, labels: {app: greeter, version: v1}}
spec: {nodeName: {{ns}}-a, serviceAccountName: greeter, containers: [{name: app, image: greeter}]}
status: {phase: Running, podIP: 192.0.2.11, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: greeter-2, namespace: {{ns}}, labels: {app: greeter, version: v2}}
spec: {nodeName: {{ns}}-b, serviceAccountName: greeter, containers: [{name: app, image: greeter}]}
status: {phase: Running, podIP: 192.0.2.12, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: greeter-3, namespace: {{ns}}, labels: {app: greeter, istio-locality: us-east.us-east-1.rack-7}}
spec: {nodeName: {{ns}}-c, containers: [{name: app, image: greeter}]}
status: {phase: Running, podIP: 192.0.2.13, podIPs: [{ip: 192.0.2.13}, {ip: "2001:db8::13"}], conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: greeter-4, namespace: {{ns}}, labels: {app: greeter, topology.istio.io/locality: ap-south.ap-south-1}}
spec: {nodeName: {{ns}}-a, containers: [{name: app, image: greeter}]}
status: {phase: Running, podIP: 192.0.2.14, conditions: [{type: Ready, status: "False"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: old-1, namespace: {{ns}}, labels: {app: old}}
spec: {nodeName: {{ns}}-a, restartPolicy: Never, containers: [{name: app, image: old}]}
status: {phase: Succeeded, podIP: 192.0.2.20}
---
apiVersion: v1
kind: Pod
metadata: {name: new-1, namespace: {{ns}}, labels: {app: new}}
spec: {nodeName: {{ns}}-b, containers: [{name: app, image: new}]}
status: {phase: Running, podIP: 192.0.2.20, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: dns-1, namespace: {{ns}}, labels: {app: dns}}
spec: {nodeName: {{ns}}-c, containers: [{name: dns, image: dns, ports: [{name: metrics, containerPort: 9153}]}]}
status: {phase: Running, podIP: 192.0.2.31, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: db-0, namespace: {{ns}}, labels: {app: db}}
spec: {containers: [{name: db, image: db}]}
`,
	"slices.yaml": `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: greeter-abc, namespace: {{ns}}, labels: {kubernetes.io/service-name: greeter}}
addressType: IPv4
ports: [{name: grpc, port: 50051}]
endpoints:
- addresses: [192.0.2.11]
  conditions: {ready: true}
  nodeName: {{ns}}-a
  targetRef: {kind: Pod, name: greeter-1}
- addresses: [192.0.2.12]
  conditions: {ready: false, serving: true, terminating: true}
  nodeName: {{ns}}-b
  targetRef: {kind: Pod, name: greeter-2}
- addresses: [192.0.2.13]
  targetRef: {kind: Pod, name: greeter-3, namespace: {{ns}}}
- addresses: [192.0.2.14]
  conditions: {ready: false}
  targetRef: {kind: Pod, name: greeter-4}
- addresses: [192.0.2.20]
  zone: zone-z
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: greeter-stale, namespace: {{ns}}, labels: {kubernetes.io/service-name: greeter}}
addressType: IPv4
ports: [{name: grpc, port: 50052}]
endpoints:
- addresses: [192.0.2.11]
  conditions: {ready: true}
  targetRef: {kind: Pod, name: greeter-1}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-1, namespace: {{ns}}, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
ports: [{name: tcp-db, port: 5432}, {name: metrics, port: 9090}]
endpoints:
- addresses: [192.0.2.41]
  zone: zone-x
- addresses: [192.0.2.42]
  conditions: {ready: false, serving: false, terminating: true}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-2, namespace: {{ns}}, labels: {kubernetes.io/service-name: db}}
addressType: IPv6
ports: [{name: tcp-db, port: 5432}]
endpoints:
- addresses: ["2001:db8::41"]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: dns-1, namespace: {{ns}}, labels: {kubernetes.io/service-name: dns}}
addressType: IPv4
ports: [{name: dns, port: 53, protocol: UDP}, {name: dns-tcp, port: 53, protocol: TCP}, {name: metrics, port: 9153}]
endpoints:
- addresses: [192.0.2.31]
  nodeName: {{ns}}-c
  targetRef: {kind: Pod, name: dns-1}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: {{ns}}, labels: {kubernetes.io/service-name: web}}
addressType: FQDN
ports: [{name: http, port: 8080}]
endpoints:
- addresses: [web.example.com]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-2, namespace: {{ns}}, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}, {name: h2, port: 81}]
endpoints:
- addresses: [192.0.2.51]
  hostname: web-0
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: local-1, namespace: {{ns}}, labels: {kubernetes.io/service-name: local}}
addressType: IPv4
ports: [{name: grpc, port: 7070}]
endpoints:
- addresses: [192.0.2.61]
  nodeName: {{ns}}-a
- addresses: [192.0.2.62]
  nodeName: {{ns}}-b
  zone: zone-y
- addresses: [192.0.2.11]
  nodeName: {{ns}}-c
  targetRef: {kind: Pod, name: greeter-1}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: near-1, namespace: {{ns}}, labels: {kubernetes.io/service-name: near}}
addressType: IPv4
ports: [{name: grpc, port: 7070}]
endpoints:
- addresses: [192.0.2.63]
  nodeName: {{ns}}-c
`,
}

// clusterIPs are the Pod and endpoint addresses of clusterManifests.
var clusterIPs = []string{"192.0.2.11", "192.0.2.12", "192.0.2.13", "2001:db8::13", "192.0.2.14", "192.0.2.20",
	"192.0.2.31", "192.0.2.41", "192.0.2.42", "2001:db8::41", "192.0.2.51", "192.0.2.61", "192.0.2.62", "192.0.2.63"}

// modelView is everything a registry serves, each item as JSON, by key:
// "service <host>", "endpoints <host>:<port>", "workload <ip>". JSON of
// the model's own types carries every field, including ones added later.
func modelView(t *testing.T, d interface {
	model.ServiceDiscovery
	model.WorkloadLookup
}, ips []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	put := func(key string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[key] = string(b)
	}
	for _, svc := range d.Services() {
		put("service "+string(svc.Hostname), svc)
		for _, p := range svc.Ports {
			put(fmt.Sprintf("endpoints %s:%d", svc.Hostname, p.Port), d.Endpoints(svc.Hostname, p.Port, nil))
		}
	}
	for _, ip := range ips {
		put("workload "+ip, d.WorkloadByIP(ip))
	}
	return out
}

// viewDiff lists the keys whose content differs, with both sides.
func viewDiff(files, cluster map[string]string) []string {
	var diffs []string
	keys := map[string]bool{}
	for k := range files {
		keys[k] = true
	}
	for k := range cluster {
		keys[k] = true
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	}) {
		if files[k] != cluster[k] {
			diffs = append(diffs, fmt.Sprintf("%s:\n  files   %s\n  cluster %s", k, orNone(files[k]), orNone(cluster[k])))
		}
	}
	return diffs
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// A folder must give the model a cluster holding the same manifests
// gives: the same bytes go to the folder and to the real API server (as
// kubectl sends them, its defaulting included), and the file registry's
// whole model must equal the Kubernetes registry's.
func TestSameModelAsTheKubernetesRegistry(t *testing.T) {
	ns := env.Namespace(t, nil)
	dir := t.TempDir()
	api := newAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Cluster IPs are the test's: free them for a later run in this
	// process.
	t.Cleanup(func() {
		ctx := context.Background()
		list, err := env.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("listing the test's services: %v", err)
			return
		}
		for _, svc := range list.Items {
			if err := env.Client.CoreV1().Services(ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting service %s: %v", svc.Name, err)
			}
		}
	})
	// Namespace and Nodes first, Pods before slices, as kubectl users do.
	for _, name := range []string{"namespace.yaml", "nodes.yaml", "services.yaml", "pods.yaml", "slices.yaml"} {
		data := strings.ReplaceAll(clusterManifests[name], "{{ns}}", ns)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if refused := api.create(ctx, ns, []byte(data), false); len(refused) > 0 {
			t.Fatalf("the API server refuses %s: %v", name, refused)
		}
	}

	quiet := slog.New(slog.DiscardHandler)
	fromFiles, err := New(Options{Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	fromCluster, err := kube.New(env.API, kube.Options{Namespaces: []string{ns}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, "file", fromFiles)
	runUntilCleanup(t, "Kubernetes", fromCluster)
	if ps := fromFiles.Problems(); len(ps) > 0 {
		t.Fatalf("the folder has problems:\n%s", describe(ps))
	}

	// Both are synced; the Kubernetes registry may still be working
	// through its queue.
	var diffs []string
	deadline := time.Now().Add(wait)
	for {
		files, cluster := modelView(t, fromFiles, clusterIPs), modelView(t, fromCluster, clusterIPs)
		if diffs = viewDiff(files, cluster); len(diffs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the folder's model differs from the cluster's in %d places:\n%s", len(diffs), strings.Join(diffs, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Not two empty models: the mesh is there.
	if svcs, eps := fromFiles.Len(); svcs != 7 || eps < 12 {
		t.Fatalf("%d services and %d endpoints; want 7 services and at least 12 endpoints", svcs, eps)
	}
	local, near := model.ServiceHostname("local", ns, ""), model.ServiceHostname("near", ns, "")
	if svc := fromFiles.GetService(local); svc == nil || svc.InternalTrafficPolicy != model.InternalTrafficLocal || svc.TrafficDistribution != model.PreferSameZone {
		t.Fatalf("service %s: %+v, want internal traffic Local and PreferSameZone", local, svc)
	}
	if svc := fromFiles.GetService(near); svc == nil || svc.InternalTrafficPolicy != model.InternalTrafficCluster || svc.TrafficDistribution != model.PreferSameNode ||
		!slices.Equal(svc.ExportTo, []string{".", "web"}) {
		t.Fatalf("service %s: %+v, want internal traffic Cluster, PreferSameNode and exportTo [. web]", near, svc)
	}
	nodes := map[string]string{}
	for _, ep := range fromFiles.Endpoints(local, 7070, nil) {
		nodes[ep.Address] = ep.NodeName
	}
	// The slice's node where no Pod is known; the Pod's over the slice's.
	if want := map[string]string{"192.0.2.61": ns + "-a", "192.0.2.62": ns + "-b", "192.0.2.11": ns + "-a"}; !maps.Equal(nodes, want) {
		t.Fatalf("nodes of %s's endpoints: %v, want %v", local, nodes, want)
	}
	if w := fromFiles.WorkloadByIP("192.0.2.20"); w == nil || w.Name != "new-1" {
		t.Fatalf("workload of 192.0.2.20: %+v, want the running Pod new-1", w)
	}
}
