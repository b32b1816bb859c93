package kube

import (
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// addHandlers registers the event handlers. Each handler only finds the
// services an event affects and queues their keys.
func (c *Controller) addHandlers() error {
	// ips, when not nil, is kept before anything is queued, so that the
	// rebuilds this event queues find the object by its addresses.
	add := func(inf cache.SharedIndexInformer, kind string, ips *ipKeys, enqueue func(obj any)) error {
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				c.countEvent(kind, "add")
				if ips != nil {
					ips.added(obj)
				}
				enqueue(obj)
			},
			UpdateFunc: func(oldObj, newObj any) {
				c.countEvent(kind, "update")
				if ips != nil {
					ips.updated(oldObj, newObj)
				}
				// A relist (after 410 Gone or a reconnect) replays every
				// object as an update: unchanged ones must cost nothing.
				if unchanged(oldObj, newObj) {
					return
				}
				enqueue(oldObj)
				enqueue(newObj)
			},
			DeleteFunc: func(obj any) {
				c.countEvent(kind, "delete")
				if ips != nil {
					ips.deleted(obj)
				}
				if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				enqueue(obj)
			},
		})
		if err != nil {
			return err
		}
		c.registrations = append(c.registrations, reg)
		return nil
	}
	for _, scope := range c.scopes {
		if err := add(scope.services, "Service", nil, c.enqueueService); err != nil {
			return err
		}
		if err := add(scope.slices, "EndpointSlice", scope.sliceIPs, c.enqueueSlice); err != nil {
			return err
		}
		if err := add(scope.pods, "Pod", scope.podIPs, c.enqueuePod); err != nil {
			return err
		}
	}
	if err := add(c.nodes, "Node", nil, c.enqueueNode); err != nil {
		return err
	}
	return c.addNamespaceHandler()
}

// unchanged reports whether an update cannot change the model: the same
// resourceVersion, or a Node or Pod whose stripped form (all we read of
// it) is the same. Node heartbeats and Pod status churn would otherwise
// rebuild services for nothing.
func unchanged(oldObj, newObj any) bool {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	if !ok1 || !ok2 {
		return false
	}
	if o.GetResourceVersion() == n.GetResourceVersion() {
		return true
	}
	switch o := oldObj.(type) {
	case *corev1.Node:
		return maps.Equal(o.Labels, newObj.(*corev1.Node).Labels)
	case *kubeconv.PodInfo:
		// Status updates (restarts, probes, condition times) change the
		// resourceVersion but none of what a PodInfo keeps.
		n := newObj.(*kubeconv.PodInfo)
		return o.Name == n.Name && o.Namespace == n.Namespace && o.UID == n.UID &&
			maps.Equal(o.Labels, n.Labels) && o.NodeName == n.NodeName &&
			o.ServiceAccount == n.ServiceAccount && slices.Equal(o.IPs, n.IPs) &&
			o.Phase == n.Phase && o.Ready == n.Ready &&
			(o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil)
	}
	return false
}

func (c *Controller) countEvent(kind, event string) {
	if c.opts.OnInformerEvent != nil {
		c.opts.OnInformerEvent(kind, event)
	}
}

// enqueue queues a service key, remembering when the first event not yet
// reconciled arrived for it.
func (c *Controller) enqueue(key serviceKey) {
	if c.listing.Load() {
		return // the first model, built from the caches, covers it
	}
	now := time.Now()
	c.observedMu.Lock()
	if _, ok := c.observed[key]; !ok {
		c.observed[key] = now
	}
	c.observedMu.Unlock()
	c.queue.Add(key)
}

func (c *Controller) enqueueService(obj any) {
	if svc, ok := obj.(*corev1.Service); ok {
		c.enqueue(serviceKey{svc.Namespace, svc.Name})
	}
}

func (c *Controller) enqueueSlice(obj any) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	if name := slice.Labels[discoveryv1.LabelServiceName]; name != "" {
		c.enqueue(serviceKey{slice.Namespace, name})
	}
}

