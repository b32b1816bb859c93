package crd

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
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

// groupOptions is the one API group version the registry reads, with only
// its kinds in the client's scheme.
var groupOptions = kubeapi.GroupOptions{
	GroupVersion: schema.GroupVersion{Group: Group, Version: Version},
	AddToScheme:  networkingv1.AddToScheme,
}

// kindInfo says where a kind comes from.
type kindInfo struct {
	kind Kind
	// crd is the name of the kind's CustomResourceDefinition.
	crd string
	// informer builds the kind's informer of namespace ns ("" all), so
	// that r can make it relist.
	informer func(c *kubeapi.Group, r *relist.Relister, ns string) cache.SharedIndexInformer
	// list lists a page of the kind in ns, as the informer does.
	list func(c *kubeapi.Group, ns string) pager.ListPageFunc
}

func newKindInfo[T kubeapi.Object, L runtime.Object](kind Kind, resource string, newObj func() T, newList func() L) kindInfo {
	typed := func(c *kubeapi.Group, ns string) *kubeapi.Resource[T, L] {
		return kubeapi.NewResource(c, resource, ns, newObj, newList)
	}
	return kindInfo{
		kind: kind, crd: resource + "." + Group,
		informer: func(c *kubeapi.Group, r *relist.Relister, ns string) cache.SharedIndexInformer {
			return relist.Informer(r, newObj(), typed(c, ns), c, 0, nil)
		},
		list: func(c *kubeapi.Group, ns string) pager.ListPageFunc { return relist.ListFunc(typed(c, ns)) },
	}
}

// kinds lists the watched kinds in a fixed order.
var kinds = []kindInfo{
	newKindInfo(DestinationRule, "destinationrules",
		func() *networkingv1.DestinationRule { return &networkingv1.DestinationRule{} },
		func() *networkingv1.DestinationRuleList { return &networkingv1.DestinationRuleList{} }),
	newKindInfo(VirtualService, "virtualservices",
		func() *networkingv1.VirtualService { return &networkingv1.VirtualService{} },
		func() *networkingv1.VirtualServiceList { return &networkingv1.VirtualServiceList{} }),
	newKindInfo(ServiceEntry, "serviceentries",
		func() *networkingv1.ServiceEntry { return &networkingv1.ServiceEntry{} },
		func() *networkingv1.ServiceEntryList { return &networkingv1.ServiceEntryList{} }),
	newKindInfo(WorkloadEntry, "workloadentries",
		func() *networkingv1.WorkloadEntry { return &networkingv1.WorkloadEntry{} },
		func() *networkingv1.WorkloadEntryList { return &networkingv1.WorkloadEntryList{} }),
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
