package audit

import (
	"cmp"
	"encoding"
	"encoding/json"
	"maps"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// compareObjects compares what an informer caches of one kind with what
// a LIST gives, both transformed as the informer transforms (listed
// objects through kube.Transform). Objects are matched by namespace and
// name and compared by UID and resourceVersion; for the kinds the
// transform rebuilds (Pods, Nodes, Services, EndpointSlices), what it
// keeps is compared field by field too, so that a transform that is not
// idempotent, or a cache that holds other fields than its
// resourceVersion says, shows.
func compareObjects(kind string, cached, listed []any) []Difference {
	byKey := func(objs []any) map[string]metav1.Object {
		m := make(map[string]metav1.Object, len(objs))
		for _, o := range objs {
			if a, err := meta.Accessor(o); err == nil {
				m[objectKey(a)] = a
			}
		}
		return m
	}
	c, l := byKey(cached), byKey(listed)
	var out []Difference
	add := func(obj, field, cache, list string) {
		out = append(out, Difference{Kind: kind, Object: obj, Field: field, Cache: cache, List: list})
	}
	for _, k := range slices.Sorted(maps.Keys(l)) {
		lo := l[k]
		co, ok := c[k]
		if !ok {
			add(k, "", absent, "resourceVersion "+lo.GetResourceVersion())
			continue
		}
		if co.GetUID() != lo.GetUID() {
			add(k, "metadata.uid", string(co.GetUID()), string(lo.GetUID()))
		}
		if co.GetResourceVersion() != lo.GetResourceVersion() {
			add(k, "metadata.resourceVersion", co.GetResourceVersion(), lo.GetResourceVersion())
		}
		for _, f := range keptFields(co, lo) {
			add(k, f.name, f.cache, f.list)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c)) {
		if _, ok := l[k]; !ok {
			add(k, "", "resourceVersion "+c[k].GetResourceVersion(), absent)
		}
	}
	slices.SortStableFunc(out, func(a, b Difference) int { return cmp.Compare(a.Object, b.Object) })
	return out
}

func objectKey(o metav1.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

type fieldDiff struct{ name, cache, list string }

// field is one field a transform keeps, read from the transformed
// object.
type field[T any] struct {
	name string
	get  func(T) any
}

// podFields are what kubeconv.PodInfo keeps of a Pod, named as in the
// Pod.
var podFields = []field[*kubeconv.PodInfo]{
	{"metadata.labels", func(p *kubeconv.PodInfo) any { return p.Labels }},
	{"metadata.ownerReferences", func(p *kubeconv.PodInfo) any { return p.OwnerReferences }},
	{"metadata.deletionTimestamp", func(p *kubeconv.PodInfo) any { return p.DeletionTimestamp }},
	{"spec.nodeName", func(p *kubeconv.PodInfo) any { return p.NodeName }},
	{"spec.serviceAccountName", func(p *kubeconv.PodInfo) any { return p.ServiceAccount }},
	{"status.podIPs", func(p *kubeconv.PodInfo) any { return p.IPs }},
	{"status.phase", func(p *kubeconv.PodInfo) any { return p.Phase }},
	{"status.conditions[Ready]", func(p *kubeconv.PodInfo) any { return p.Ready }},
}

// nodeFields are what kube.StripNode keeps of a Node besides its
// identity.
var nodeFields = []field[*corev1.Node]{
	{"metadata.labels", func(n *corev1.Node) any { return n.Labels }},
}

// kubeServiceFields are what kube.StripService keeps of a Service besides
// its identity, named by their JSON paths.
var kubeServiceFields = []field[*corev1.Service]{
	{"metadata.labels", func(s *corev1.Service) any { return s.Labels }},
	{"metadata.annotations", func(s *corev1.Service) any { return s.Annotations }},
	{"spec.type", func(s *corev1.Service) any { return s.Spec.Type }},
	{"spec.clusterIP", func(s *corev1.Service) any { return s.Spec.ClusterIP }},
	{"spec.clusterIPs", func(s *corev1.Service) any { return s.Spec.ClusterIPs }},
	{"spec.externalName", func(s *corev1.Service) any { return s.Spec.ExternalName }},
	{"spec.selector", func(s *corev1.Service) any { return s.Spec.Selector }},
	{"spec.ports", func(s *corev1.Service) any { return s.Spec.Ports }},
	{"spec.internalTrafficPolicy", func(s *corev1.Service) any { return s.Spec.InternalTrafficPolicy }},
	{"spec.trafficDistribution", func(s *corev1.Service) any { return s.Spec.TrafficDistribution }},
}

// kubeSliceFields are what kube.StripEndpointSlice keeps of an EndpointSlice
// besides its identity, named by their JSON paths.
var kubeSliceFields = []field[*discoveryv1.EndpointSlice]{
	{"metadata.labels", func(s *discoveryv1.EndpointSlice) any { return s.Labels }},
	{"metadata.creationTimestamp", func(s *discoveryv1.EndpointSlice) any { return s.CreationTimestamp }},
	{"addressType", func(s *discoveryv1.EndpointSlice) any { return s.AddressType }},
	{"ports", func(s *discoveryv1.EndpointSlice) any { return s.Ports }},
	// endpoints: compared one by one (compareSliceEndpoints).
}

// keptFields compares the fields the transform keeps of the kinds it
// rebuilds; other kinds are cached whole (less managed fields) and
// compared by resourceVersion alone.
func keptFields(cached, listed any) []fieldDiff {
	switch c := cached.(type) {
	case *kubeconv.PodInfo:
		if l, ok := listed.(*kubeconv.PodInfo); ok {
			return compareFields(podFields, c, l)
		}
	case *corev1.Node:
		if l, ok := listed.(*corev1.Node); ok {
			return compareFields(nodeFields, c, l)
		}
	case *corev1.Service:
		if l, ok := listed.(*corev1.Service); ok {
			return compareFields(kubeServiceFields, c, l)
		}
	case *discoveryv1.EndpointSlice:
		if l, ok := listed.(*discoveryv1.EndpointSlice); ok {
			return append(compareFields(kubeSliceFields, c, l), compareSliceEndpoints(c, l)...)
		}
	}
	return nil
}

// compareSliceEndpoints compares a slice's endpoints one by one, each
// named by its first address ("endpoints[192.0.2.1]"), so that a slice of
// a hundred endpoints that lost one change shows that one.
func compareSliceEndpoints(cached, listed *discoveryv1.EndpointSlice) []fieldDiff {
	byAddress := func(s *discoveryv1.EndpointSlice) map[string]discoveryv1.Endpoint {
		m := make(map[string]discoveryv1.Endpoint, len(s.Endpoints))
		for _, e := range s.Endpoints {
			if len(e.Addresses) > 0 {
				m[e.Addresses[0]] = e
			}
		}
		return m
	}
	c, l := byAddress(cached), byAddress(listed)
	var out []fieldDiff
	addrs := slices.Concat(slices.Collect(maps.Keys(c)), slices.Collect(maps.Keys(l)))
	slices.Sort(addrs)
	for _, addr := range slices.Compact(addrs) {
		ce, inCache := c[addr]
		le, inList := l[addr]
		cv, lv := absent, absent
		if inCache {
			cv = render(ce)
		}
		if inList {
			lv = render(le)
		}
		if cv != lv {
			out = append(out, fieldDiff{"endpoints[" + addr + "]", cv, lv})
		}
	}
	return out
}

func compareFields[T any](fields []field[T], cached, listed T) []fieldDiff {
	var out []fieldDiff
	for _, f := range fields {
		if c, l := render(f.get(cached)), render(f.get(listed)); c != l {
			out = append(out, fieldDiff{f.name, c, l})
		}
	}
	return out
}

// render writes a value as the page shows it: strings and names (health,
// protocols) as they are, anything else as JSON (maps with sorted keys).
func render(v any) string {
	r := reflect.ValueOf(v)
	if !r.IsValid() || r.Kind() == reflect.Pointer && r.IsNil() {
		return "null"
	}
	if t, ok := v.(encoding.TextMarshaler); ok {
		if b, err := t.MarshalText(); err == nil {
			return string(b)
		}
	}
	if r.Kind() == reflect.String {
		return r.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
