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
	"k8s.io/apimachinery/pkg/util/intstr"
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
		Name: "web-1", Namespace: "shop", UID: "uid-1", ResourceVersion: "42",
		Labels:            map[string]string{"app": "web"},
		OwnerReferences:   orig.OwnerReferences,
		DeletionTimestamp: orig.DeletionTimestamp,
		NodeName:          "node-a",
		ServiceAccount:    "web-sa",
		Phase:             corev1.PodRunning,
		IPs:               []string{"10.0.0.1", "fd00::1"},
		Ready:             true,
	}

	out, err := kube.StripPod(in)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := out.(*kubeconv.PodInfo)
	if !ok {
		t.Fatalf("StripPod returned %T", out)
	}
	if !reflect.DeepEqual(podInfoFields(got), podInfoFields(want)) {
		t.Errorf("StripPod =\n%+v\nwant\n%+v", got, want)
	}
	if !reflect.DeepEqual(in, orig) {
		t.Error("StripPod modified its input")
	}

	again, err := kube.StripPod(got)
	if err != nil {
		t.Fatal(err)
	}
	if again != got {
		t.Errorf("StripPod is not idempotent:\n%+v\nwant\n%+v", again, got)
	}

	// The informer keys its cache and tombstones by the PodInfo's own
	// metadata.
	for _, obj := range []any{got, cache.DeletedFinalStateUnknown{Key: "shop/web-1", Obj: got}} {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err != nil || key != "shop/web-1" {
			t.Errorf("key of %T = %q, %v; want shop/web-1", obj, key, err)
		}
	}
}

// podInfoFields are a PodInfo's exported fields: the shared labels and
// owners it holds alive are no part of its content.
func podInfoFields(p *kubeconv.PodInfo) []any {
	return []any{p.Name, p.Namespace, p.UID, p.ResourceVersion, p.DeletionTimestamp, p.Labels, p.OwnerReferences, p.NodeName, p.ServiceAccount, p.IPs, p.Phase, p.Ready}
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
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "node-a", UID: "uid-n", ResourceVersion: "7",
		Labels: stNodeLabels(),
	}}
	stCheckStrip(t, kube.StripNode, in, want, func(n *corev1.Node) any { return n.DeepCopy() })
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
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "e", ManagedFields: stManaged}}
	tombstone := cache.DeletedFinalStateUnknown{Key: "shop/web-1", Obj: pod}
	sliceTombstone := cache.DeletedFinalStateUnknown{Key: "shop/e", Obj: slice}

	transforms := map[string]func(any) (any, error){
		"StripPod":           kube.StripPod,
		"StripNode":          kube.StripNode,
		"StripService":       kube.StripService,
		"StripEndpointSlice": kube.StripEndpointSlice,
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
		{"slice tombstone", sliceTombstone, ""},
		{"nil", nil, ""},
		{"string", "shop/web-1", ""},
		{"nil pod", (*corev1.Pod)(nil), ""},
		{"nil node", (*corev1.Node)(nil), ""},
		{"nil service", (*corev1.Service)(nil), ""},
		{"nil slice", (*discoveryv1.EndpointSlice)(nil), ""},
		{"pod value, not pointer", *pod, ""},
		{"service", svc, "StripService+StripManagedFields"},
		{"slice", slice, "StripEndpointSlice+StripManagedFields"},
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
	if sliceTombstone.Obj.(*discoveryv1.EndpointSlice).ManagedFields == nil {
		t.Error("the EndpointSlice inside a tombstone was stripped")
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
	case *discoveryv1.EndpointSlice:
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

// stFullService sets every field StripService keeps and many it must
// drop.
func stFullService() *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "cart", Namespace: "shop", UID: "uid-s", ResourceVersion: "9",
			Generation: 2, CreationTimestamp: metav1.Now(),
			Labels: map[string]string{"app": "cart"},
			Annotations: map[string]string{
				kubeconv.ExportToAnnotation: ".", stLastApplied: "{}", "note": "x",
			},
			Finalizers:    []string{"service.kubernetes.io/load-balancer-cleanup"},
			ManagedFields: stManaged,
		},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeLoadBalancer,
			ClusterIP:  "10.96.0.1",
			ClusterIPs: []string{"10.96.0.1", "fd00::1"},
			Selector:   map[string]string{"app": "cart"},
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, AppProtocol: new("http"),
				Port: 80, TargetPort: intstr.FromString("web"), NodePort: 30080,
			}},
			ExternalIPs:           []string{"192.0.2.1"},
			SessionAffinity:       corev1.ServiceAffinityClientIP,
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			IPFamilyPolicy:        new(corev1.IPFamilyPolicyPreferDualStack),
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			HealthCheckNodePort:   30999,
			InternalTrafficPolicy: new(corev1.ServiceInternalTrafficPolicyLocal),
			TrafficDistribution:   new(corev1.ServiceTrafficDistributionPreferSameZone),
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{
			Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.9"}},
		}},
	}
}

