package gwstatus

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
)

// route is what the writer reads and writes of a route of either kind.
type route struct {
	obj        kubeapi.Object
	generation int64
	parents    *[]gatewayv1.RouteParentStatus // inside obj
}

// routeAPI reads and writes the routes of one kind.
type routeAPI struct {
	// read returns the route's current version; ok is false when it does
	// not exist.
	read func(ctx context.Context, ns, name string) (r route, ok bool, err error)
	// writeStatus writes r's status through the status subresource.
	writeStatus func(ctx context.Context, r route) error
}

// newRouteAPIs returns the clients of the route kinds whose status is
// written, by kind.
func newRouteAPIs(cfg *rest.Config) (map[string]routeAPI, error) {
	// The Gateway API's kinds are custom resources: JSON only.
	g, err := kubeapi.NewGroup(cfg, kubeapi.GroupOptions{GroupVersion: gatewayv1.SchemeGroupVersion, AddToScheme: gatewayv1.AddToScheme})
	if err != nil {
		return nil, err
	}
	return map[string]routeAPI{
		KindHTTPRoute: newRouteAPI(g, "httproutes",
			func() *gatewayv1.HTTPRoute { return &gatewayv1.HTTPRoute{} },
			func() *gatewayv1.HTTPRouteList { return &gatewayv1.HTTPRouteList{} },
			func(l *gatewayv1.HTTPRouteList) int { return len(l.Items) },
			func(l *gatewayv1.HTTPRouteList) (*gatewayv1.HTTPRoute, *[]gatewayv1.RouteParentStatus) {
				return &l.Items[0], &l.Items[0].Status.Parents
			}),
		KindGRPCRoute: newRouteAPI(g, "grpcroutes",
			func() *gatewayv1.GRPCRoute { return &gatewayv1.GRPCRoute{} },
			func() *gatewayv1.GRPCRouteList { return &gatewayv1.GRPCRouteList{} },
			func(l *gatewayv1.GRPCRouteList) int { return len(l.Items) },
			func(l *gatewayv1.GRPCRouteList) (*gatewayv1.GRPCRoute, *[]gatewayv1.RouteParentStatus) {
				return &l.Items[0], &l.Items[0].Status.Parents
			}),
	}, nil
}

// newRouteAPI reads a route with a list of its namespace selecting its
// name rather than a get: meshpilot may list and watch routes (it reads
// them to serve them) but not get them, and a list without a
// resourceVersion is as fresh a read as a get, from etcd itself.
func newRouteAPI[T kubeapi.Object, L runtime.Object](g *kubeapi.Group, resource string, newObj func() T, newList func() L,
	count func(L) int, first func(L) (T, *[]gatewayv1.RouteParentStatus),
) routeAPI {
	client := func(ns string) *kubeapi.Resource[T, L] { return kubeapi.NewResource(g, resource, ns, newObj, newList) }
	return routeAPI{
		read: func(ctx context.Context, ns, name string) (route, bool, error) {
			l, err := client(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
			if err != nil {
				return route{}, false, err
			}
			switch count(l) {
			case 0:
				return route{}, false, nil
			case 1:
				obj, parents := first(l)
				return route{obj: obj, generation: obj.GetGeneration(), parents: parents}, true, nil
			default:
				return route{}, false, fmt.Errorf("%d %s named %s/%s", count(l), resource, ns, name)
			}
		},
		writeStatus: func(ctx context.Context, r route) error {
			_, err := client(r.obj.GetNamespace()).UpdateStatus(ctx, r.obj.(T), metav1.UpdateOptions{FieldManager: fieldManager})
			return err
		},
	}
}

// fieldManager names meshpilot's writes in the routes' managedFields.
const fieldManager = "meshpilot-gateway-status"
