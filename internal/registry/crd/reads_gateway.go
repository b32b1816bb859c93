package crd

import (
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

var _ GatewayStore = (*Registry)(nil)

// HTTPRoutes lists every HTTPRoute in scope.
func (r *Registry) HTTPRoutes() []*gatewayv1.HTTPRoute {
	return list[*gatewayv1.HTTPRoute](r, HTTPRoute)
}

// GRPCRoutes lists every GRPCRoute in scope.
func (r *Registry) GRPCRoutes() []*gatewayv1.GRPCRoute {
	return list[*gatewayv1.GRPCRoute](r, GRPCRoute)
}

// ReferenceGrants lists every ReferenceGrant in scope.
func (r *Registry) ReferenceGrants() []*gatewayv1beta1.ReferenceGrant {
	return list[*gatewayv1beta1.ReferenceGrant](r, ReferenceGrant)
}

// HTTPRoute returns one HTTPRoute, or nil.
func (r *Registry) HTTPRoute(namespace, name string) *gatewayv1.HTTPRoute {
	return get[*gatewayv1.HTTPRoute](r, HTTPRoute, namespace, name)
}

// GRPCRoute returns one GRPCRoute, or nil.
func (r *Registry) GRPCRoute(namespace, name string) *gatewayv1.GRPCRoute {
	return get[*gatewayv1.GRPCRoute](r, GRPCRoute, namespace, name)
}
