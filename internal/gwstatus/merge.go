package gwstatus

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// mergeParents returns the status.parents a route should hold given what
// it holds (cur) and the status meshpilot means it to have (want; nil
// for a route meshpilot no longer has an opinion of). It is a pure
// function of its arguments, so that every replica computing it from the
// same object and the same desired status writes the same bytes: a new
// leader then finds nothing to change.
//
//   - Entries of other controllers stay as they are, where they are: the
//     spec gives each controller its own entries only.
//   - Each of ours stays in its place, updated, while want still has its
//     parent; one whose parent left want is removed; parents new to want
//     are appended in want's order.
//   - A condition keeps its lastTransitionTime while its status does not
//     change (what metav1.Condition's field means); a new condition or a
//     status change takes now. Every condition of ours carries
//     observedGeneration gen.
func mergeParents(cur []gatewayv1.RouteParentStatus, want []ParentStatus, controller gatewayv1.GatewayController,
	routeNamespace string, gen int64, now metav1.Time,
) []gatewayv1.RouteParentStatus {
	used := make([]bool, len(want))
	out := make([]gatewayv1.RouteParentStatus, 0, len(cur)+len(want))
	for _, p := range cur {
		if p.ControllerName != controller {
			out = append(out, p)
			continue
		}
		i := indexParent(want, p.ParentRef, routeNamespace)
		if i < 0 || used[i] {
			continue // a parent no longer ours, or a duplicate of one
		}
		used[i] = true
		out = append(out, ourEntry(want[i], p.Conditions, controller, gen, now))
	}
	for i, w := range want {
		if !used[i] {
			out = append(out, ourEntry(w, nil, controller, gen, now))
		}
	}
	return out
}

func ourEntry(w ParentStatus, prev []metav1.Condition, controller gatewayv1.GatewayController, gen int64, now metav1.Time) gatewayv1.RouteParentStatus {
	conds := make([]metav1.Condition, len(w.Conditions))
	for i, c := range w.Conditions {
		c.ObservedGeneration = gen
		c.LastTransitionTime = now
		for _, o := range prev {
			if o.Type == c.Type && o.Status == c.Status && !o.LastTransitionTime.IsZero() {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		conds[i] = c
	}
	return gatewayv1.RouteParentStatus{ParentRef: *w.ParentRef.DeepCopy(), ControllerName: controller, Conditions: conds}
}

// hasOurs says whether parents hold an entry of controller.
func hasOurs(parents []gatewayv1.RouteParentStatus, controller gatewayv1.GatewayController) bool {
	for _, p := range parents {
		if p.ControllerName == controller {
			return true
		}
	}
	return false
}

func indexParent(want []ParentStatus, ref gatewayv1.ParentReference, routeNamespace string) int {
	for i, w := range want {
		if sameParent(w.ParentRef, ref, routeNamespace) {
			return i
		}
	}
	return -1
}

// sameParent compares two parentRefs with the API's defaults applied: an
// unset group is gateway.networking.k8s.io, an unset kind Gateway, an
// unset namespace the route's. The API server defaults group and kind in
// the spec, not necessarily in what a controller wrote in the status, so
// spelled-out and omitted defaults must compare equal.
func sameParent(a, b gatewayv1.ParentReference, routeNamespace string) bool {
	return str(a.Group, gatewayv1.GroupName) == str(b.Group, gatewayv1.GroupName) &&
		str(a.Kind, "Gateway") == str(b.Kind, "Gateway") &&
		str(a.Namespace, routeNamespace) == str(b.Namespace, routeNamespace) &&
		a.Name == b.Name &&
		str(a.SectionName, "") == str(b.SectionName, "") &&
		num(a.Port) == num(b.Port)
}

func str[S ~string](p *S, def string) string {
	if p == nil {
		return def
	}
	return string(*p)
}

func num(p *gatewayv1.PortNumber) int32 {
	if p == nil {
		return 0
	}
	return int32(*p)
}
