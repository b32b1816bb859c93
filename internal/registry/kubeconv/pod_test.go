package kubeconv_test

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// TestPodForIP: an address without a targetRef belongs to a running Pod
// of the slice's own namespace that is not being deleted: a hostNetwork
// IP is shared by Pods of many namespaces, and a finished or deleting
// Pod may keep an IP a new Pod already has.
func TestPodForIP(t *testing.T) {
	pod := func(ns, name string, phase corev1.PodPhase, deleting bool) *kubeconv.PodInfo {
		p := &kubeconv.PodInfo{Namespace: ns, Name: name, Phase: phase, IPs: []string{"10.0.0.1"}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	const running, pending, succeeded, failed = corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed
	for _, tc := range []struct {
		desc       string
		namespace  string
		candidates []*kubeconv.PodInfo
		want       string // namespace/name, "" for none
	}{
		{"none", "ns", nil, ""},
		{"running pod of the namespace", "ns", []*kubeconv.PodInfo{pod("ns", "a", running, false)}, "ns/a"},
		{"pod of another namespace", "ns", []*kubeconv.PodInfo{pod("other", "a", running, false)}, ""},
		{"hostNetwork IP shared across namespaces", "ns",
			[]*kubeconv.PodInfo{pod("aaa", "x", running, false), pod("ns", "b", running, false), pod("zzz", "y", running, false)}, "ns/b"},
		{"pending", "ns", []*kubeconv.PodInfo{pod("ns", "a", pending, false)}, ""},
		{"unknown phase", "ns", []*kubeconv.PodInfo{pod("ns", "a", "", false)}, ""},
		{"succeeded", "ns", []*kubeconv.PodInfo{pod("ns", "a", succeeded, false)}, ""},
		{"failed", "ns", []*kubeconv.PodInfo{pod("ns", "a", failed, false)}, ""},
		{"deleting", "ns", []*kubeconv.PodInfo{pod("ns", "a", running, true)}, ""},
		{"finished and deleting pods pass over to the live one", "ns",
			[]*kubeconv.PodInfo{pod("ns", "a", succeeded, false), pod("ns", "b", running, true), pod("ns", "c", running, false)}, "ns/c"},
		{"two live pods: first by name", "ns",
			[]*kubeconv.PodInfo{pod("ns", "b", running, false), pod("ns", "a", running, false)}, "ns/a"},
		{"any namespace: first by namespace, then name", "",
			[]*kubeconv.PodInfo{pod("ns-b", "a", running, false), pod("ns-a", "z", running, false), pod("ns-a", "y", running, true)}, "ns-a/z"},
		{"nil candidate", "ns", []*kubeconv.PodInfo{nil, pod("ns", "a", running, false)}, "ns/a"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for range 2 {
				got := ""
				if p := kubeconv.PodForIP(tc.namespace, slices.Values(tc.candidates)); p != nil {
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

func TestNewPodInfo(t *testing.T) {
	if kubeconv.NewPodInfo(nil) != nil {
		t.Error("NewPodInfo(nil) is not nil")
	}
	ready := []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	for _, tc := range []struct {
		desc   string
		status corev1.PodStatus
		ips    []string
		ready  bool
	}{
		{"every family", corev1.PodStatus{PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}, Conditions: ready}, []string{"10.0.0.1", "fd00::1"}, true},
		{"podIP alone", corev1.PodStatus{PodIP: "10.0.0.1"}, []string{"10.0.0.1"}, false},
		{"not ready", corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}, []string{"10.0.0.1"}, false},
		{"no IP yet", corev1.PodStatus{}, nil, false},
	} {
		p := kubeconv.NewPodInfo(&corev1.Pod{Status: tc.status})
		if !slices.Equal(p.IPs, tc.ips) || p.Ready != tc.ready {
			t.Errorf("%s: IPs %v, ready %v; want %v, %v", tc.desc, p.IPs, p.Ready, tc.ips, tc.ready)
		}
	}
}

func TestPodInfoDeepCopy(t *testing.T) {
	p := kubeconv.NewPodInfo(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "web-sa"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}},
	})
	c := p.DeepCopyObject().(*kubeconv.PodInfo)
	if !reflect.DeepEqual(p, c) {
		t.Fatalf("copy differs:\n%+v\n%+v", c, p)
	}
	c.Labels["app"] = "changed"
	c.IPs[0] = "10.9.9.9"
	if p.Labels["app"] != "web" || p.IPs[0] != "10.0.0.1" {
		t.Error("the copy shares labels or IPs with the original")
	}
}

// TestNewPodInfoSharesLabelsAndOwners: Pods of equal labels and owner
// references (the replicas of one ReplicaSet) share one labels map and
// one owners slice; Pods that differ in either do not.
func TestNewPodInfoSharesLabelsAndOwners(t *testing.T) {
	owner := func(name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: types.UID("uid-" + name), Controller: new(true)}}
	}
	pod := func(labels map[string]string, owners []metav1.OwnerReference) *kubeconv.PodInfo {
		return kubeconv.NewPodInfo(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: labels, OwnerReferences: owners}})
	}
	web := map[string]string{"app": "web", "pod-template-hash": "abc", "version": "v1"}
	for _, tc := range []struct {
		desc       string
		a, b       *kubeconv.PodInfo
		shareLabel bool
	}{
		{"replicas of one ReplicaSet", pod(web, owner("web-abc")), pod(maps.Clone(web), owner("web-abc")), true},
		{"other labels", pod(web, owner("web-abc")), pod(map[string]string{"app": "web", "pod-template-hash": "abc", "version": "v2"}, owner("web-abc")), false},
		{"one label more", pod(web, owner("web-abc")), pod(map[string]string{"app": "web", "pod-template-hash": "abc", "version": "v1", "x": ""}, owner("web-abc")), false},
		{"other owner", pod(web, owner("web-abc")), pod(maps.Clone(web), owner("web-def")), false},
		{"no owner", pod(web, owner("web-abc")), pod(maps.Clone(web), nil), false},
		{"a key's length moves into its value", pod(map[string]string{"ab": "c"}, nil), pod(map[string]string{"a": "bc"}, nil), false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := reflect.ValueOf(tc.a.Labels).UnsafePointer() == reflect.ValueOf(tc.b.Labels).UnsafePointer(); got != tc.shareLabel {
				t.Errorf("labels %v and %v share one map: %v, want %v", tc.a.Labels, tc.b.Labels, got, tc.shareLabel)
			}
			sameOwners := len(tc.a.OwnerReferences) > 0 && len(tc.b.OwnerReferences) > 0 && &tc.a.OwnerReferences[0] == &tc.b.OwnerReferences[0]
			if sameOwners != tc.shareLabel {
				t.Errorf("owners share one slice: %v, want %v", sameOwners, tc.shareLabel)
			}
		})
	}
}

