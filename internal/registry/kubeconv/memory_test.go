package kubeconv_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meshpilot/meshpilot/internal/liveheap"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// The memory benchmarks measure what is held, not what is allocated:
// heap in use after a garbage collection, with and without the objects or
// the model. Objects are decoded from JSON one by one, as an informer
// decodes them, so that no string is shared unless a transform shares it.
// Run them once per count:
//
//	go test ./internal/registry/kubeconv -run '^$' -bench 'CachedBytes|ModelBytes' -benchtime 1x -count 5

// memScale is meshbench's S=10 000 E=10: services, endpoints each, over
// memNamespaces namespaces and memNodes nodes in three zones.
const (
	memServices   = 10_000
	memEndpoints  = 10
	memNamespaces = 100
	memNodes      = 100
)

// memManaged is a managedFields entry as the API server writes one.
func memManaged(manager string) []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{
		Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Time: new(metav1.Unix(1_700_000_000, 0)), FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:ports":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:selector":{}}}`)},
	}}
}

func memNamespace(i int) string { return fmt.Sprintf("team-%d", i%memNamespaces) }
func memNode(i int) string {
	return fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i%memNodes/10, i%memNodes)
}
func memZone(node int) string { return fmt.Sprintf("us-east-1%c", 'a'+node%3) }
func memPodName(s, e int) string {
	return fmt.Sprintf("svc-%d-7d9f8b6c5d-%05d", s, e)
}
func memPodIP(s, e int) string {
	n := s*memEndpoints + e
	return fmt.Sprintf("10.%d.%d.%d", 1+n>>16, n>>8&255, n&255)
}

// memService is service s as the API server returns it.
func memService(s int) *corev1.Service {
	name := fmt.Sprintf("svc-%d", s)
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: memNamespace(s), UID: types.UID(fmt.Sprintf("5f0c1d2e-0000-4000-8000-%012d", s)),
			ResourceVersion: fmt.Sprint(1000 + s), CreationTimestamp: metav1.Unix(1_700_000_000, 0),
			Labels:        map[string]string{"app": name},
			ManagedFields: memManaged("kubectl-client-side-apply"),
		},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: fmt.Sprintf("10.96.%d.%d", s>>8, s&255),
			ClusterIPs: []string{fmt.Sprintf("10.96.%d.%d", s>>8, s&255)},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: new(corev1.IPFamilyPolicySingleStack),
			InternalTrafficPolicy: new(corev1.ServiceInternalTrafficPolicyCluster),
			SessionAffinity:       corev1.ServiceAffinityNone,
			Selector:              map[string]string{"app": name},
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080),
			}},
		},
	}
}

// memSlice is the one EndpointSlice of service s as the slice controller
// writes it.
func memSlice(s int) *discoveryv1.EndpointSlice {
	name := fmt.Sprintf("svc-%d", s)
	out := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-x7k2p", GenerateName: name + "-", Namespace: memNamespace(s), Generation: 1,
			UID:             types.UID(fmt.Sprintf("6a1b2c3d-0000-4000-8000-%012d", s)),
			ResourceVersion: fmt.Sprint(2000 + s), CreationTimestamp: metav1.Unix(1_700_000_000, 0),
			Labels: map[string]string{
				discoveryv1.LabelServiceName: name,
				discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
				"app":                        name,
			},
			Annotations: map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2023-11-14T22:13:20Z"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Service", Name: name, UID: types.UID(fmt.Sprintf("5f0c1d2e-0000-4000-8000-%012d", s)),
				Controller: new(true), BlockOwnerDeletion: new(true),
			}},
			ManagedFields: memManaged("endpointslice-controller.k8s.io"),
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080)), Protocol: new(corev1.ProtocolTCP)}},
	}
	for e := range memEndpoints {
		node := s*memEndpoints + e
		out.Endpoints = append(out.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{memPodIP(s, e)},
			Conditions: discoveryv1.EndpointConditions{Ready: new(true), Serving: new(true), Terminating: new(false)},
			NodeName:   new(memNode(node)),
			Zone:       new(memZone(node % memNodes)),
			TargetRef: &corev1.ObjectReference{
				Kind: "Pod", Namespace: memNamespace(s), Name: memPodName(s, e),
				UID: types.UID(fmt.Sprintf("7c2d3e4f-0000-4000-8000-%012d", node)),
			},
		})
	}
	return out
}

// memPod is endpoint e of service s as the API server returns the Pod a
// Deployment makes (labels app, pod-template-hash and version, owned by
// its ReplicaSet), less its containers (the transform drops them, and
// they are freed before anything is measured).
func memPod(s, e int) *corev1.Pod {
	name := fmt.Sprintf("svc-%d", s)
	n := s*memEndpoints + e
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: memPodName(s, e), Namespace: memNamespace(s), ResourceVersion: fmt.Sprint(3000 + n),
			UID:    types.UID(fmt.Sprintf("7c2d3e4f-0000-4000-8000-%012d", n)),
			Labels: map[string]string{"app": name, "pod-template-hash": "7d9f8b6c5d", "version": "v1"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name + "-7d9f8b6c5d",
				UID:        types.UID(fmt.Sprintf("8d3e4f50-0000-4000-8000-%012d", s)),
				Controller: new(true), BlockOwnerDeletion: new(true),
			}},
		},
		Spec: corev1.PodSpec{NodeName: memNode(n), ServiceAccountName: "default"},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: memPodIP(s, e), PodIPs: []corev1.PodIP{{IP: memPodIP(s, e)}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
}

func memNodeObject(i int) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: memNode(i), Labels: map[string]string{
		corev1.LabelTopologyRegion: "us-east-1", corev1.LabelTopologyZone: memZone(i),
		corev1.LabelHostname: memNode(i),
	}}}
}

// decoded round-trips obj through JSON into a new T, as an informer
// receives it.
func decoded[T any](b *testing.B, obj any) *T {
	raw, err := json.Marshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	out := new(T)
	if err := json.Unmarshal(raw, out); err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkCachedBytes reports the heap an informer cache holds per
// object (B/object) of each kind, with the transform meshpilot applied
// before (managed fields dropped) and the one it applies now: one object
// per service, but for Pods, memEndpoints per service, so that what the
// replicas of one workload share shows. The store's own index is not
// counted.
func BenchmarkCachedBytes(b *testing.B) {
	stripManaged := func(o any) any {
		out, _ := kubeconv.StripManagedFields(o)
		return out
	}
	for _, kind := range []struct {
		name   string
		n      int
		decode func(b *testing.B, i int) any
		strip  func(any) any
	}{
		{"Service", memServices, func(b *testing.B, i int) any { return decoded[corev1.Service](b, memService(i)) },
			func(o any) any { return kubeconv.StrippedService(o.(*corev1.Service)) }},
		{"EndpointSlice", memServices, func(b *testing.B, i int) any { return decoded[discoveryv1.EndpointSlice](b, memSlice(i)) },
			func(o any) any { return kubeconv.StrippedEndpointSlice(o.(*discoveryv1.EndpointSlice)) }},
		{"Pod", memServices * memEndpoints, func(b *testing.B, i int) any {
			return decoded[corev1.Pod](b, memPod(i/memEndpoints, i%memEndpoints))
		}, func(o any) any { return kubeconv.NewPodInfo(o.(*corev1.Pod)) }},
	} {
		for _, tr := range []struct {
			name      string
			transform func(any) any
		}{
			{"managedFields", stripManaged},
			{"stripped", kind.strip},
		} {
			b.Run(kind.name+"/"+tr.name, func(b *testing.B) {
				held := make([]any, kind.n)
				for b.Loop() {
					clear(held)
					before := liveheap.AfterGC()
					for i := range held {
						held[i] = tr.transform(kind.decode(b, i))
					}
					after := liveheap.AfterGC()
					b.ReportMetric(float64(after-before)/float64(kind.n), "B/object")
				}
				runtime.KeepAlive(held)
			})
		}
	}
}

// memObjects are the stripped objects of the S=10 000 E=10 cluster,
// looked up as the registry's indexes look them up.
type memObjects struct {
	services []*corev1.Service
	slices   [][]*discoveryv1.EndpointSlice // by service
	pods     map[string]*kubeconv.PodInfo   // by "<namespace>/<name>"
	nodes    map[string]*corev1.Node
}

func newMemObjects(b *testing.B) *memObjects {
	o := &memObjects{pods: map[string]*kubeconv.PodInfo{}, nodes: map[string]*corev1.Node{}}
	for i := range memNodes {
		n := memNodeObject(i)
		o.nodes[n.Name] = n
	}
	for s := range memServices {
		o.services = append(o.services, kubeconv.StrippedService(decoded[corev1.Service](b, memService(s))))
		o.slices = append(o.slices, []*discoveryv1.EndpointSlice{kubeconv.StrippedEndpointSlice(decoded[discoveryv1.EndpointSlice](b, memSlice(s)))})
		for e := range memEndpoints {
			p := kubeconv.NewPodInfo(decoded[corev1.Pod](b, memPod(s, e)))
			o.pods[p.Namespace+"/"+p.Name] = p
		}
	}
	return o
}

func (o *memObjects) lookup() kubeconv.EndpointLookup {
	return kubeconv.EndpointLookup{
		Pod:  func(namespace, name string) *kubeconv.PodInfo { return o.pods[namespace+"/"+name] },
		Node: func(name string) *corev1.Node { return o.nodes[name] },
	}
}

// BenchmarkModelBytes builds the model of the S=10 000 E=10 cluster from
// its cached (stripped) objects, as the registry's first sync does, and
// reports the heap the model holds per endpoint (B/endpoint), the
// objects aside. B/op and allocs/op are those of the whole build.
func BenchmarkModelBytes(b *testing.B) {
	objs := newMemObjects(b)
	lookup := objs.lookup()
	b.ReportAllocs()
	var store *model.Store
	for b.Loop() {
		store = nil
		before := liveheap.AfterGC()
		store = model.NewStore()
		for i, s := range objs.services {
			svc := kubeconv.ConvertService(s, model.DefaultDomainSuffix)
			store.Update(svc, kubeconv.BuildEndpoints(svc, objs.slices[i], lookup))
		}
		after := liveheap.AfterGC()
		if _, eps := store.Len(); eps != memServices*memEndpoints {
			b.Fatalf("%d endpoints, want %d", eps, memServices*memEndpoints)
		}
		b.ReportMetric(float64(after-before)/(memServices*memEndpoints), "B/endpoint")
	}
	runtime.KeepAlive(store)
	runtime.KeepAlive(objs)
}
