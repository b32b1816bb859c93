package audit

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

func objMeta(ns, name, uid, rv string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + uid), ResourceVersion: rv}
}

func TestCompareObjects(t *testing.T) {
	slice := func(name, uid, rv string) any {
		return &discoveryv1.EndpointSlice{ObjectMeta: objMeta("ns", name, uid, rv)}
	}
	pod := func(rv string, labels map[string]string, ready bool) any {
		m := objMeta("ns", "p", "1", rv)
		return &kubeconv.PodInfo{
			Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
			Labels: labels, IPs: []string{"192.0.2.1"}, Ready: ready,
		}
	}
	service := func(rv string, target int32) any {
		return &corev1.Service{ObjectMeta: objMeta("ns", "s", "1", rv), Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(target)}},
		}}
	}
	sliceWith := func(rv string, ready bool) any {
		return &discoveryv1.EndpointSlice{ObjectMeta: objMeta("ns", "a", "1", rv), Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{"192.0.2.1"}, Conditions: discoveryv1.EndpointConditions{Ready: new(ready)},
		}}}
	}
	node := func(rv, zone string) any {
		m := objMeta("", "n1", "1", rv)
		m.Labels = map[string]string{corev1.LabelTopologyZone: zone}
		return &corev1.Node{ObjectMeta: m}
	}
	for _, tc := range []struct {
		name           string
		kind           string
		cached, listed []any
		want           []Difference
	}{
		{name: "equal", kind: "EndpointSlice",
			cached: []any{slice("a", "1", "10"), slice("b", "2", "11")},
			listed: []any{slice("b", "2", "11"), slice("a", "1", "10")}},
		{name: "lost update", kind: "EndpointSlice",
			cached: []any{slice("a", "1", "10")}, listed: []any{slice("a", "1", "12")},
			want: []Difference{{Kind: "EndpointSlice", Object: "ns/a", Field: "metadata.resourceVersion", Cache: "10", List: "12"}}},
		{name: "lost add and delete", kind: "EndpointSlice",
			cached: []any{slice("gone", "1", "10")}, listed: []any{slice("new", "2", "12")},
			want: []Difference{
				{Kind: "EndpointSlice", Object: "ns/gone", Cache: "resourceVersion 10", List: absent},
				{Kind: "EndpointSlice", Object: "ns/new", Cache: absent, List: "resourceVersion 12"},
			}},
		{name: "recreated under the same name", kind: "EndpointSlice",
			cached: []any{slice("a", "1", "10")}, listed: []any{slice("a", "2", "12")},
			want: []Difference{
				{Kind: "EndpointSlice", Object: "ns/a", Field: "metadata.uid", Cache: "uid-1", List: "uid-2"},
				{Kind: "EndpointSlice", Object: "ns/a", Field: "metadata.resourceVersion", Cache: "10", List: "12"},
			}},
		{name: "pod: what the transform keeps", kind: "Pod",
			cached: []any{pod("5", map[string]string{"v": "1"}, true)},
			listed: []any{pod("7", map[string]string{"v": "2"}, false)},
			want: []Difference{
				{Kind: "Pod", Object: "ns/p", Field: "metadata.resourceVersion", Cache: "5", List: "7"},
				{Kind: "Pod", Object: "ns/p", Field: "metadata.labels", Cache: `{"v":"1"}`, List: `{"v":"2"}`},
				{Kind: "Pod", Object: "ns/p", Field: "status.conditions[Ready]", Cache: "true", List: "false"},
			}},
		{name: "pod: same resourceVersion, other content", kind: "Pod",
			cached: []any{pod("5", nil, true)}, listed: []any{pod("5", map[string]string{"a": "b"}, true)},
			want: []Difference{{Kind: "Pod", Object: "ns/p", Field: "metadata.labels", Cache: "null", List: `{"a":"b"}`}}},
		{name: "service: what the transform keeps", kind: "Service",
			cached: []any{service("5", 8080)}, listed: []any{service("5", 9090)},
			want: []Difference{{Kind: "Service", Object: "ns/s", Field: "spec.ports",
				Cache: `[{"port":80,"targetPort":8080}]`, List: `[{"port":80,"targetPort":9090}]`}}},
		{name: "slice: what the transform keeps", kind: "EndpointSlice",
			cached: []any{sliceWith("5", true)}, listed: []any{sliceWith("5", false)},
			want: []Difference{{Kind: "EndpointSlice", Object: "ns/a", Field: "endpoints[192.0.2.1]",
				Cache: `{"addresses":["192.0.2.1"],"conditions":{"ready":true}}`,
				List:  `{"addresses":["192.0.2.1"],"conditions":{"ready":false}}`}}},
		{name: "node labels, cluster scoped", kind: "Node",
			cached: []any{node("3", "z1")}, listed: []any{node("4", "z2")},
			want: []Difference{
				{Kind: "Node", Object: "n1", Field: "metadata.resourceVersion", Cache: "3", List: "4"},
				{Kind: "Node", Object: "n1", Field: "metadata.labels", Cache: `{"topology.kubernetes.io/zone":"z1"}`, List: `{"topology.kubernetes.io/zone":"z2"}`},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertDifferences(t, compareObjects(tc.kind, tc.cached, tc.listed), tc.want)
		})
	}
}

