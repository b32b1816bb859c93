package kube

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/liveheap"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// The scale of the heap profile the indexes were cut down for: 10 000
// services of 10 endpoints each.
const (
	benchServices  = 10000
	benchEndpoints = 10
)

// benchObjects makes one EndpointSlice per service and the Pods behind it.
func benchObjects() (pods []*kubeconv.PodInfo, slices []*discoveryv1.EndpointSlice) {
	node := func(i int) string { return fmt.Sprintf("node-%d", i%500) }
	for s := range benchServices {
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "ns", Name: fmt.Sprintf("svc-%d-abcde", s),
				Labels: map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("svc-%d", s)},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
		}
		for e := range benchEndpoints {
			i := s*benchEndpoints + e
			ip := benchIP(i)
			name := fmt.Sprintf("svc-%d-%d", s, e)
			nodeName := node(i)
			pods = append(pods, &kubeconv.PodInfo{
				Namespace: "ns", Name: name, UID: "uid",
				NodeName: nodeName, IPs: []string{ip}, Phase: corev1.PodRunning, Ready: true,
			})
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses: []string{ip}, NodeName: &nodeName,
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: name},
			})
		}
		slices = append(slices, slice)
	}
	return pods, slices
}

func benchIP(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255) }

// BenchmarkIndexesHeap reports the heap the Pod and EndpointSlice caches
// and their lookups hold beyond the objects themselves.
func BenchmarkIndexesHeap(b *testing.B) {
	pods, slices := benchObjects()
	var held uint64
	for range b.N {
		before := liveheap.AfterGC()
		idx, byIP := fillBenchIndexes(b, pods, slices)
		after := liveheap.AfterGC()
		runtime.KeepAlive(idx)
		runtime.KeepAlive(byIP)
		held = after - before
	}
	b.ReportMetric(float64(held)/float64(len(pods)), "B/pod")
	b.ReportMetric(float64(held)/(1<<20), "MiB")
}

// BenchmarkPodByIP looks Pods up by IP in full caches.
func BenchmarkPodByIP(b *testing.B) {
	pods, slices := benchObjects()
	idx, _ := fillBenchIndexes(b, pods, slices)
	b.ResetTimer()
	for i := range b.N {
		ip := pods[i%len(pods)].IPs[0]
		if p := idx.podByIP("", ip); p == nil {
			b.Fatalf("no pod for %s", ip)
		}
	}
}

// fillBenchIndexes fills what the informers of one scope keep: the
// caches and both address lookups.
func fillBenchIndexes(b *testing.B, pods []*kubeconv.PodInfo, slices []*discoveryv1.EndpointSlice) (*indexes, *ipKeys) {
	idx, byIP := listIndexes(), newIPKeys(sliceIPs)
	for _, p := range pods {
		if err := idx.add(KindPod, p); err != nil {
			b.Fatal(err)
		}
	}
	for _, s := range slices {
		if err := idx.add(KindEndpointSlice, s); err != nil {
			b.Fatal(err)
		}
		byIP.added(s)
	}
	return idx, byIP
}
