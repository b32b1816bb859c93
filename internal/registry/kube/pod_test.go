package kube_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/registry/kube"
)

// TestPodForIP: an address without a targetRef belongs to a running Pod
// of the slice's own namespace that is not being deleted: a hostNetwork
// IP is shared by Pods of many namespaces, and a finished or deleting
// Pod may keep an IP a new Pod already has.
func TestPodForIP(t *testing.T) {
	pod := func(ns, name string, phase corev1.PodPhase, deleting bool) *kube.PodInfo {
		p := &kube.PodInfo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Phase: phase, IPs: []string{"10.0.0.1"}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	const running, pending, succeeded, failed = corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed
	for _, tc := range []struct {
		desc       string
		namespace  string
		candidates []*kube.PodInfo
		want       string // namespace/name, "" for none
	}{
		{"none", "ns", nil, ""},
		{"running pod of the namespace", "ns", []*kube.PodInfo{pod("ns", "a", running, false)}, "ns/a"},
		{"pod of another namespace", "ns", []*kube.PodInfo{pod("other", "a", running, false)}, ""},
		{"hostNetwork IP shared across namespaces", "ns",
			[]*kube.PodInfo{pod("aaa", "x", running, false), pod("ns", "b", running, false), pod("zzz", "y", running, false)}, "ns/b"},
		{"pending", "ns", []*kube.PodInfo{pod("ns", "a", pending, false)}, ""},
		{"unknown phase", "ns", []*kube.PodInfo{pod("ns", "a", "", false)}, ""},
		{"succeeded", "ns", []*kube.PodInfo{pod("ns", "a", succeeded, false)}, ""},
		{"failed", "ns", []*kube.PodInfo{pod("ns", "a", failed, false)}, ""},
		{"deleting", "ns", []*kube.PodInfo{pod("ns", "a", running, true)}, ""},
		{"finished and deleting pods pass over to the live one", "ns",
			[]*kube.PodInfo{pod("ns", "a", succeeded, false), pod("ns", "b", running, true), pod("ns", "c", running, false)}, "ns/c"},
		{"two live pods: first by name", "ns",
			[]*kube.PodInfo{pod("ns", "b", running, false), pod("ns", "a", running, false)}, "ns/a"},
		{"any namespace: first by namespace, then name", "",
			[]*kube.PodInfo{pod("ns-b", "a", running, false), pod("ns-a", "z", running, false), pod("ns-a", "y", running, true)}, "ns-a/z"},
		{"nil candidate", "ns", []*kube.PodInfo{nil, pod("ns", "a", running, false)}, "ns/a"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for range 2 {
				got := ""
				if p := kube.PodForIP(tc.namespace, slices.Values(tc.candidates)); p != nil {
					got = p.Namespace + "/" + p.Name
				}
				if got != tc.want {
					t.Fatalf("PodForIP(%q, %v) = %q, want %q", tc.namespace, tc.candidates, got, tc.want)
				}
				slices.Reverse(tc.candidates)
			}
		})
	}
}
