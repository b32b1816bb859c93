package crd

import (
	"k8s.io/client-go/tools/cache"

	istioinformers "istio.io/client-go/pkg/informers/externalversions"
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
	// informer requests the kind's informer from a factory.
	informer func(istioinformers.SharedInformerFactory) cache.SharedIndexInformer
}

// kinds lists the watched kinds in a fixed order.
var kinds = []kindInfo{
	{DestinationRule, "destinationrules." + Group, func(f istioinformers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Networking().V1().DestinationRules().Informer()
	}},
	{VirtualService, "virtualservices." + Group, func(f istioinformers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Networking().V1().VirtualServices().Informer()
	}},
	{ServiceEntry, "serviceentries." + Group, func(f istioinformers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Networking().V1().ServiceEntries().Informer()
	}},
	{WorkloadEntry, "workloadentries." + Group, func(f istioinformers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Networking().V1().WorkloadEntries().Informer()
	}},
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
