package file_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshpilot/meshpilot/examples"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/file"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
)

// A folder must give the model a cluster holding the same objects gives.
func TestSameModelAsTheKubernetesRegistry(t *testing.T) {
	dir := t.TempDir()
	if err := examples.CopyMesh(dir, 0); err != nil {
		t.Fatal(err)
	}
	// More than the example: a headless service, an ExternalName one, a
	// slice without Pods whose zone gives the locality, a draining
	// endpoint and an IPv6 slice.
	extra := `apiVersion: v1
kind: Service
metadata: {name: db, namespace: demo}
spec:
  clusterIP: None
  ports: [{name: tcp-db, port: 5432}, {name: metrics, port: 9090, appProtocol: http}]
---
apiVersion: v1
kind: Service
metadata: {name: search, namespace: demo}
spec: {type: ExternalName, externalName: search.example.com}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-1, namespace: demo, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
ports: [{name: tcp-db, port: 5432}, {name: metrics, port: 9090}]
endpoints:
- addresses: [10.1.0.1]
  zone: zone-x
- addresses: [10.1.0.2]
  conditions: {ready: false, serving: true, terminating: true}
  nodeName: node-a
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-2, namespace: demo, labels: {kubernetes.io/service-name: db}}
addressType: IPv6
ports: [{name: tcp-db, port: 5432}]
endpoints:
- addresses: ["fd00::1"]
`
	if err := os.MkdirAll(filepath.Join(dir, "more"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "more", "extra.yaml"), []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	fromFiles, err := file.New(file.Options{Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	go func() { done <- fromFiles.Run(ctx) }()

	// The same objects, through a (fake) API server.
	client := fake.NewClientset()
	var objs []*file.Object
	for _, name := range []string{"namespace.yaml", "greeter-service.yaml", examples.EndpointsFile, "workloads.yaml", "more/extra.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		o, problems := file.ParseFile(name, data)
		if len(problems) > 0 {
			t.Fatalf("%s: %v", name, problems)
		}
		objs = append(objs, o...)
	}
	for _, o := range objs {
		var err error
		c := context.Background()
		switch obj := o.Obj.(type) {
		case *corev1.Namespace:
			_, err = client.CoreV1().Namespaces().Create(c, obj, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = client.CoreV1().Services(obj.Namespace).Create(c, obj, metav1.CreateOptions{})
		case *corev1.Pod:
			_, err = client.CoreV1().Pods(obj.Namespace).Create(c, obj, metav1.CreateOptions{})
		case *corev1.Node:
			_, err = client.CoreV1().Nodes().Create(c, obj, metav1.CreateOptions{})
		case *discoveryv1.EndpointSlice:
			_, err = client.DiscoveryV1().EndpointSlices(obj.Namespace).Create(c, obj, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	fromCluster, err := kube.New(client, kube.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- fromCluster.Run(ctx) }()

	deadline := time.Now().Add(20 * time.Second)
	for !fromFiles.HasSynced() || !fromCluster.HasSynced() {
		if time.Now().After(deadline) {
			t.Fatal("the registries never synced")
		}
		time.Sleep(5 * time.Millisecond)
	}
	defer func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}()

	want, got := fromCluster.Services(), fromFiles.Services()
	if len(got) != 3 || len(got) != len(want) {
		t.Fatalf("services from files %d, from the cluster %d; want 3 each", len(got), len(want))
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Fatalf("service %d:\nfiles   %+v\ncluster %+v", i, got[i], want[i])
		}
		for _, p := range want[i].Ports {
			we := fromCluster.Endpoints(want[i].Hostname, p.Port, nil)
			ge := fromFiles.Endpoints(got[i].Hostname, p.Port, nil)
			if len(ge) != len(we) {
				t.Fatalf("%s:%d: %d endpoints from files, %d from the cluster", want[i].Hostname, p.Port, len(ge), len(we))
			}
			for j := range we {
				if !ge[j].Equal(we[j]) {
					t.Fatalf("%s:%d endpoint %d:\nfiles   %+v\ncluster %+v", want[i].Hostname, p.Port, j, ge[j], we[j])
				}
			}
		}
	}
	db := fromFiles.Endpoints("db.demo.svc.cluster.local", 5432, nil)
	if len(db) != 3 || db[0].Locality.Zone != "zone-x" || db[1].Health != model.Draining || db[1].Locality.Zone != "eu-west-a" {
		t.Fatalf("db endpoints: %+v %+v %+v", db[0], db[1], db[2])
	}
	for _, ip := range []string{"127.0.0.11", "127.0.0.13", "10.1.0.1"} {
		w, k := fromFiles.WorkloadByIP(ip), fromCluster.WorkloadByIP(ip)
		if (w == nil) != (k == nil) || (w != nil && (w.Name != k.Name || w.Locality != k.Locality || w.ServiceAccount != k.ServiceAccount)) {
			t.Fatalf("workload of %s: files %+v, cluster %+v", ip, w, k)
		}
	}
}