func TestCompareModels(t *testing.T) {
	svc := func(name string, ports ...model.Port) *model.Service {
		return &model.Service{Hostname: model.ServiceHostname(name, "ns", ""), Name: name, Namespace: "ns", Ports: ports}
	}
	http := model.Port{Name: "http", Port: 80, TargetPort: 8080, Protocol: model.HTTP}
	grpc := model.Port{Name: "grpc", Port: 90, TargetPort: 9090, Protocol: model.GRPC}
	ep := func(addr string, h model.Health, zone string) *model.Endpoint {
		return &model.Endpoint{Address: addr, Port: 8080, ServicePortName: "http", Health: h, Namespace: "ns", Locality: model.Locality{Region: "r", Zone: zone}}
	}
	store := func(fill func(s *model.Store)) *model.Store {
		s := model.NewStore()
		fill(s)
		return s
	}
	ref := serviceRef{"ns", "a"}
	for _, tc := range []struct {
		name          string
		live, rebuilt *model.Store
		want          []Difference
	}{
		{name: "equal",
			live:    store(func(s *model.Store) { s.Update(svc("a", http), []*model.Endpoint{ep("192.0.2.1", model.Healthy, "z")}) }),
			rebuilt: store(func(s *model.Store) { s.Update(svc("a", http), []*model.Endpoint{ep("192.0.2.1", model.Healthy, "z")}) })},
		{name: "endpoint fields and presence",
			live: store(func(s *model.Store) {
				s.Update(svc("a", http), []*model.Endpoint{ep("192.0.2.1", model.Healthy, "z1"), ep("192.0.2.2", model.Healthy, "z")})
			}),
			rebuilt: store(func(s *model.Store) {
				s.Update(svc("a", http), []*model.Endpoint{ep("192.0.2.1", model.Unhealthy, "z2"), ep("192.0.2.3", model.Healthy, "z")})
			}),
			want: []Difference{
				{Kind: KindModelEndpoint, Object: "a.ns.svc.cluster.local:80", Field: "endpoint 192.0.2.1 health", Cache: "HEALTHY", List: "UNHEALTHY", service: ref},
				{Kind: KindModelEndpoint, Object: "a.ns.svc.cluster.local:80", Field: "endpoint 192.0.2.1 locality", Cache: "r/z1/", List: "r/z2/", service: ref},
				{Kind: KindModelEndpoint, Object: "a.ns.svc.cluster.local:80", Field: "endpoint 192.0.2.2", Cache: "present", List: absent, service: ref},
				{Kind: KindModelEndpoint, Object: "a.ns.svc.cluster.local:80", Field: "endpoint 192.0.2.3", Cache: absent, List: "present", service: ref},
			}},
		{name: "service fields and presence",
			live: store(func(s *model.Store) {
				s.Update(svc("a", http), nil)
				s.Update(svc("gone"), nil)
			}),
			rebuilt: store(func(s *model.Store) {
				s.Update(svc("a", http, grpc), nil)
				s.Update(svc("new"), nil)
			}),
			want: []Difference{
				{Kind: KindModelService, Object: "a.ns.svc.cluster.local", Field: "ports",
					Cache: `[{"name":"http","port":80,"targetPort":8080,"protocol":"HTTP"}]`,
					List:  `[{"name":"http","port":80,"targetPort":8080,"protocol":"HTTP"},{"name":"grpc","port":90,"targetPort":9090,"protocol":"GRPC"}]`, service: ref},
				{Kind: KindModelService, Object: "gone.ns.svc.cluster.local", Cache: "present", List: absent, service: serviceRef{"ns", "gone"}},
				{Kind: KindModelService, Object: "new.ns.svc.cluster.local", Cache: absent, List: "present", service: serviceRef{"ns", "new"}},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertDifferences(t, compareModels(tc.live.View(), tc.rebuilt.View()), tc.want)
		})
	}
}

