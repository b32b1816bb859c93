package crd

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	istioclient "istio.io/client-go/pkg/clientset/versioned"

	"github.com/meshpilot/meshpilot/internal/gwstatus"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

func gatewayClient(t *testing.T, env *testenv.Env) gatewayclient.Interface {
	t.Helper()
	c, err := gatewayclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// gatewayObjects are an HTTPRoute, a GRPCRoute and a ReferenceGrant in
// ns, named name, as the API server's validation accepts them.
func gatewayObjects(ns, name string) (*gatewayv1.HTTPRoute, *gatewayv1.GRPCRoute, *gatewayv1beta1.ReferenceGrant) {
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	core, svc := gatewayv1.Group(""), gatewayv1.Kind("Service")
	port := gatewayv1.PortNumber(80)
	parents := []gatewayv1.ParentReference{{Group: &core, Kind: &svc, Name: "reviews", Port: &port}}
	backend := gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "reviews-v2", Port: &port}}
	hr := &gatewayv1.HTTPRoute{ObjectMeta: meta}
	hr.Spec.ParentRefs = parents
	hr.Spec.Rules = []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: backend}}}}
	gr := &gatewayv1.GRPCRoute{ObjectMeta: meta}
	gr.Spec.ParentRefs = parents
	gr.Spec.Rules = []gatewayv1.GRPCRouteRule{{BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: backend}}}}
	rg := &gatewayv1beta1.ReferenceGrant{ObjectMeta: meta}
	rg.Spec.From = []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "other"}}
	rg.Spec.To = []gatewayv1beta1.ReferenceGrantTo{{Kind: "Service"}}
	return hr, gr, rg
}

