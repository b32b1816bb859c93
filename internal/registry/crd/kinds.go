package crd

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	istioinformers "istio.io/client-go/pkg/informers/externalversions"

	"github.com/meshpilot/meshpilot/internal/registry/relist"
)

// Kind names one of the Istio kinds the registry watches.
type Kind string

// The watched kinds.
const (
	DestinationRule Kind = "DestinationRule"
	VirtualService  Kind = "VirtualService"
	ServiceEntry    Kind = "ServiceEntry"
	WorkloadEntry   Kind = "WorkloadEntry"
)

// Group and Version of the watched kinds.
const (
	Group   = "networking.istio.io"
	Version = "v1"
)

// kindInfo says where a kind comes from.
type kindInfo struct {
	kind Kind
	// crd is the name of the kind's CustomResourceDefinition.
	crd string
	// informer requests the kind's informer of namespace ns ("" all)
	// from a factory, built so that r can make it relist.
	informer func(f istioinformers.SharedInformerFactory, r *relist.Relister, ns string) cache.SharedIndexInformer
	// list lists a page of the kind in ns, as the informer does.
	list func(c istioclient.Interface, ns string) pager.ListPageFunc
}

func newKindInfo[L runtime.Object](kind Kind, crd string, example runtime.Object, typed func(istioclient.Interface, string) relist.TypedClient[L]) kindInfo {
	return kindInfo{
		kind: kind, crd: crd,
		informer: func(f istioinformers.SharedInformerFactory, r *relist.Relister, ns string) cache.SharedIndexInformer {
			// In place of f.Networking().V1().<Kind>s().Informer(), which
			// offers no way to relist; the factory still starts,
			// stops and transforms it.
			return f.InformerFor(example, func(c istioclient.Interface, resync time.Duration) cache.SharedIndexInformer {
				return relist.Informer(r, example, typed(c, ns), c, resync)
			})
		},
		list: func(c istioclient.Interface, ns string) pager.ListPageFunc { return relist.ListFunc(typed(c, ns)) },
	}
}

// kinds lists the watched kinds in a fixed order.
var kinds = []kindInfo{
	newKindInfo(DestinationRule, "destinationrules."+Group, &networkingv1.DestinationRule{},
		func(c istioclient.Interface, ns string) relist.TypedClient[*networkingv1.DestinationRuleList] {
			return c.NetworkingV1().DestinationRules(ns)
		}),
	newKindInfo(VirtualService, "virtualservices."+Group, &networkingv1.VirtualService{},
		func(c istioclient.Interface, ns string) relist.TypedClient[*networkingv1.VirtualServiceList] {
			return c.NetworkingV1().VirtualServices(ns)
		}),
	newKindInfo(ServiceEntry, "serviceentries."+Group, &networkingv1.ServiceEntry{},
		func(c istioclient.Interface, ns string) relist.TypedClient[*networkingv1.ServiceEntryList] {
			return c.NetworkingV1().ServiceEntries(ns)
		}),
	newKindInfo(WorkloadEntry, "workloadentries."+Group, &networkingv1.WorkloadEntry{},
		func(c istioclient.Interface, ns string) relist.TypedClient[*networkingv1.WorkloadEntryList] {
			return c.NetworkingV1().WorkloadEntries(ns)
		}),
}

// CRDNames are the names of the four CustomResourceDefinitions, the only
// ones the registry reads (RBAC may restrict it to them by resourceNames).
func CRDNames() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.crd
	}
	return names
}
