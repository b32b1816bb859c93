package kube_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

var stManaged = []metav1.ManagedFieldsEntry{{
	Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
	FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)},
}}

const stLastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// stFullPod sets every field StripPod keeps and many it must drop.
func stFullPod() *corev1.Pod {
	now := metav1.Now()
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1", Namespace: "shop", UID: "uid-1", ResourceVersion: "42",
			Generation: 3, CreationTimestamp: now, GenerateName: "web-",
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"note": "x", stLastApplied: "{}"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc", UID: "rs-uid", Controller: new(true),
			}},
			Finalizers:                 []string{"example.com/f"},
			ManagedFields:              stManaged,
			DeletionTimestamp:          &now,
			DeletionGracePeriodSeconds: new(int64(30)),
		},
		Spec: corev1.PodSpec{
			NodeName:           "node-a",
			ServiceAccountName: "web-sa",
			Hostname:           "web-1",
			Containers: []corev1.Container{{
				Name: "app", Image: "web:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
			}},
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
		Status: corev1.PodStatus{
			Phase:  corev1.PodRunning,
			PodIP:  "10.0.0.1",
			PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}},
			HostIP: "192.168.0.1",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "r", Message: "m"},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, RestartCount: 2}},
			StartTime:         &now,
		},
	}
}

func TestStripPod(t *testing.T) {
	in := stFullPod()
	orig := in.DeepCopy()
	want := &kubeconv.PodInfo{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1", Namespace: "shop", UID: "uid-1", ResourceVersion: "42",
			Labels:            map[string]string{"app": "web"},
			OwnerReferences:   orig.OwnerReferences,
			DeletionTimestamp: orig.DeletionTimestamp,
		},
		NodeName:       "node-a",
		ServiceAccount: "web-sa",
		Phase:          corev1.PodRunning,
		IPs:            []string{"10.0.0.1", "fd00::1"},
		Ready:          true,
	}

	out, err := kube.StripPod(in)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := out.(*kubeconv.PodInfo)
	if !ok {
		t.Fatalf("StripPod returned %T", out)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("StripPod =\n%+v\nwant\n%+v", got, want)
	}
	if !reflect.DeepEqual(in, orig) {
		t.Error("StripPod modified its input")
	}

	again, err := kube.StripPod(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, want) {
		t.Errorf("StripPod is not idempotent:\n%+v\nwant\n%+v", again, want)
	}
}

func TestStripPodWithoutReadyCondition(t *testing.T) {
	in := stFullPod()
	in.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	out, _ := kube.StripPod(in)
	if out.(*kubeconv.PodInfo).Ready {
		t.Error("a Pod without a Ready condition is Ready")
	}
	in.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	in.Status.PodIPs = nil
	out, _ = kube.StripPod(in)
	if p := out.(*kubeconv.PodInfo); p.Ready || len(p.IPs) != 1 || p.IPs[0] != "10.0.0.1" {
		t.Errorf("not ready, podIP only: %+v", p)
	}
}

// stNodeLabels holds every label a locality may be read from: the
// stripped Node must keep them all.
func stNodeLabels() map[string]string {
	return map[string]string{
		"topology.kubernetes.io/region":            "r1",
		"topology.kubernetes.io/zone":              "z1",
		"failure-domain.beta.kubernetes.io/region": "old-r1",
		"failure-domain.beta.kubernetes.io/zone":   "old-z1",
		"topology.istio.io/subzone":                "rack1",
		"kubernetes.io/hostname":                   "node-a",
	}
}

func TestStripNode(t *testing.T) {
	in := &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "node-a", UID: "uid-n", ResourceVersion: "7",
			Labels:        stNodeLabels(),
			Annotations:   map[string]string{"a": "b"},
			ManagedFields: stManaged,
		},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24", ProviderID: "p"},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.1"}},
			Images:     []corev1.ContainerImage{{Names: []string{"img"}, SizeBytes: 1 << 20}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	orig := in.DeepCopy()
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "node-a", UID: "uid-n", ResourceVersion: "7",
		Labels: stNodeLabels(),
	}}

	out, err := kube.StripNode(in)
	if err != nil {
		t.Fatal(err)
	}
	if out == any(in) {
		t.Error("StripNode returned the original object; it must build a new one")
	}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("StripNode =\n%+v\nwant\n%+v", out, want)
	}
	if !reflect.DeepEqual(in, orig) {
		t.Error("StripNode modified its input")
	}
	again, _ := kube.StripNode(out)
	if !reflect.DeepEqual(again, want) {
		t.Errorf("StripNode is not idempotent:\n%+v", again)
	}
}