// TestTrackCountsAuditsInARow: a difference keeps the time an audit first
// found it while audits keep finding it, and starts again after an audit
// that did not.
func TestTrackCountsAuditsInARow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := func() []Difference {
		return []Difference{{Kind: "Pod", Object: "ns/p", Field: "metadata.labels", Cache: "x"}}
	}
	seen := map[diffKey]tracked{}
	for i, tc := range []struct {
		diffs      []Difference
		since      time.Time
		audits     int
		remembered int
	}{
		{d(), t0, 1, 1},
		{d(), t0, 2, 1},
		{nil, time.Time{}, 0, 0},
		{d(), t0.Add(3 * time.Minute), 1, 1},
	} {
		now := t0.Add(time.Duration(i) * time.Minute)
		seen = track(seen, tc.diffs, now)
		if len(seen) != tc.remembered {
			t.Fatalf("audit %d: %d remembered, want %d", i, len(seen), tc.remembered)
		}
		if len(tc.diffs) > 0 && (tc.diffs[0].Audits != tc.audits || !tc.diffs[0].Since.Equal(tc.since)) {
			t.Fatalf("audit %d: %+v, want %d audits since %v", i, tc.diffs[0], tc.audits, tc.since)
		}
	}
}

func assertDifferences(t *testing.T, got, want []Difference) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("difference %d = %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// TestBothReads: only what the reads before and after the LIST both find
// is a difference, with the later read's values.
func TestBothReads(t *testing.T) {
	lag := Difference{Kind: "Pod", Object: "ns/a", Field: "metadata.resourceVersion", Cache: "4", List: "5"}
	lost := Difference{Kind: "Pod", Object: "ns/b", Field: "metadata.resourceVersion", Cache: "1", List: "3"}
	ahead := Difference{Kind: "Pod", Object: "ns/c", Field: "metadata.resourceVersion", Cache: "9", List: "8"}
	lostLater := lost
	lostLater.Cache = "2"
	assertDifferences(t, both([]Difference{lag, lost}, []Difference{lostLater, ahead}), []Difference{lostLater})
}

// TestKeptFieldsCoverTheTransforms: the fields the audit compares for
// Services and EndpointSlices are every field their transforms keep, so
// that no kept field can differ from the API unseen. A stripped object
// with every field set, less its identity and the audit's fields, must
// be empty.
func TestKeptFieldsCoverTheTransforms(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: "cart", Namespace: "shop", UID: "uid-s", ResourceVersion: "9", Generation: 2,
			CreationTimestamp: metav1.Unix(1000, 0),
			Labels:            map[string]string{"app": "cart"},
			Annotations:       map[string]string{kubeconv.ExportToAnnotation: ".", "note": "x"},
		},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"},
			ExternalName: "x.example", Selector: map[string]string{"app": "cart"},
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, AppProtocol: new("http"),
				Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080,
			}},
			SessionAffinity:       corev1.ServiceAffinityClientIP,
			InternalTrafficPolicy: new(corev1.ServiceInternalTrafficPolicyLocal),
			TrafficDistribution:   new(corev1.ServiceTrafficDistributionPreferSameZone),
		},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "cart-1", Namespace: "shop", UID: "uid-e", ResourceVersion: "11", Generation: 3,
			CreationTimestamp: metav1.Unix(1000, 0),
			Labels:            map[string]string{discoveryv1.LabelServiceName: "cart", discoveryv1.LabelManagedBy: "x"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080)), Protocol: new(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"192.0.2.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
			Hostname:   new("cart-1"),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "cart-1", UID: "uid-p"},
			NodeName:   new("node-a"),
			Zone:       new("z1"),
		}},
	}
	for _, tc := range []struct {
		obj    any
		fields []string
	}{
		{svc, fieldNames(kubeServiceFields)},
		{slice, append(fieldNames(kubeSliceFields), "endpoints")},
	} {
		left := transformedJSON(t, tc.obj)
		for _, f := range append([]string{"metadata.name", "metadata.namespace", "metadata.uid", "metadata.resourceVersion"}, tc.fields...) {
			deletePath(left, strings.Split(f, "."))
		}
		pruneEmpty(left)
		if len(left) > 0 {
			t.Errorf("%T: the transform keeps fields the audit does not compare: %v", tc.obj, left)
		}
	}
}

