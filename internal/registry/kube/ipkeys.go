package kube

import (
	"slices"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// ipKeys finds the cached objects that hold an IP address. client-go's
// indexes keep a set (a Go map) per index value: one per IP, nearly all
// of one element, cost about 800 bytes a Pod. Here an IP held by one
// object costs one map entry.
//
// The informers' event handlers maintain it, after the store changed, so
// it may lag the store: callers read the objects from the store by key
// and check that they still hold the IP. An object the index does not
// know yet is found once its own handler has run, and that handler
// queues what it affects, as it would without the index.
type ipKeys struct {
	// ips gives the addresses an object holds (PodIPs or SliceIPs).
	ips func(obj any) []string
	mu  sync.RWMutex // guards one and shared
	// one maps an IP held by a single object to its key.
	one map[string]string
	// shared maps an IP held by several objects (host-network Pods,
	// terminated Pods, slices during a rollout) to their keys; an IP is
	// never in both maps.
	shared map[string][]string
}

func newIPKeys(ips func(obj any) []string) *ipKeys {
	return &ipKeys{ips: ips, one: map[string]string{}, shared: map[string][]string{}}
}

// podIPs are the addresses a Pod is found by.
func podIPs(obj any) []string {
	if pod, ok := obj.(*kubeconv.PodInfo); ok {
		return pod.IPs
	}
	return nil
}

// sliceIPs are the endpoint addresses of an EndpointSlice.
func sliceIPs(obj any) []string {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil
	}
	var ips []string
	for _, ep := range slice.Endpoints {
		ips = append(ips, ep.Addresses...)
	}
	return ips
}

// added records an object the store now holds.
func (x *ipKeys) added(obj any) { x.updated(nil, obj) }

// deleted forgets an object, possibly a cache.DeletedFinalStateUnknown.
func (x *ipKeys) deleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	x.updated(obj, nil)
}

// updated moves an object from the IPs of oldObj to those of newObj;
// either may be nil.
func (x *ipKeys) updated(oldObj, newObj any) {
	var oldIPs, newIPs []string
	if oldObj != nil {
		oldIPs = x.ips(oldObj)
	}
	if newObj != nil {
		newIPs = x.ips(newObj)
	}
	if slices.Equal(oldIPs, newIPs) {
		return
	}
	obj := newObj
	if obj == nil {
		obj = oldObj
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, ip := range oldIPs {
		if !slices.Contains(newIPs, ip) {
			x.remove(ip, key)
		}
	}
	for _, ip := range newIPs {
		x.add(ip, key)
	}
}

func (x *ipKeys) add(ip, key string) {
	if keys, ok := x.shared[ip]; ok {
		if !slices.Contains(keys, key) {
			x.shared[ip] = append(keys, key)
		}
		return
	}
	if k, ok := x.one[ip]; ok {
		if k != key {
			delete(x.one, ip)
			x.shared[ip] = []string{k, key}
		}
		return
	}
	x.one[ip] = key
}

func (x *ipKeys) remove(ip, key string) {
	if keys, ok := x.shared[ip]; ok {
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == key })
		if len(keys) == 1 {
			delete(x.shared, ip)
			x.one[ip] = keys[0]
		} else {
			x.shared[ip] = keys
		}
		return
	}
	if x.one[ip] == key {
		delete(x.one, ip)
	}
}

// keys appends to buf the keys of the objects recorded under ip.
func (x *ipKeys) keys(ip string, buf []string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if k, ok := x.one[ip]; ok {
		return append(buf, k)
	}
	return append(buf, x.shared[ip]...)
}

// objects yields the objects of store recorded under ip that hold it.
func (x *ipKeys) objects(store cache.Store, ip string, yield func(any) bool) bool {
	var buf [2]string
	for _, key := range x.keys(ip, buf[:0]) {
		obj, exists, err := store.GetByKey(key)
		if err != nil || !exists || !slices.Contains(x.ips(obj), ip) {
			continue
		}
		if !yield(obj) {
			return false
		}
	}
	return true
}
