package file

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/meshpilot/meshpilot/internal/registry/crd"
)

// IstioStore is the Istio objects of the folder as a crd.Store, so that
// the consumers of a cluster's Istio objects (DestinationRules,
// VirtualServices, ServiceEntries, WorkloadEntries) serve a folder's the
// same way. Reads return the objects in force (a file's last good
// content, the first definition of an object in path order) and are safe
// for concurrent use. After each reload of the folder it emits, on the
// registry's Run goroutine, one crd.Event for every Istio object added,
// removed, changed, or moved to another place in the files (so that a
// status report names the right line). It is a crd.Locator: Where says
// where each object was read.
type IstioStore struct {
	r *Registry

	mu       sync.Mutex // guards handlers
	handlers []crd.EventHandler
}

var (
	_ crd.Store   = (*IstioStore)(nil)
	_ crd.Locator = (*IstioStore)(nil)
)

// Istio returns the registry's Istio objects as a crd.Store. Append its
// handlers before Run.
func (r *Registry) Istio() *IstioStore { return r.istio }

// AppendEventHandler adds a handler of change events; call it before the
// registry runs.
func (s *IstioStore) AppendEventHandler(h crd.EventHandler) {
	s.mu.Lock()
	s.handlers = append(s.handlers, h)
	s.mu.Unlock()
}

// DestinationRules lists every DestinationRule, ordered by namespace and name.
func (s *IstioStore) DestinationRules() []*networkingv1.DestinationRule {
	return listIstio[*networkingv1.DestinationRule](s.r.view.Load(), crd.DestinationRule)
}

// VirtualServices lists every VirtualService, ordered by namespace and name.
func (s *IstioStore) VirtualServices() []*networkingv1.VirtualService {
	return listIstio[*networkingv1.VirtualService](s.r.view.Load(), crd.VirtualService)
}

// ServiceEntries lists every ServiceEntry, ordered by namespace and name.
func (s *IstioStore) ServiceEntries() []*networkingv1.ServiceEntry {
	return listIstio[*networkingv1.ServiceEntry](s.r.view.Load(), crd.ServiceEntry)
}

// WorkloadEntries lists every WorkloadEntry, ordered by namespace and name.
func (s *IstioStore) WorkloadEntries() []*networkingv1.WorkloadEntry {
	return listIstio[*networkingv1.WorkloadEntry](s.r.view.Load(), crd.WorkloadEntry)
}

// DestinationRule returns one DestinationRule, or nil.
func (s *IstioStore) DestinationRule(namespace, name string) *networkingv1.DestinationRule {
	return getIstio[*networkingv1.DestinationRule](s.r.view.Load(), crd.DestinationRule, namespace, name)
}

// VirtualService returns one VirtualService, or nil.
func (s *IstioStore) VirtualService(namespace, name string) *networkingv1.VirtualService {
	return getIstio[*networkingv1.VirtualService](s.r.view.Load(), crd.VirtualService, namespace, name)
}

// ServiceEntry returns one ServiceEntry, or nil.
func (s *IstioStore) ServiceEntry(namespace, name string) *networkingv1.ServiceEntry {
	return getIstio[*networkingv1.ServiceEntry](s.r.view.Load(), crd.ServiceEntry, namespace, name)
}

// WorkloadEntry returns one WorkloadEntry, or nil.
func (s *IstioStore) WorkloadEntry(namespace, name string) *networkingv1.WorkloadEntry {
	return getIstio[*networkingv1.WorkloadEntry](s.r.view.Load(), crd.WorkloadEntry, namespace, name)
}

// PeerAuthentications lists every PeerAuthentication, ordered by namespace and name.
func (s *IstioStore) PeerAuthentications() []*securityv1.PeerAuthentication {
	return listIstio[*securityv1.PeerAuthentication](s.r.view.Load(), crd.PeerAuthentication)
}

// AuthorizationPolicies lists every AuthorizationPolicy, ordered by namespace and name.
func (s *IstioStore) AuthorizationPolicies() []*securityv1.AuthorizationPolicy {
	return listIstio[*securityv1.AuthorizationPolicy](s.r.view.Load(), crd.AuthorizationPolicy)
}

// PeerAuthentication returns one PeerAuthentication, or nil.
func (s *IstioStore) PeerAuthentication(namespace, name string) *securityv1.PeerAuthentication {
	return getIstio[*securityv1.PeerAuthentication](s.r.view.Load(), crd.PeerAuthentication, namespace, name)
}

