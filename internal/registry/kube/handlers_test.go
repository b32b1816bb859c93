package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

func TestUnchangedUpdates(t *testing.T) {
	pod := func(rv string, mutate func(*kubeconv.PodInfo)) *kubeconv.PodInfo {
		p := &kubeconv.PodInfo{
			Name: "p", Namespace: "ns", ResourceVersion: rv, Labels: map[string]string{"app": "a"},
			NodeName: "n1", ServiceAccount: "sa", IPs: []string{"10.0.0.1"}, Phase: corev1.PodRunning, Ready: true,
		}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	node := func(rv, zone string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: rv,
			Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
	}
	nodeWith := func(rv string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: rv, Labels: labels}}
	}
	svc := func(rv string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", ResourceVersion: rv}}
	}
	for _, tc := range []struct {
		name     string
		old, new any
		want     bool
	}{
		{"relist: same resourceVersion", svc("5"), svc("5"), true},
		{"service changed", svc("5"), svc("6"), false},
		{"node heartbeat", node("1", "z1"), node("2", "z1"), true},
		{"node zone changed", node("1", "z1"), node("2", "z2"), false},
		{"node deprecated zone changed",
			nodeWith("1", map[string]string{corev1.LabelFailureDomainBetaZone: "z1"}),
			nodeWith("2", map[string]string{corev1.LabelFailureDomainBetaZone: "z2"}), false},
		{"node deprecated region added",
			nodeWith("1", map[string]string{corev1.LabelTopologyZone: "z1"}),
			nodeWith("2", map[string]string{corev1.LabelTopologyZone: "z1", corev1.LabelFailureDomainBetaRegion: "r1"}), false},
		{"node subzone changed",
			nodeWith("1", map[string]string{"topology.istio.io/subzone": "rack1"}),
			nodeWith("2", map[string]string{"topology.istio.io/subzone": "rack2"}), false},
		{"pod locality label changed",
			pod("1", func(p *kubeconv.PodInfo) {
				p.Labels = map[string]string{"app": "a", "topology.istio.io/locality": "r1.z1"}
			}),
			pod("2", func(p *kubeconv.PodInfo) {
				p.Labels = map[string]string{"app": "a", "topology.istio.io/locality": "r1.z2"}
			}), false},
		{"pod status churn", pod("1", nil), pod("2", nil), true},
		{"pod labels changed", pod("1", nil), pod("2", func(p *kubeconv.PodInfo) { p.Labels = map[string]string{"app": "b"} }), false},
		{"pod IP changed", pod("1", nil), pod("2", func(p *kubeconv.PodInfo) { p.IPs = []string{"10.0.0.2"} }), false},
		{"pod not ready", pod("1", nil), pod("2", func(p *kubeconv.PodInfo) { p.Ready = false }), false},
		{"pod finished", pod("1", nil), pod("2", func(p *kubeconv.PodInfo) { p.Phase = corev1.PodSucceeded }), false},
		{"pod deleting", pod("1", nil), pod("2", func(p *kubeconv.PodInfo) { p.DeletionTimestamp = &metav1.Time{} }), false},
		{"deleting pod's status churn",
			pod("1", func(p *kubeconv.PodInfo) { p.DeletionTimestamp = &metav1.Time{} }),
			pod("2", func(p *kubeconv.PodInfo) { p.DeletionTimestamp = &metav1.Time{} }), true},
		{"tombstone", cache.DeletedFinalStateUnknown{Key: "ns/p"}, pod("2", nil), false},
	} {
		if got := unchanged(tc.old, tc.new); got != tc.want {
			t.Errorf("%s: unchanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}
