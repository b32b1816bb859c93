package kube

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// listAll lists every watched kind through the registry's own pagers.
func listAll(t *testing.T, c *Controller, pageSize int64) map[string][]any {
	t.Helper()
	out := map[string][]any{}
	for _, kind := range Kinds {
		out[kind] = []any{}
		for _, p := range c.ListPagers(kind, pageSize) {
			err := p.EachListItem(context.Background(), metav1.ListOptions{}, func(o runtime.Object) error {
				out[kind] = append(out[kind], o)
				return nil
			})
			if err != nil {
				t.Fatalf("listing %s: %v", kind, err)
			}
		}
	}
	return out
}

// modelText renders every service of d and its endpoints per port.
func modelText(d model.ServiceDiscovery) string {
	var s string
	for _, svc := range d.Services() {
		s += fmt.Sprintf("%+v\n", *svc)
		for _, p := range svc.Ports {
			for _, ep := range d.EndpointsByPortName(svc.Hostname, p.Name, nil) {
				s += fmt.Sprintf("  %s %+v\n", p.Name, *ep)
			}
		}
	}
	return s
}

// TestModelFromListEqualsLiveModel builds the model afresh from a LIST of
// every kind and finds it equal to the one the informers built, with pods,
// node locality, two slices and a service selected out by namespace
// labels; it also checks that the caches hold what the list gives once
// transformed.
func TestModelFromListEqualsLiveModel(t *testing.T) {
	ns := env.Namespace(t, map[string]string{"mesh": "on"})
	off := env.Namespace(t, nil)
	node := nodeName(t, "n1")
	mustCreateNode(t, node, map[string]string{corev1.LabelTopologyRegion: "r", corev1.LabelTopologyZone: "z"})
	mustCreatePod(t, ns, "api-1", "192.0.2.1", node, map[string]string{"app": "api"})
	mustCreatePod(t, ns, "api-2", "192.0.2.2", node, map[string]string{"app": "api", "v": "2"})
	mustCreateService(t, ns, "api", grpcPort)
	mustCreateService(t, off, "hidden", grpcPort)
	mustCreateSlice(t, slice(ns, "api-a", "api", 9090, "grpc-api", sliceEndpoint{ip: "192.0.2.1", pod: "api-1"}))
	mustCreateSlice(t, slice(ns, "api-b", "api", 9090, "grpc-api",
		sliceEndpoint{ip: "192.0.2.2", pod: "api-2"}, sliceEndpoint{ip: "192.0.2.3", ready: ptr.To(false)}))

	c, _ := startController(t, Options{Namespaces: []string{ns, off}, DiscoverySelectors: []string{"mesh=on"}})
	host := model.ServiceHostname("api", ns, model.DefaultDomainSuffix)
	waitEndpoints(t, c, host, 8080, "192.0.2.1:9090 HEALTHY r/z/, 192.0.2.2:9090 HEALTHY r/z/, 192.0.2.3:9090 UNHEALTHY ")

	listed := listAll(t, c, 2)
	rebuilt, err := c.ModelFrom(listed)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := modelText(rebuilt), modelText(c); got != want {
		t.Fatalf("model from the list:\n%s\nlive model:\n%s", got, want)
	}
	if rebuilt.GetService(model.ServiceHostname("hidden", off, model.DefaultDomainSuffix)) != nil {
		t.Fatal("a service of an unselected namespace is in the model built from the list")
	}

	// The caches hold the listed objects, transformed.
	for _, kind := range Kinds {
		cached := map[string]string{}
		for _, o := range c.Cached(kind) {
			m, _ := meta.Accessor(o)
			cached[m.GetNamespace()+"/"+m.GetName()] = m.GetResourceVersion()
		}
		for _, o := range listed[kind] {
			m, _ := meta.Accessor(o)
			key := m.GetNamespace() + "/" + m.GetName()
			if kind != KindNode && kind != KindNamespace && m.GetNamespace() != ns && m.GetNamespace() != off {
				t.Fatalf("%s %s listed outside the watched namespaces", kind, key)
			}
			if rv, ok := cached[key]; !ok || rv != m.GetResourceVersion() {
				// Only other tests' objects may change meanwhile.
				if m.GetNamespace() == ns {
					t.Fatalf("%s %s: cached resourceVersion %q, listed %q", kind, key, rv, m.GetResourceVersion())
				}
			}
		}
	}
	for _, o := range c.Cached(KindPod) {
		if _, ok := o.(*kubeconv.PodInfo); !ok {
			t.Fatalf("a cached pod is a %T", o)
		}
	}
}

// TestRelistReplaysTheKind asks for a relist of EndpointSlices: their
// informer lists again (every slice comes back as an update), the other
// kinds do not, and the model stays as it was.
func TestRelistReplaysTheKind(t *testing.T) {
	ns := env.Namespace(t, nil)
	var sliceUpdates, serviceUpdates atomic.Int64
	c, err := New(env.API, Options{Namespaces: []string{ns}, OnInformerEvent: func(kind, event string) {
		switch {
		case kind == KindEndpointSlice && event == "update":
			sliceUpdates.Add(1)
		case kind == KindService && event == "update":
			serviceUpdates.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	runController(t, c, newRecorder(env.Client, ns))
	mustCreateService(t, ns, "web", grpcPort)
	mustCreateSlice(t, slice(ns, "web-a", "web", 9090, "grpc-api", sliceEndpoint{ip: "192.0.2.1"}))
	mustCreateSlice(t, slice(ns, "web-b", "web", 9090, "grpc-api", sliceEndpoint{ip: "192.0.2.2"}))
	host := model.ServiceHostname("web", ns, model.DefaultDomainSuffix)
	waitEndpoints(t, c, host, 8080, "192.0.2.1:9090 HEALTHY , 192.0.2.2:9090 HEALTHY ")
	before := modelText(c)

	testenv.Eventually(t, "a slice watch open", func() (bool, string) {
		n, err := c.Relist(KindEndpointSlice)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0, "no slice watch to end"
	})
	testenv.Eventually(t, "both slices replayed", func() (bool, string) {
		n := sliceUpdates.Load()
		return n >= 2, fmt.Sprintf("%d slice updates", n)
	})
	if n := serviceUpdates.Load(); n != 0 {
		t.Fatalf("%d service updates: a slice relist replayed services", n)
	}
	if after := modelText(c); after != before {
		t.Fatalf("model changed by a relist of unchanged slices:\n%s\nwas:\n%s", after, before)
	}
	if _, err := c.Relist("Gateway"); err == nil {
		t.Fatal("relist of an unwatched kind: no error")
	}
}