func createGatewayObjects(t *testing.T, c gatewayclient.Interface, ns, name string) {
	t.Helper()
	hr, gr, rg := gatewayObjects(ns, name)
	ctx := t.Context()
	if _, err := c.GatewayV1().HTTPRoutes(ns).Create(ctx, hr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GatewayV1().GRPCRoutes(ns).Create(ctx, gr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GatewayV1beta1().ReferenceGrants(ns).Create(ctx, rg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestLateInstallGatewayAPI starts a registry on an API server without
// the Gateway API's CRDs, installs them (the standard channel, whose CEL
// validation runs) while it runs, and follows HTTPRoutes, GRPCRoutes and
// ReferenceGrants through the reads and the events: a spec change is an
// event, a status write (what the status writer does) is none.
func TestLateInstallGatewayAPI(t *testing.T) {
	env := ownAPIServer(t)
	ctx := t.Context()
	logs := testutil.NewLines()
	r, rec := startRegistry(t, env, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ns := env.Namespace(t, nil)

	testenv.Eventually(t, "synced without the CRDs", func() (bool, string) { return r.HasSynced(), "" })
	logs.Await(t, notAvailable, 0, func(l string) bool { return strings.Contains(l, notAvailable) })
	if !strings.Contains(logs.String(), "httproutes.gateway.networking.k8s.io") {
		t.Errorf("the missing CRDs logged do not name the Gateway API kinds':\n%s", logs.String())
	}
	if r.Watching(HTTPRoute) || len(r.HTTPRoutes()) != 0 {
		t.Fatal("HTTPRoutes are watched before their CRD exists")
	}

	env.InstallIstioCRDs(t)
	env.InstallGatewayAPICRDs(t, "standard")
	testenv.Eventually(t, "the Gateway API kinds watched and synced", func() (bool, string) {
		return r.Watching(HTTPRoute) && r.Watching(GRPCRoute) && r.Watching(ReferenceGrant) && r.HasSynced(), ""
	})
	istio := istioClient(t, env)
	gw := gatewayClient(t, env)
	sp := &syncer{net: istio.NetworkingV1(), sec: istio.SecurityV1(), gw: gw, ns: ns}
	createGatewayObjects(t, gw, ns, "reviews")
	waitEvents(t, sp, rec, ns, Event{HTTPRoute, ns, "reviews"}, Event{GRPCRoute, ns, "reviews"}, Event{ReferenceGrant, ns, "reviews"})
	if got := r.HTTPRoute(ns, "reviews"); got == nil || len(got.Spec.Rules) != 1 {
		t.Fatalf("HTTPRoute = %v", got)
	}
	if got := r.GRPCRoutes(); !slices.ContainsFunc(got, func(o *gatewayv1.GRPCRoute) bool { return o.Name == "reviews" }) {
		t.Fatalf("GRPCRoutes() = %v", got)
	}
	if got := r.ReferenceGrants(); !slices.ContainsFunc(got, func(o *gatewayv1beta1.ReferenceGrant) bool { return o.Name == "reviews" }) {
		t.Fatalf("ReferenceGrants() = %v", got)
	}

	// A status write, as the status writer makes it: no event.
	hr, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "reviews", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hr.Status.Parents = []gatewayv1.RouteParentStatus{{
		ParentRef:      hr.Spec.ParentRefs[0],
		ControllerName: gwstatus.DefaultControllerName,
		Conditions: []metav1.Condition{{Type: string(gatewayv1.RouteConditionAccepted), Status: metav1.ConditionTrue,
			Reason: string(gatewayv1.RouteReasonAccepted), ObservedGeneration: hr.Generation, LastTransitionTime: metav1.Now()}},
	}}
	if _, err := gw.GatewayV1().HTTPRoutes(ns).UpdateStatus(ctx, hr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A spec change: one event.
	hr, err = gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "reviews", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := int32(5)
	hr.Spec.Rules[0].BackendRefs[0].Weight = &w
	grUnchanged, err := gw.GatewayV1().GRPCRoutes(ns).Get(ctx, "reviews", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	grUnchanged.Status.Parents = hr.Status.Parents
	if _, err := gw.GatewayV1().GRPCRoutes(ns).UpdateStatus(ctx, grUnchanged, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.GatewayV1().HTTPRoutes(ns).Update(ctx, hr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, sp, rec, ns, Event{HTTPRoute, ns, "reviews"})
}

func istioClient(t *testing.T, env *testenv.Env) *istioclient.Clientset {
	t.Helper()
	c, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGatewayAPIExperimentalRetry: a rule's retry, a field of the
// experimental channel's CRD (which the API server's validation checks),
// reaches the route the index serves.
func TestGatewayAPIExperimentalRetry(t *testing.T) {
	env := ownAPIServer(t)
	env.InstallGatewayAPICRDs(t, "experimental")
	ns := env.Namespace(t, nil)
	r, err := NewForConfig(env.Config, Options{Namespaces: []string{ns}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	routes := NewRoutes(r, RouteOptions{})
	runRegistry(t, r)
	hr := parseHTTPRoute(t, `metadata: {name: cart, namespace: `+ns+`}
spec:
  parentRefs: [{group: "", kind: Service, name: cart}]
  rules:
  - retry: {attempts: 3, codes: [503], backoff: 100ms}
    timeouts: {request: 10s, backendRequest: 2s}
    backendRefs: [{name: cart, port: 80}]`)
	if _, err := gatewayClient(t, env).GatewayV1().HTTPRoutes(ns).Create(t.Context(), hr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	host := model.ServiceHostname("cart", ns, "")
	testenv.Eventually(t, "the route's retry served", func() (bool, string) {
		vs, _ := routes.VirtualServiceFor(host, ns)
		if vs == nil || len(vs.HTTP) != 1 || vs.HTTP[0].Retries == nil {
			return false, fmt.Sprintf("%+v", vs)
		}
		rt := vs.HTTP[0].Retries
		return rt.Attempts == 3 && rt.PerTryTimeout == 2*time.Second && rt.Backoff == 100*time.Millisecond &&
			strings.HasSuffix(rt.RetryOn, ",503"), fmt.Sprintf("%+v", rt)
	})
}

func runRegistry(t *testing.T, r *Registry) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
