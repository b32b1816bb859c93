package crd

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

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

	// The Gateway API kinds the mesh reads (GAMMA): routes attached to
	// Services, and the grants that let them name another namespace's.
	HTTPRoute      Kind = "HTTPRoute"
	GRPCRoute      Kind = "GRPCRoute"
	ReferenceGrant Kind = "ReferenceGrant"
)

// Groups and Version of the watched kinds: the traffic kinds are of
// Group, the security kinds of SecurityGroup, both read at Version; the
// routes of GatewayGroup at Version, its ReferenceGrants at
// GatewayGrantVersion, which every release of the Gateway API serves
// (v1 only since v1.5).
const (
	Group               = "networking.istio.io"
	SecurityGroup       = "security.istio.io"
	GatewayGroup        = gatewayv1.GroupName
	Version             = "v1"
	GatewayGrantVersion = "v1beta1"
)

// groups are the API group versions the registry reads, each with only
// its kinds in its client's scheme: one client per group version.
var groups = []kubeapi.GroupOptions{
	{GroupVersion: schema.GroupVersion{Group: Group, Version: Version}, AddToScheme: networkingv1.AddToScheme},
	{GroupVersion: schema.GroupVersion{Group: SecurityGroup, Version: Version}, AddToScheme: securityv1.AddToScheme},
	{GroupVersion: schema.GroupVersion{Group: GatewayGroup, Version: Version}, AddToScheme: gatewayv1.Install},
	{GroupVersion: schema.GroupVersion{Group: GatewayGroup, Version: GatewayGrantVersion}, AddToScheme: gatewayv1beta1.Install},
}

// kindInfo says where a kind comes from.
type kindInfo struct {
	kind Kind
	// group and version are the kind's API group and the version read,
	// which name its client.
	group, version string
	// crd is the name of the kind's CustomResourceDefinition.
	crd string
	// informer builds the kind's informer of namespace ns ("" all), so
	// that r can make it relist.
	informer func(c *kubeapi.Group, r *relist.Relister, ns string) cache.SharedIndexInformer
	// list lists a page of the kind in ns, as the informer does.
	list func(c *kubeapi.Group, ns string) pager.ListPageFunc
}

func newKindInfo[T kubeapi.Object, L runtime.Object](kind Kind, group, resource string, newObj func() T, newList func() L) kindInfo {
	return newKindInfoAt(kind, group, Version, resource, newObj, newList)
}

func newKindInfoAt[T kubeapi.Object, L runtime.Object](kind Kind, group, version, resource string, newObj func() T, newList func() L) kindInfo {
	typed := func(c *kubeapi.Group, ns string) *kubeapi.Resource[T, L] {
		return kubeapi.NewResource(c, resource, ns, newObj, newList)
	}
	return kindInfo{
		kind: kind, group: group, version: version, crd: resource + "." + group,
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
	newKindInfo(HTTPRoute, GatewayGroup, "httproutes",
		func() *gatewayv1.HTTPRoute { return &gatewayv1.HTTPRoute{} },
		func() *gatewayv1.HTTPRouteList { return &gatewayv1.HTTPRouteList{} }),
	newKindInfo(GRPCRoute, GatewayGroup, "grpcroutes",
		func() *gatewayv1.GRPCRoute { return &gatewayv1.GRPCRoute{} },
		func() *gatewayv1.GRPCRouteList { return &gatewayv1.GRPCRouteList{} }),
	newKindInfoAt(ReferenceGrant, GatewayGroup, GatewayGrantVersion, "referencegrants",
		func() *gatewayv1beta1.ReferenceGrant { return &gatewayv1beta1.ReferenceGrant{} },
		func() *gatewayv1beta1.ReferenceGrantList { return &gatewayv1beta1.ReferenceGrantList{} }),
}

// clientKey names the client of a group version.
func clientKey(group, version string) string { return group + "/" + version }

// CRDNames are the names of the kinds' CustomResourceDefinitions, the only
// ones the registry reads (RBAC may restrict it to them by resourceNames).
func CRDNames() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.crd
	}
	return names
}