// enqueuePod queues the services whose slices hold one of the pod's IPs:
// the pod gives their endpoints labels, locality and service account, and
// it may arrive after the slice that names it.
func (c *Controller) enqueuePod(obj any) {
	pod, ok := obj.(*kubeconv.PodInfo)
	if !ok {
		return
	}
	scope := c.scopeFor(pod.Namespace)
	if scope == nil {
		return
	}
	for _, h := range c.workloadHandlers {
		h(pod.Namespace)
	}
	c.enqueueSlicesByIP(scope, pod.IPs)
}

// enqueueNode queues the services with endpoints on the node: node labels
// give endpoints their locality.
func (c *Controller) enqueueNode(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	for _, scope := range c.scopes {
		slices, _ := scope.slices.GetIndexer().ByIndex(indexSliceByNode, node.Name)
		for _, s := range slices {
			c.enqueueSlice(s)
		}
		pods, _ := scope.pods.GetIndexer().ByIndex(indexPodByNode, node.Name)
		for _, p := range pods {
			c.enqueueSlicesByIP(scope, p.(*kubeconv.PodInfo).IPs)
		}
	}
}

// enqueueSlicesByIP queues the services of the slices that hold one of ips.
func (c *Controller) enqueueSlicesByIP(scope *namespacedInformers, ips []string) {
	if c.listing.Load() {
		return // nothing is queued yet: spare the lookups
	}
	for _, ip := range ips {
		scope.sliceIPs.objects(scope.slices.GetStore(), ip, func(o any) bool {
			c.enqueueSlice(o)
			return true
		})
	}
}

// enqueueNamespace queues every service of a namespace.
func (c *Controller) enqueueNamespace(scope *namespacedInformers, namespace string) {
	objs, _ := scope.services.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	for _, o := range objs {
		c.enqueueService(o)
	}
}

// addNamespaceHandler follows namespace labels: when a namespace's
// selection may have changed, all its services are rebuilt, which adds or
// removes them.
func (c *Controller) addNamespaceHandler() error {
	enqueueAll := func(obj any) {
		ns, ok := obj.(*corev1.Namespace)
		if !ok {
			return
		}
		// Without selectors labels decide nothing: a selector that comes
		// later reads the cache, which already holds these labels.
		if len(c.selection.selectors()) == 0 {
			return
		}
		if scope := c.scopeFor(ns.Name); scope != nil {
			c.enqueueNamespace(scope, ns.Name)
		}
	}
	reg, err := c.namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			c.countEvent("Namespace", "add")
			enqueueAll(obj)
		},
		UpdateFunc: func(oldObj, newObj any) {
			c.countEvent("Namespace", "update")
			o, ok1 := oldObj.(*corev1.Namespace)
			n, ok2 := newObj.(*corev1.Namespace)
			if ok1 && ok2 && maps.Equal(o.Labels, n.Labels) {
				return
			}
			enqueueAll(newObj)
		},
		DeleteFunc: func(obj any) {
			c.countEvent("Namespace", "delete")
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			enqueueAll(obj)
		},
	})
	if err != nil {
		return err
	}
	c.registrations = append(c.registrations, reg)
	return nil
}

func sliceServiceIndex(obj any) ([]string, error) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	name := slice.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return nil, nil
	}
	return []string{slice.Namespace + "/" + name}, nil
}

func sliceNodeIndex(obj any) ([]string, error) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	var nodes []string
	for _, ep := range slice.Endpoints {
		if ep.NodeName != nil && *ep.NodeName != "" && !slices.Contains(nodes, *ep.NodeName) {
			nodes = append(nodes, *ep.NodeName)
		}
	}
	return nodes, nil
}

func podNodeIndex(obj any) ([]string, error) {
	pod, ok := obj.(*kubeconv.PodInfo)
	if !ok || pod.NodeName == "" {
		return nil, nil
	}
	return []string{pod.NodeName}, nil
}
