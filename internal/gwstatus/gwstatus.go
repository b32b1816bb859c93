// Package gwstatus writes the status of Gateway API routes attached to
// Services (the mesh profile, GAMMA) back to the API server, as every
// Gateway API implementation does: one status.parents[] entry per Service
// parent, under meshpilot's controller name, with the conditions
// Accepted and ResolvedRefs. The routes' conversion decides what the
// status is (a RouteStatus per route) and hands it to a Writer; the
// Writer decides when and whether to write it (only the elected
// replica writes, and only what differs from what the object holds).
package gwstatus

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// DefaultControllerName is the controllerName meshpilot writes in the
// status.parents[] entries it owns.
const DefaultControllerName = "meshpilot.io/mesh-controller"

// The route kinds whose status is written.
const (
	KindHTTPRoute = "HTTPRoute"
	KindGRPCRoute = "GRPCRoute"
)

// RouteStatus is the status meshpilot means a route to have.
type RouteStatus struct {
	Kind            string // KindHTTPRoute or KindGRPCRoute
	Namespace, Name string
	// Generation is the metadata.generation the status was computed
	// from: each condition's observedGeneration.
	Generation int64
	// Parents holds one entry per parentRef meshpilot is responsible for
	// (a Service), in the route's order.
	Parents []ParentStatus
}

// ParentStatus is the status of a route for one parent.
type ParentStatus struct {
	ParentRef gatewayv1.ParentReference
	// Conditions are Accepted and ResolvedRefs (gatewayv1.RouteCondition*
	// types and reasons); their ObservedGeneration and LastTransitionTime
	// are filled in by the Writer.
	Conditions []metav1.Condition
}

// Writer takes the status meshpilot means each route to have. Set and
// Delete never block on the API server and are safe for concurrent use.
type Writer interface {
	// Set records the status of a route, replacing the last one.
	Set(RouteStatus)
	// Delete forgets a route that is gone or no longer has a Service
	// parent: its entries of meshpilot's are removed if it still exists.
	Delete(kind, namespace, name string)
}

// Discard is a Writer that writes nothing: for a replica that never
// writes status, and for tests.
var Discard Writer = discard{}

type discard struct{}

func (discard) Set(RouteStatus)              {}
func (discard) Delete(kind, ns, name string) {}