// TestKeptPodFieldsCoverPodInfo: the fields the audit compares for Pods
// are every field a PodInfo keeps, so that no kept field can differ from
// the API unseen. A PodInfo names its fields in JSON as its own struct
// does, not as the Pod: podInfoJSON says which is which.
func TestKeptPodFieldsCoverPodInfo(t *testing.T) {
	podInfoJSON := map[string]string{
		"metadata.labels":            "labels",
		"metadata.ownerReferences":   "ownerReferences",
		"metadata.deletionTimestamp": "deletionTimestamp",
		"spec.nodeName":              "NodeName",
		"spec.serviceAccountName":    "ServiceAccount",
		"status.podIPs":              "IPs",
		"status.phase":               "Phase",
		"status.conditions[Ready]":   "Ready",
	}
	now := metav1.Unix(1000, 0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1", Namespace: "shop", UID: "uid-p", ResourceVersion: "7", Generation: 2,
			CreationTimestamp: now, DeletionTimestamp: &now, DeletionGracePeriodSeconds: new(int64(30)),
			Labels:          map[string]string{"app": "web"},
			Annotations:     map[string]string{"note": "x"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc", UID: "uid-rs", Controller: new(true)}},
			Finalizers:      []string{"example.com/f"},
		},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "web-sa", Hostname: "web-1"},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "192.0.2.1", PodIPs: []corev1.PodIP{{IP: "192.0.2.1"}}, HostIP: "192.0.2.100",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	left := transformedJSON(t, pod)
	for _, k := range []string{"name", "namespace", "uid", "resourceVersion"} {
		delete(left, k)
	}
	for _, f := range podFields {
		k, ok := podInfoJSON[f.name]
		if !ok {
			t.Fatalf("the audit compares %s, which podInfoJSON does not name", f.name)
		}
		delete(left, k)
	}
	if len(left) > 0 {
		t.Errorf("PodInfo keeps fields the audit does not compare: %v", left)
	}
}

// transformedJSON is obj through the informers' transform, as decoded
// JSON.
func transformedJSON(t *testing.T, obj any) map[string]any {
	t.Helper()
	stripped, err := kube.Transform(obj)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(stripped)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func fieldNames[T any](fields []field[T]) []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.name
	}
	return out
}

// deletePath deletes a dotted path from decoded JSON.
func deletePath(m map[string]any, path []string) {
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	if sub, ok := m[path[0]].(map[string]any); ok {
		deletePath(sub, path[1:])
	}
}

// pruneEmpty deletes the objects of decoded JSON that hold nothing
// (a zero status is written as {"loadBalancer":{}}).
func pruneEmpty(m map[string]any) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			pruneEmpty(sub)
			if len(sub) == 0 {
				delete(m, k)
			}
		}
	}
}
