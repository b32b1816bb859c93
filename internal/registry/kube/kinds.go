package kube

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/registry/relist"
)

// The kinds the registry watches, named as OnInformerEvent names them.
const (
	KindService       = "Service"
	KindEndpointSlice = "EndpointSlice"
	KindPod           = "Pod"
	KindNode          = "Node"
	KindNamespace     = "Namespace"
)

// Kinds lists the watched kinds, those services are built from first.
var Kinds = []string{KindService, KindEndpointSlice, KindPod, KindNode, KindNamespace}

// kindAPI is how one kind is listed and watched in a namespace ("" for
// all namespaces, and for cluster-scoped kinds).
type kindAPI struct {
	example    runtime.Object
	namespaced bool
	// indexers are the indexes the registry reads of the kind.
	indexers cache.Indexers
	// informer builds an informer of the kind whose watches r can end.
	informer func(r *relist.Relister, client *kubeapi.Client, ns string) cache.SharedIndexInformer
	list     func(client *kubeapi.Client, ns string) pager.ListPageFunc
}

func newKindAPI[L runtime.Object](example runtime.Object, namespaced bool, indexers cache.Indexers, typed func(*kubeapi.Client, string) relist.TypedClient[L]) kindAPI {
	return kindAPI{
		example: example, namespaced: namespaced, indexers: indexers,
		informer: func(r *relist.Relister, c *kubeapi.Client, ns string) cache.SharedIndexInformer {
			return relist.Informer(r, example, typed(c, ns), c, 0, indexers)
		},
		list: func(c *kubeapi.Client, ns string) pager.ListPageFunc { return relist.ListFunc(typed(c, ns)) },
	}
}

var kindAPIs = map[string]kindAPI{
	KindService: newKindAPI(&corev1.Service{}, true, serviceIndexers, func(c *kubeapi.Client, ns string) relist.TypedClient[*corev1.ServiceList] {
		return c.Services(ns)
	}),
	KindEndpointSlice: newKindAPI(&discoveryv1.EndpointSlice{}, true, sliceIndexers, func(c *kubeapi.Client, ns string) relist.TypedClient[*discoveryv1.EndpointSliceList] {
		return c.EndpointSlices(ns)
	}),
	KindPod: newKindAPI(&corev1.Pod{}, true, podIndexers, func(c *kubeapi.Client, ns string) relist.TypedClient[*corev1.PodList] {
		return c.Pods(ns)
	}),
	KindNode: newKindAPI(&corev1.Node{}, false, nil, func(c *kubeapi.Client, _ string) relist.TypedClient[*corev1.NodeList] {
		return c.Nodes()
	}),
	KindNamespace: newKindAPI(&corev1.Namespace{}, false, nil, func(c *kubeapi.Client, _ string) relist.TypedClient[*corev1.NamespaceList] {
		return c.Namespaces()
	}),
}

// informer adds to c.informers an informer of kind in ns, built on a
// ListerWatcher that Relist can interrupt.
func (c *Controller) informer(kind, ns string) (cache.SharedIndexInformer, error) {
	api := kindAPIs[kind]
	return c.informers.Add(api.informer(c.relisters[kind], c.client, ns))
}

// ListPagers returns the pagers that list kind exactly as the informers
// watch it (the same client and namespaces), one per watch scope, each
// with pageSize items a page (client-go's pager default when 0).
func (c *Controller) ListPagers(kind string, pageSize int64) []*pager.ListPager {
	api, ok := kindAPIs[kind]
	if !ok {
		return nil
	}
	namespaces := []string{metav1.NamespaceAll}
	if api.namespaced {
		namespaces = c.watchNamespaces
	}
	out := make([]*pager.ListPager, 0, len(namespaces))
	for _, ns := range namespaces {
		p := pager.New(api.list(c.client, ns))
		if pageSize > 0 {
			p.PageSize = pageSize
		}
		out = append(out, p)
	}
	return out
}
