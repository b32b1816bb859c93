package kubeconv_test

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// TestEndpointLabelsSharedByAWorkload: the replicas of one workload on
// one Node share one endpoint label map, with Istio's topology labels;
// other Nodes and other labels get their own, and a rebuild hands out
// the same maps again.
func TestEndpointLabelsSharedByAWorkload(t *testing.T) {
	nodes := map[string]*corev1.Node{
		"n1": cvNode("n1", map[string]string{cvLabelRegion: "r", cvLabelZone: "z1"}),
		"n2": cvNode("n2", map[string]string{cvLabelRegion: "r", cvLabelZone: "z2"}),
	}
	pods := map[string]*kubeconv.PodInfo{}
	var eps []discoveryv1.Endpoint
	for i, p := range []struct{ node, version string }{
		{"n1", "v1"}, {"n1", "v1"}, {"n2", "v1"}, {"n1", "v2"},
	} {
		name, ip := fmt.Sprintf("p%d", i), fmt.Sprintf("10.0.0.%d", i+1)
		pods[name] = kubeconv.NewPodInfo(cvPod("ns", name, ip, p.node, map[string]string{"app": "shared-labels", "version": p.version}))
		eps = append(eps, cvEndpoint(cvPodRef(name), true, ip))
	}
	slice := cvSlice("s", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{cvPort(new("http"), 8080)}, eps...)
	svc := cvService(model.Port{Name: "http", Port: 80})
	lookup := kubeconv.EndpointLookup{
		Pod:  func(_, name string) *kubeconv.PodInfo { return pods[name] },
		Node: func(name string) *corev1.Node { return nodes[name] },
	}
	mapOf := func(ep *model.Endpoint) uintptr { return uintptr(reflect.ValueOf(ep.Labels).UnsafePointer()) }

	first := kubeconv.BuildEndpoints(svc, []*discoveryv1.EndpointSlice{slice}, lookup)
	if len(first) != 4 {
		t.Fatalf("got %d endpoints, want 4", len(first))
	}
	want := map[string]string{"app": "shared-labels", "version": "v1", cvLabelRegion: "r", cvLabelZone: "z1",
		"kubernetes.io/hostname": "n1", "topology.istio.io/cluster": "Kubernetes"}
	if !reflect.DeepEqual(first[0].Labels, want) {
		t.Errorf("labels = %v, want %v", first[0].Labels, want)
	}
	if mapOf(first[0]) != mapOf(first[1]) {
		t.Error("two replicas on one Node hold two maps")
	}
	if mapOf(first[0]) == mapOf(first[2]) || mapOf(first[0]) == mapOf(first[3]) {
		t.Error("another Node or other labels share the map")
	}
	again := kubeconv.BuildEndpoints(svc, []*discoveryv1.EndpointSlice{slice}, lookup)
	for i := range again {
		if mapOf(again[i]) != mapOf(first[i]) {
			t.Errorf("endpoint %d: a rebuild made a new map", i)
		}
	}
}

// TestEndpointLabelsWithoutPodSharedByLocality: endpoints without a Pod
// (a selector-less Service's slices) carry their topology's labels, one
// map per Node and locality, and the cluster's alone when neither is
// known.
func TestEndpointLabelsWithoutPodSharedByLocality(t *testing.T) {
	nodes := map[string]*corev1.Node{
		"n1": cvNode("n1", map[string]string{cvLabelRegion: "r", cvLabelZone: "z1"}),
		"n2": cvNode("n2", map[string]string{cvLabelRegion: "r", cvLabelZone: "z2"}),
	}
	var eps []discoveryv1.Endpoint
	for i, node := range []string{"n1", "n1", "n2", ""} {
		ep := cvEndpoint(nil, true, fmt.Sprintf("10.0.1.%d", i+1))
		if node != "" {
			ep.NodeName = new(node)
		}
		eps = append(eps, ep)
	}
	slice := cvSlice("s", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{cvPort(new("http"), 8080)}, eps...)
	svc := cvService(model.Port{Name: "http", Port: 80})
	lookup := kubeconv.EndpointLookup{Node: func(name string) *corev1.Node { return nodes[name] }}
	mapOf := func(ep *model.Endpoint) uintptr { return uintptr(reflect.ValueOf(ep.Labels).UnsafePointer()) }

	first := kubeconv.BuildEndpoints(svc, []*discoveryv1.EndpointSlice{slice}, lookup)
	if len(first) != 4 {
		t.Fatalf("got %d endpoints, want 4", len(first))
	}
	if want := map[string]string{cvLabelRegion: "r", cvLabelZone: "z1", "kubernetes.io/hostname": "n1", "topology.istio.io/cluster": "Kubernetes"}; !reflect.DeepEqual(first[0].Labels, want) {
		t.Errorf("labels = %v, want %v", first[0].Labels, want)
	}
	if mapOf(first[0]) != mapOf(first[1]) {
		t.Error("two endpoints on one Node hold two maps")
	}
	if mapOf(first[0]) == mapOf(first[2]) {
		t.Error("another Node shares the map")
	}
	if want := map[string]string{"topology.istio.io/cluster": "Kubernetes"}; !reflect.DeepEqual(first[3].Labels, want) {
		t.Errorf("an endpoint of no known Node or locality has labels %v, want %v", first[3].Labels, want)
	}
	again := kubeconv.BuildEndpoints(svc, []*discoveryv1.EndpointSlice{slice}, lookup)
	for i := range 3 {
		if mapOf(again[i]) != mapOf(first[i]) {
			t.Errorf("endpoint %d: a rebuild made a new map", i)
		}
	}
}