func TestStripService(t *testing.T) {
	full := stFullService()
	tests := []struct {
		desc string
		in   *corev1.Service
		want *corev1.Service
	}{
		{
			desc: "load balancer",
			in:   full,
			want: &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{
					Name: "cart", Namespace: "shop", UID: "uid-s", ResourceVersion: "9",
					Labels:      map[string]string{"app": "cart"},
					Annotations: map[string]string{kubeconv.ExportToAnnotation: "."},
				},
				Spec: corev1.ServiceSpec{
					Type:       corev1.ServiceTypeLoadBalancer,
					ClusterIP:  "10.96.0.1",
					ClusterIPs: []string{"10.96.0.1", "fd00::1"},
					Selector:   map[string]string{"app": "cart"},
					Ports: []corev1.ServicePort{{
						Name: "http", Protocol: corev1.ProtocolTCP, AppProtocol: new("http"),
						Port: 80, TargetPort: intstr.FromString("web"),
					}},
					InternalTrafficPolicy: new(corev1.ServiceInternalTrafficPolicyLocal),
					TrafficDistribution:   new(corev1.ServiceTrafficDistributionPreferSameZone),
				},
			},
		},
		{
			desc: "external name, no exportTo",
			in: &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{
					Name: "db", Namespace: "shop", ResourceVersion: "3",
					Annotations: map[string]string{"note": "x"}, ManagedFields: stManaged,
				},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"},
			},
			want: &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop", ResourceVersion: "3"},
				Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"},
			},
		},
		{
			desc: "headless, unnamed port",
			in: &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: "shop"},
				Spec: corev1.ServiceSpec{
					ClusterIP: corev1.ClusterIPNone, ClusterIPs: []string{corev1.ClusterIPNone},
					Ports: []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)}},
				},
			},
			want: &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: "shop"},
				Spec: corev1.ServiceSpec{
					ClusterIP: corev1.ClusterIPNone, ClusterIPs: []string{corev1.ClusterIPNone},
					Ports: []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)}},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			stCheckStrip(t, kube.StripService, tt.in, tt.want, func(s *corev1.Service) any { return s.DeepCopy() })
		})
	}
}

func TestStripEndpointSlice(t *testing.T) {
	tests := []struct {
		desc string
		in   *discoveryv1.EndpointSlice
		want *discoveryv1.EndpointSlice
	}{
		{
			desc: "every field",
			in: &discoveryv1.EndpointSlice{
				TypeMeta: metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
				ObjectMeta: metav1.ObjectMeta{
					Name: "cart-abc", Namespace: "shop", UID: "uid-e", ResourceVersion: "11",
					GenerateName: "cart-", Generation: 4, CreationTimestamp: metav1.Unix(1000, 0),
					Labels: map[string]string{
						discoveryv1.LabelServiceName: "cart",
						discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
					},
					Annotations: map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "t"},
					OwnerReferences: []metav1.OwnerReference{{
						APIVersion: "v1", Kind: "Service", Name: "cart", UID: "uid-s",
					}},
					ManagedFields: stManaged,
				},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports: []discoveryv1.EndpointPort{{
					Name: new("http"), Port: new(int32(8080)), Protocol: new(corev1.ProtocolTCP), AppProtocol: new("http"),
				}},
				Endpoints: []discoveryv1.Endpoint{{
					Addresses: []string{"10.0.0.1"},
					Conditions: discoveryv1.EndpointConditions{
						Ready: new(false), Serving: new(true), Terminating: new(true),
					},
					Hostname: new("cart-1"),
					TargetRef: &corev1.ObjectReference{
						Kind: "Pod", Namespace: "shop", Name: "cart-1", UID: "uid-p",
						APIVersion: "v1", ResourceVersion: "5", FieldPath: "spec",
					},
					DeprecatedTopology: map[string]string{"kubernetes.io/hostname": "node-a"},
					NodeName:           new("node-a"),
					Zone:               new("z1"),
					Hints:              &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "z1"}}},
				}, {
					Addresses: []string{"10.0.0.2"},
				}},
			},
			want: &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{
					Name: "cart-abc", Namespace: "shop", UID: "uid-e", ResourceVersion: "11",
					CreationTimestamp: metav1.Unix(1000, 0),
					Labels:            map[string]string{discoveryv1.LabelServiceName: "cart"},
				},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080))}},
				Endpoints: []discoveryv1.Endpoint{{
					Addresses: []string{"10.0.0.1"},
					Conditions: discoveryv1.EndpointConditions{
						Ready: new(false), Serving: new(true), Terminating: new(true),
					},
					TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "cart-1"},
					NodeName:  new("node-a"),
					Zone:      new("z1"),
				}, {
					Addresses: []string{"10.0.0.2"},
				}},
			},
		},
		{
			desc: "no service name, unnamed port without number",
			in: &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: "x", Namespace: "shop", Labels: map[string]string{"a": "b"}},
				AddressType: discoveryv1.AddressTypeFQDN,
				Ports:       []discoveryv1.EndpointPort{{}},
			},
			want: &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: "x", Namespace: "shop"},
				AddressType: discoveryv1.AddressTypeFQDN,
				Ports:       []discoveryv1.EndpointPort{{}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			stCheckStrip(t, kube.StripEndpointSlice, tt.in, tt.want, func(s *discoveryv1.EndpointSlice) any { return s.DeepCopy() })
		})
	}
}

// stCheckStrip checks that a transform turns in into a new object equal
// to want without modifying in, and that it is idempotent.
func stCheckStrip[T any](t *testing.T, strip func(any) (any, error), in, want T, deepCopy func(T) any) {
	t.Helper()
	orig := deepCopy(in)
	out, err := strip(in)
	if err != nil {
		t.Fatal(err)
	}
	if out == any(in) {
		t.Error("the transform returned the original object; it must build a new one")
	}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("got\n%+v\nwant\n%+v", out, want)
	}
	if !reflect.DeepEqual(any(in), orig) {
		t.Error("the transform modified its input")
	}
	again, err := strip(out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, want) {
		t.Errorf("the transform is not idempotent:\n%+v", again)
	}
}
