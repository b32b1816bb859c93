package file

import (
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/meshpilot/meshpilot/internal/registry/crd"
)

var _ crd.GatewayStore = (*IstioStore)(nil)

// HTTPRoutes lists every HTTPRoute, ordered by namespace and name.
func (s *IstioStore) HTTPRoutes() []*gatewayv1.HTTPRoute {
	return listIstio[*gatewayv1.HTTPRoute](s.r.view.Load(), crd.HTTPRoute)
}

// GRPCRoutes lists every GRPCRoute, ordered by namespace and name.
func (s *IstioStore) GRPCRoutes() []*gatewayv1.GRPCRoute {
	return listIstio[*gatewayv1.GRPCRoute](s.r.view.Load(), crd.GRPCRoute)
}

// ReferenceGrants lists every ReferenceGrant, ordered by namespace and name.
func (s *IstioStore) ReferenceGrants() []*gatewayv1beta1.ReferenceGrant {
	return listIstio[*gatewayv1beta1.ReferenceGrant](s.r.view.Load(), crd.ReferenceGrant)
}

// HTTPRoute returns one HTTPRoute, or nil.
func (s *IstioStore) HTTPRoute(namespace, name string) *gatewayv1.HTTPRoute {
	return getIstio[*gatewayv1.HTTPRoute](s.r.view.Load(), crd.HTTPRoute, namespace, name)
}

// GRPCRoute returns one GRPCRoute, or nil.
func (s *IstioStore) GRPCRoute(namespace, name string) *gatewayv1.GRPCRoute {
	return getIstio[*gatewayv1.GRPCRoute](s.r.view.Load(), crd.GRPCRoute, namespace, name)
}
