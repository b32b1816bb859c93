package kube

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// indexes are the caches services are built from: the informers' (the
// live model) or caches filled from a list (ModelFrom), so that both are
// built by the same code.
type indexes struct {
	scopes     map[string]scopeIndexes // by namespace; "" means all
	nodes      cache.Indexer
	namespaces cache.Indexer
}

// scopeIndexes are the caches of one watch scope.
type scopeIndexes struct {
	services, slices, pods cache.Indexer
	podIPs                 *ipKeys
}

// liveIndexes are the informers' caches. An informer's indexer is made
// with it and never replaced, so they can be taken once.
func (c *Controller) liveIndexes() *indexes {
	idx := &indexes{
		scopes:     make(map[string]scopeIndexes, len(c.scopes)),
		nodes:      c.nodes.GetIndexer(),
		namespaces: c.namespaces.GetIndexer(),
	}
	for ns, s := range c.scopes {
		idx.scopes[ns] = scopeIndexes{s.services.GetIndexer(), s.slices.GetIndexer(), s.pods.GetIndexer(), s.podIPs}
	}
	return idx
}

// build converts one Kubernetes Service and its endpoints from idx. It
// returns a nil service when the Service does not exist or is out of
// scope (its namespace unwatched or not selected).
func (c *Controller) build(idx *indexes, key serviceKey) (*model.Service, []*model.Endpoint) {
	scope, ok := idx.scopeFor(key.namespace)
	if !ok || !c.selectedIn(idx, key.namespace) {
		return nil, nil
	}
	obj, exists, err := scope.services.GetByKey(key.String())
	if err != nil || !exists {
		return nil, nil
	}
	svc := kubeconv.ConvertService(obj.(*corev1.Service), c.opts.DomainSuffix)
	objs, _ := scope.slices.ByIndex(indexSliceByService, key.String())
	slices := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		slices = append(slices, o.(*discoveryv1.EndpointSlice))
	}
	eps := kubeconv.BuildEndpoints(svc, slices, kubeconv.EndpointLookup{
		Pod: idx.pod, PodByIP: idx.podByIP, Node: idx.node, ClusterID: c.opts.ClusterID,
		LocalClusterID: c.opts.LocalClusterID,
	})
	return svc, eps
}

// selectedIn applies the discovery selectors in force to a namespace of
// idx. Without selectors every watched namespace is selected.
func (c *Controller) selectedIn(idx *indexes, namespace string) bool {
	sels := c.selection.selectors()
	if len(sels) == 0 {
		return true
	}
	return selects(sels, idx.namespace(namespace))
}

// scopeFor returns the caches that hold a namespace.
func (idx *indexes) scopeFor(namespace string) (scopeIndexes, bool) {
	if s, ok := idx.scopes[metav1.NamespaceAll]; ok {
		return s, true
	}
	s, ok := idx.scopes[namespace]
	return s, ok
}

// namespace returns the cached namespace, or nil.
func (idx *indexes) namespace(name string) *corev1.Namespace {
	obj, exists, err := idx.namespaces.GetByKey(name)
	if err != nil || !exists {
		return nil
	}
	return obj.(*corev1.Namespace)
}

func (idx *indexes) pod(namespace, name string) *kubeconv.PodInfo {
	scope, ok := idx.scopeFor(namespace)
	if !ok {
		return nil
	}
	obj, exists, err := scope.pods.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil
	}
	return obj.(*kubeconv.PodInfo)
}

// podByIP applies PodForIP to the Pods cached under ip.
func (idx *indexes) podByIP(namespace, ip string) *kubeconv.PodInfo {
	return kubeconv.PodForIP(namespace, func(yield func(*kubeconv.PodInfo) bool) {
		for _, scope := range idx.scopes {
			if !scope.podIPs.objects(scope.pods, ip, func(o any) bool { return yield(o.(*kubeconv.PodInfo)) }) {
				return
			}
		}
	})
}

func (idx *indexes) node(name string) *corev1.Node {
	obj, exists, err := idx.nodes.GetByKey(name)
	if err != nil || !exists {
		return nil
	}
	return obj.(*corev1.Node)
}

// The indexes of each kind: the informers' and those of ModelFrom's
// caches, which build reads the same way. Each costs a set per value, so
// a kind has only those something reads: services and pods by namespace
// (a namespace's selection changing, WorkloadsIn), slices by service and
// node, pods by node; Nodes and Namespaces none.
var (
	serviceIndexers = cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	sliceIndexers   = cache.Indexers{
		indexSliceByService: sliceServiceIndex,
		indexSliceByNode:    sliceNodeIndex,
	}
	podIndexers = cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		indexPodByNode:       podNodeIndex,
	}
)

// listIndexes are caches for objects listed rather than watched, with
// the informers' indexes; add fills them.
func listIndexes() *indexes {
	return &indexes{
		scopes: map[string]scopeIndexes{metav1.NamespaceAll: {
			newIndexer(serviceIndexers), newIndexer(sliceIndexers), newIndexer(podIndexers), newIPKeys(podIPs),
		}},
		nodes:      newIndexer(nil),
		namespaces: newIndexer(nil),
	}
}

// store returns the cache of kind (one of Kinds) of listIndexes.
func (idx *indexes) store(kind string) (cache.Indexer, error) {
	scope := idx.scopes[metav1.NamespaceAll]
	switch kind {
	case KindService:
		return scope.services, nil
	case KindEndpointSlice:
		return scope.slices, nil
	case KindPod:
		return scope.pods, nil
	case KindNode:
		return idx.nodes, nil
	case KindNamespace:
		return idx.namespaces, nil
	}
	return nil, fmt.Errorf("kube registry: no informer for kind %q", kind)
}

// add caches a listed object of kind (one of Kinds), already
// transformed, in listIndexes as an informer and its handlers would.
func (idx *indexes) add(kind string, obj any) error {
	store, err := idx.store(kind)
	if err != nil {
		return err
	}
	if err := store.Add(obj); err != nil {
		return fmt.Errorf("kube registry: caching a listed %s: %w", kind, err)
	}
	if kind == KindPod {
		idx.scopes[metav1.NamespaceAll].podIPs.added(obj)
	}
	return nil
}

// newIndexer is a cache keyed as informers key theirs.
func newIndexer(indexers cache.Indexers) cache.Indexer {
	if indexers == nil {
		indexers = cache.Indexers{}
	}
	return cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers)
}
