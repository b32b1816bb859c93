package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshpilot/meshpilot/internal/gwstatus"
	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// routeStatusRule says whether a rule of meshpilot's ClusterRole is the
// one write it may make: update of the Gateway API routes' status.
func routeStatusRule(r rbacv1.PolicyRule) bool {
	return slices.Equal(r.APIGroups, []string{gatewayv1.GroupName}) &&
		slices.Equal(r.Resources, []string{"httproutes/status", "grpcroutes/status"}) &&
		slices.Equal(r.Verbs, []string{"update"}) && len(r.ResourceNames) == 0
}

// checkGatewayStatusAccess checks, as meshpilot's ServiceAccount sa of
// ns with the deploy/ RBAC and Lease policy, what the routes' status
// writer may do and what it may not; then runs the writer with those
// rights alone (the election's Lease in ns, the routes read and their
// status written) and sees the status written. Call it while no
// meshpilot runs with the ServiceAccount: the writer takes the Lease.
func checkGatewayStatusAccess(t *testing.T, kubeconfig, ns, sa string) {
	t.Helper()
	type access struct {
		verb, resource string
		allowed        bool
	}
	var cases []access
	for _, r := range []string{"httproutes", "grpcroutes"} {
		cases = append(cases,
			access{"list", r, true}, access{"watch", r, true},
			access{"update", r + "/status", true},
			access{"patch", r + "/status", false}, access{"get", r + "/status", false},
			access{"get", r, false}, access{"update", r, false}, access{"patch", r, false},
			access{"create", r, false}, access{"delete", r, false})
	}
	cases = append(cases, access{"update", "gateways/status", false}, access{"update", "tlsroutes/status", false})
	user := fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa)
	for _, c := range cases {
		review, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx(t), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: c.verb, Group: gatewayv1.GroupName, Resource: c.resource,
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != c.allowed {
			t.Errorf("%s may %s %s.%s: %v, want %v", user, c.verb, c.resource, gatewayv1.GroupName, review.Status.Allowed, c.allowed)
		}
	}

	env.InstallGatewayAPICRDs(t, "standard")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	as, err := kubeapi.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The Lease policy lets the ServiceAccount write the election's
	// Lease under its one name only.
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "not-the-election", Namespace: ns,
		Labels: map[string]string{gwstatus.LeaseComponentLabel: gwstatus.LeaseComponentValue, gwstatus.LeaseNameLabel: gwstatus.LeaseNameValue}}}
	if _, err := as.Leases(ns).Create(ctx(t), other, metav1.CreateOptions{}); err == nil {
		t.Error("the ServiceAccount created a Lease labelled as the routes' status election under another name")
	}

	routes := env.Namespace(t, nil)
	parent := []gatewayv1.ParentReference{{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")), Name: "echo"}}
	backend := gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "echo", Port: ptr.To(gatewayv1.PortNumber(7070))}}
	httpRoutes, grpcRoutes := gatewayRoutes(t, env.Config, routes)
	hr, err := httpRoutes.Create(ctx(t), &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "echo-http", Namespace: routes},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parent},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: backend}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := grpcRoutes.Create(ctx(t), &gatewayv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Name: "echo-grpc", Namespace: routes},
		Spec: gatewayv1.GRPCRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parent},
			Rules: []gatewayv1.GRPCRouteRule{{BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: backend}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	w, err := gwstatus.NewKubeWriter(gwstatus.Options{Config: cfg, Client: as, Namespace: ns, Identity: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(runCtx) })
	defer func() { stop(); wg.Wait() }()
	conds := []metav1.Condition{
		{Type: string(gatewayv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: string(gatewayv1.RouteReasonAccepted), Message: "attached"},
		{Type: string(gatewayv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue, Reason: string(gatewayv1.RouteReasonResolvedRefs), Message: "resolved"},
	}
	w.Set(gwstatus.RouteStatus{Kind: gwstatus.KindHTTPRoute, Namespace: routes, Name: hr.Name, Generation: hr.Generation,
		Parents: []gwstatus.ParentStatus{{ParentRef: parent[0], Conditions: conds}}})
	w.Set(gwstatus.RouteStatus{Kind: gwstatus.KindGRPCRoute, Namespace: routes, Name: gr.Name, Generation: gr.Generation,
		Parents: []gwstatus.ParentStatus{{ParentRef: parent[0], Conditions: conds}}})
	testenv.Eventually(t, "both routes' status written with the ServiceAccount's rights", func() (bool, string) {
		h, err := httpRoutes.Get(ctx(t), hr.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		g, err := grpcRoutes.Get(ctx(t), gr.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ok := func(ps []gatewayv1.RouteParentStatus) bool {
			return len(ps) == 1 && ps[0].ControllerName == gwstatus.DefaultControllerName && len(ps[0].Conditions) == 2
		}
		return ok(h.Status.Parents) && ok(g.Status.Parents), fmt.Sprintf("HTTPRoute %+v, GRPCRoute %+v", h.Status.Parents, g.Status.Parents)
	})
	l, err := env.API.Leases(ns).Get(ctx(t), gwstatus.DefaultLeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the election's Lease: %v", err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "e2e" {
		t.Errorf("the election's Lease is held by %v, want the writer's identity", l.Spec.HolderIdentity)
	}
}

func gatewayRoutes(t *testing.T, cfg *rest.Config, ns string) (*kubeapi.Resource[*gatewayv1.HTTPRoute, *gatewayv1.HTTPRouteList], *kubeapi.Resource[*gatewayv1.GRPCRoute, *gatewayv1.GRPCRouteList]) {
	t.Helper()
	g, err := kubeapi.NewGroup(cfg, kubeapi.GroupOptions{GroupVersion: gatewayv1.SchemeGroupVersion, AddToScheme: gatewayv1.AddToScheme})
	if err != nil {
		t.Fatal(err)
	}
	return kubeapi.NewResource(g, "httproutes", ns, func() *gatewayv1.HTTPRoute { return &gatewayv1.HTTPRoute{} }, func() *gatewayv1.HTTPRouteList { return &gatewayv1.HTTPRouteList{} }),
		kubeapi.NewResource(g, "grpcroutes", ns, func() *gatewayv1.GRPCRoute { return &gatewayv1.GRPCRoute{} }, func() *gatewayv1.GRPCRouteList { return &gatewayv1.GRPCRouteList{} })
}