func TestStripManagedFields(t *testing.T) {
	tests := []struct {
		desc    string
		obj     metav1.Object
		wantAnn map[string]string
	}{
		{
			desc: "pod keeps other annotations",
			obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
				Name: "p", ManagedFields: stManaged,
				Annotations: map[string]string{"keep": "me", stLastApplied: `{"big":"json"}`},
			}},
			wantAnn: map[string]string{"keep": "me"},
		},
		{
			desc: "service with only last-applied",
			obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{
				Name: "s", ManagedFields: stManaged,
				Annotations: map[string]string{stLastApplied: "{}"},
			}},
			wantAnn: nil,
		},
		{
			desc: "endpoint slice without annotations",
			obj: &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{
				Name: "e", ManagedFields: stManaged,
			}},
			wantAnn: nil,
		},
		{
			desc: "unstructured",
			obj: &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{
					"name":          "c",
					"annotations":   map[string]any{"keep": "me", stLastApplied: "{}"},
					"managedFields": []any{map[string]any{"manager": "kubectl"}},
				},
			}},
			wantAnn: map[string]string{"keep": "me"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			name := tt.obj.GetName()
			out, err := kube.StripManagedFields(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			o := out.(metav1.Object)
			if mf := o.GetManagedFields(); len(mf) != 0 {
				t.Errorf("managedFields = %+v, want none", mf)
			}
			if ann := o.GetAnnotations(); !reflect.DeepEqual(ann, tt.wantAnn) {
				t.Errorf("annotations = %v, want %v", ann, tt.wantAnn)
			}
			if o.GetName() != name {
				t.Errorf("name = %q, want %q", o.GetName(), name)
			}

			snapshot := reflect.ValueOf(out).Elem().Interface()
			again, err := kube.StripManagedFields(out)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(reflect.ValueOf(again).Elem().Interface(), snapshot) {
				t.Error("StripManagedFields is not idempotent")
			}
		})
	}
}

func TestTransformsPassThroughOtherTypes(t *testing.T) {
	pod := stFullPod()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: stManaged}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: stManaged}}
	tombstone := cache.DeletedFinalStateUnknown{Key: "shop/web-1", Obj: pod}

	transforms := map[string]func(any) (any, error){
		"StripPod":           kube.StripPod,
		"StripNode":          kube.StripNode,
		"StripManagedFields": kube.StripManagedFields,
	}
	inputs := []struct {
		desc string
		obj  any
		// skip names the transform for which obj is its own type.
		skip string
	}{
		{"tombstone", tombstone, ""},
		{"tombstone pointer", &tombstone, ""},
		{"nil", nil, ""},
		{"string", "shop/web-1", ""},
		{"nil pod", (*corev1.Pod)(nil), ""},
		{"nil node", (*corev1.Node)(nil), ""},
		{"pod value, not pointer", *pod, ""},
		{"service", svc, "StripManagedFields"},
		{"node", node, "StripNode+StripManagedFields"},
		{"pod", pod, "StripPod+StripManagedFields"},
	}
	for name, transform := range transforms {
		for _, in := range inputs {
			if slices.Contains(strings.Split(in.skip, "+"), name) {
				continue
			}
			t.Run(name+"/"+in.desc, func(t *testing.T) {
				before := stDeepCopy(in.obj)
				out, err := transform(in.obj)
				if err != nil {
					t.Fatal(err)
				}
				if !stSameObject(out, in.obj) {
					t.Errorf("%s replaced a %T it does not handle", name, in.obj)
				}
				if !reflect.DeepEqual(in.obj, before) {
					t.Errorf("%s modified a %T it does not handle", name, in.obj)
				}
			})
		}
	}
	if tombstone.Obj.(*corev1.Pod).ManagedFields == nil {
		t.Error("the Pod inside a tombstone was stripped")
	}
}

// stSameObject reports whether out is in itself: the same pointer, or an
// equal value for non-pointers.
func stSameObject(out, in any) bool {
	if in == nil {
		return out == nil
	}
	vi, vo := reflect.ValueOf(in), reflect.ValueOf(out)
	if vi.Type() != vo.Type() {
		return false
	}
	if vi.Kind() == reflect.Pointer {
		return vi.Pointer() == vo.Pointer()
	}
	return reflect.DeepEqual(out, in)
}

func stDeepCopy(obj any) any {
	switch o := obj.(type) {
	case *corev1.Pod:
		return o.DeepCopy()
	case *corev1.Node:
		return o.DeepCopy()
	case *corev1.Service:
		return o.DeepCopy()
	case corev1.Pod:
		return *o.DeepCopy()
	case cache.DeletedFinalStateUnknown:
		return cache.DeletedFinalStateUnknown{Key: o.Key, Obj: stDeepCopy(o.Obj)}
	case *cache.DeletedFinalStateUnknown:
		return &cache.DeletedFinalStateUnknown{Key: o.Key, Obj: stDeepCopy(o.Obj)}
	}
	return obj
}

func BenchmarkStripPod(b *testing.B) {
	pod := stFullPod()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kube.StripPod(pod); err != nil {
			b.Fatal(err)
		}
	}
}