// AuthorizationPolicy returns one AuthorizationPolicy, or nil.
func (s *IstioStore) AuthorizationPolicy(namespace, name string) *securityv1.AuthorizationPolicy {
	return getIstio[*securityv1.AuthorizationPolicy](s.r.view.Load(), crd.AuthorizationPolicy, namespace, name)
}

// Where returns "<file>:<line> (document <n>)" for an object in force
// ("(document <n>, items[i])" for an item of a List), else "".
func (s *IstioStore) Where(kind crd.Kind, namespace, name string) string {
	o := s.r.view.Load().istio[kind][namespace+"/"+name]
	if o == nil {
		return ""
	}
	return o.location()
}

// location is where an object was read, as configstatus.Ref.Where says it.
func (o *Object) location() string {
	s := fmt.Sprintf("%s:%d (document %d", o.File, o.Line, o.Document)
	if o.Prefix != "" {
		s += ", " + o.Prefix
	}
	return s + ")"
}

func listIstio[T any](v *view, k crd.Kind) []T {
	objs := v.istio[k]
	out := make([]T, 0, len(objs))
	for _, key := range sortedObjectKeys(objs) {
		if t, ok := objs[key].Obj.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

func getIstio[T any](v *view, k crd.Kind, namespace, name string) T {
	var zero T
	if o := v.istio[k][namespace+"/"+name]; o != nil {
		if t, ok := o.Obj.(T); ok {
			return t
		}
	}
	return zero
}

// sortedObjectKeys orders "<namespace>/<name>" keys by namespace, then
// name (a plain string order would put "a-b/x" before "a/x").
func sortedObjectKeys(objs map[string]*Object) []string {
	keys := make([]string, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		oa, ob := objs[a], objs[b]
		return cmp.Or(cmp.Compare(oa.Namespace, ob.Namespace), cmp.Compare(oa.Name, ob.Name))
	})
	return keys
}

// notify emits an event for every Istio object that differs between two
// views, kind by kind in a fixed order, then by namespace and name.
func (s *IstioStore) notify(before, after *view) {
	var events []crd.Event
	for _, k := range []crd.Kind{crd.DestinationRule, crd.VirtualService, crd.ServiceEntry, crd.WorkloadEntry, crd.PeerAuthentication, crd.AuthorizationPolicy,
		crd.HTTPRoute, crd.GRPCRoute, crd.ReferenceGrant} {
		union := map[string]*Object{}
		for key, o := range before.istio[k] {
			union[key] = o
		}
		for key, o := range after.istio[k] {
			union[key] = o
		}
		for _, key := range sortedObjectKeys(union) {
			if old, now := before.istio[k][key], after.istio[k][key]; !sameIstioObject(old, now) {
				o := union[key]
				events = append(events, crd.Event{Kind: k, Namespace: o.Namespace, Name: o.Name})
			}
		}
	}
	if len(events) == 0 {
		return
	}
	s.mu.Lock()
	handlers := slices.Clone(s.handlers)
	s.mu.Unlock()
	for _, ev := range events {
		s.r.log.Debug("Istio object changed", "object", ev.String())
		for _, h := range handlers {
			h(ev)
		}
	}
}

// sameIstioObject reports whether two versions of an object (nil: none)
// have the same content and place. A file that did not change keeps its
// parsed objects, so most comparisons end at the pointer.
func sameIstioObject(a, b *Object) bool {
	switch {
	case a == b:
		return true
	case a == nil || b == nil:
		return false
	case a.location() != b.location():
		return false
	}
	ma, sa := istioParts(a.Obj)
	mb, sb := istioParts(b.Obj)
	if ma == nil {
		// A Gateway API object: plain Go types.
		return equality.Semantic.DeepEqual(a.Obj, b.Obj)
	}
	return equality.Semantic.DeepEqual(ma, mb) && proto.Equal(sa, sb)
}

// istioParts returns the metadata and spec of an Istio object.
func istioParts(obj any) (*metav1.ObjectMeta, proto.Message) {
	switch o := obj.(type) {
	case *networkingv1.DestinationRule:
		return &o.ObjectMeta, &o.Spec
	case *networkingv1.VirtualService:
		return &o.ObjectMeta, &o.Spec
	case *networkingv1.ServiceEntry:
		return &o.ObjectMeta, &o.Spec
	case *networkingv1.WorkloadEntry:
		return &o.ObjectMeta, &o.Spec
	case *securityv1.PeerAuthentication:
		return &o.ObjectMeta, &o.Spec
	case *securityv1.AuthorizationPolicy:
		return &o.ObjectMeta, &o.Spec
	}
	return nil, nil
}
