package crd

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"

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

	PeerAuthentication  Kind = "PeerAuthentication"
	AuthorizationPolicy Kind = "AuthorizationPolicy"
)

// Groups and Version of the watched kinds: the traffic kinds are of
// Group, the security kinds of SecurityGroup, both read at Version.
const (
	Group         = "networking.istio.io"
	SecurityGroup = "security.istio.io"
	Version       = "v1"
)

// groups are the API group versions the registry reads, each with only
// its kinds in its client's scheme: one client per group.
var groups = []kubeapi.GroupOptions{
	{GroupVersion: schema.GroupVersion{Group: Group, Version: Version}, AddToScheme: networkingv1.AddToScheme},
	{GroupVersion: schema.GroupVersion{Group: SecurityGroup, Version: Version}, AddToScheme: securityv1.AddToScheme},
}

// kindInfo says where a kind comes from.
type kindInfo struct {
	kind Kind
	// group is the kind's API group, which names its client.
	group string
	// crd is the name of the kind's CustomResourceDefinition.
	crd string
	// informer builds the kind's informer of namespace ns ("" all), so
	// that r can make it relist.
	informer func(c *kubeapi.Group, r *relist.Relister, ns string) cache.SharedIndexInformer
	// list lists a page of the kind in ns, as the informer does.
	list func(c *kubeapi.Group, ns string) pager.ListPageFunc
}

func newKindInfo[T kubeapi.Object, L runtime.Object](kind Kind, group, resource string, newObj func() T, newList func() L) kindInfo {
	typed := func(c *kubeapi.Group, ns string) *kubeapi.Resource[T, L] {
		return kubeapi.NewResource(c, resource, ns, newObj, newList)
	}
	return kindInfo{
		kind: kind, group: group, crd: resource + "." + group,
		informer: func(c *kubeapi.Group, r *relist.Relister, ns string) cache.SharedIndexInformer {
			return relist.Informer(r, newObj(), typed(c, ns), c, 0, nil)
		},
		list: func(c *kubeapi.Group, ns string) pager.ListPageFunc { return relist.ListFunc(typed(c, ns)) },
	}
}

// kinds lists the watched kinds in a fixed order.
var kinds = []kindInfo{
	newKindInfo(DestinationRule, Group, "destinationrules",
		func() *networkingv1.DestinationRule { return &networkingv1.DestinationRule{} },
		func() *networkingv1.DestinationRuleList { return &networkingv1.DestinationRuleList{} }),
	newKindInfo(VirtualService, Group, "virtualservices",
		func() *networkingv1.VirtualService { return &networkingv1.VirtualService{} },
		func() *networkingv1.VirtualServiceList { return &networkingv1.VirtualServiceList{} }),
	newKindInfo(ServiceEntry, Group, "serviceentries",
		func() *networkingv1.ServiceEntry { return &networkingv1.ServiceEntry{} },
		func() *networkingv1.ServiceEntryList { return &networkingv1.ServiceEntryList{} }),
	newKindInfo(WorkloadEntry, Group, "workloadentries",
		func() *networkingv1.WorkloadEntry { return &networkingv1.WorkloadEntry{} },
		func() *networkingv1.WorkloadEntryList { return &networkingv1.WorkloadEntryList{} }),
	newKindInfo(PeerAuthentication, SecurityGroup, "peerauthentications",
		func() *securityv1.PeerAuthentication { return &securityv1.PeerAuthentication{} },
		func() *securityv1.PeerAuthenticationList { return &securityv1.PeerAuthenticationList{} }),
	newKindInfo(AuthorizationPolicy, SecurityGroup, "authorizationpolicies",
		func() *securityv1.AuthorizationPolicy { return &securityv1.AuthorizationPolicy{} },
		func() *securityv1.AuthorizationPolicyList { return &securityv1.AuthorizationPolicyList{} }),
}

// CRDNames are the names of the kinds' CustomResourceDefinitions, the only
// ones the registry reads (RBAC may restrict it to them by resourceNames).
func CRDNames() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.crd
	}
	return names
}