// TestNewPodInfoKeepsLabelsAndOwners: what the shared copies hold is
// what the Pod held, and the Pod's own map and slice stay its own.
func TestNewPodInfoKeepsLabelsAndOwners(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		labels map[string]string
		owners []metav1.OwnerReference
	}{
		{"none", nil, nil},
		{"labels only", map[string]string{"app": "web", "empty": ""}, nil},
		{"owners only", nil, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n", UID: "u"}}},
		{"controller and blocking owner", map[string]string{"app": "web"}, []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc", UID: "u1", Controller: new(true), BlockOwnerDeletion: new(true)},
			{APIVersion: "example.com/v1", Kind: "Thing", Name: "t", UID: "u2", Controller: new(false)},
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: tc.labels, OwnerReferences: tc.owners}}
			orig := in.DeepCopy()
			p := kubeconv.NewPodInfo(in)
			if !reflect.DeepEqual(p.Labels, orig.Labels) || !reflect.DeepEqual(p.OwnerReferences, orig.OwnerReferences) {
				t.Errorf("kept labels %v, owners %+v; want %v, %+v", p.Labels, p.OwnerReferences, orig.Labels, orig.OwnerReferences)
			}
			if len(in.Labels) > 0 && reflect.ValueOf(p.Labels).UnsafePointer() == reflect.ValueOf(in.Labels).UnsafePointer() {
				t.Error("the PodInfo holds the decoded Pod's own label map")
			}
			if len(in.OwnerReferences) > 0 && &p.OwnerReferences[0] == &in.OwnerReferences[0] {
				t.Error("the PodInfo holds the decoded Pod's own owner references")
			}
		})
	}
}
