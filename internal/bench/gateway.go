package bench

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// With Config.GatewayRoutes every service has an HTTPRoute attached to it
// (the Gateway API's mesh profile: a Service parent) that splits its
// traffic by weight between itself and its partner, another service of
// its namespace, 80/20 at first. Clients then follow a weighted route to
// two clusters per service, and a route change sets new weights, as
// Config.TrafficRules does with VirtualServices.

// partner is the service svc's route sends part of its traffic to: the
// next service of its namespace (services go round the namespaces).
func (w *workload) partner(svc *service) *service {
	return w.services[(svc.idx+w.cfg.Namespaces)%len(w.services)]
}

// httpRoute is svc's route sending v1Weight of its traffic to svc and the
// rest to its partner.
func (w *workload) httpRoute(svc *service, v1Weight uint32) *gatewayv1.HTTPRoute {
	port := gatewayv1.PortNumber(ServicePort)
	backend := func(s *service, weight uint32) gatewayv1.HTTPBackendRef {
		return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
			BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(s.name), Port: &port},
			Weight:                 ptr.To(int32(weight)),
		}}
	}
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: svc.name, Namespace: svc.ns},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
				Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")),
				Name: gatewayv1.ObjectName(svc.name), Port: &port,
			}}},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{
				backend(svc, v1Weight), backend(w.partner(svc), 100-v1Weight),
			}}},
		},
	}
}

// writeGatewayRoutes writes every service's HTTPRoute.
func (w *workload) writeGatewayRoutes(ctx context.Context, gc gatewayclient.Interface) error {
	w.gateway = gc
	return forEach(ctx, len(w.services), w.cfg.Concurrency, func(ctx context.Context, i int) error {
		svc := w.services[i]
		out, err := gc.GatewayV1().HTTPRoutes(svc.ns).Create(ctx, w.httpRoute(svc, initialV1Weight), metav1.CreateOptions{})
		w.writes.Add(1)
		if err != nil {
			return wrap(err, "creating the HTTPRoute of %s", svc.hostname)
		}
		svc.mu.Lock()
		svc.route, svc.v1Weight = out, initialV1Weight
		svc.mu.Unlock()
		return nil
	})
}

// expectedRouteSplitKey is the key clients of svc hold once they have its
// HTTPRoute with v1Weight.
func (w *workload) expectedRouteSplitKey(svc *service, v1Weight uint32) string {
	return routeKey(fmt.Sprintf("outbound|%d||%s", ServicePort, svc.hostname), []uint32{v1Weight, 100 - v1Weight})
}

// setRouteWeights writes svc's HTTPRoute with the next weights, as
// setWeights does its VirtualService.
func (w *workload) setRouteWeights(ctx context.Context, svc *service, before func(key string)) (written time.Time, err error) {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	weight := nextV1Weight(svc.v1Weight)
	before(w.expectedRouteSplitKey(svc, weight))
	routes := w.gateway.GatewayV1().HTTPRoutes(svc.ns)
	for attempt := 0; ; attempt++ {
		next := svc.route.DeepCopy()
		next.Spec.Rules = w.httpRoute(svc, weight).Spec.Rules
		out, err := routes.Update(ctx, next, metav1.UpdateOptions{})
		w.writes.Add(1)
		if err == nil {
			svc.route, svc.v1Weight = out, weight
			return time.Now(), nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return time.Time{}, wrap(err, "updating the HTTPRoute of %s", svc.hostname)
		}
		cur, gerr := routes.Get(ctx, svc.route.Name, metav1.GetOptions{})
		if gerr != nil {
			return time.Time{}, wrap(gerr, "reading the HTTPRoute of %s", svc.hostname)
		}
		svc.route = cur
	}
}
