package file

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/meshpilot/meshpilot/internal/registry/crd"
)

const goodHTTPRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: cart, namespace: shop}
spec:
  parentRefs: [{group: "", kind: Service, name: cart, port: 8080}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /api}}]
    backendRefs: [{name: cart-v2, port: 8080, weight: 1}]
  - backendRefs: [{name: cart, port: 8080}]
`

const goodGRPCRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: reviews, namespace: shop}
spec:
  parentRefs: [{group: "", kind: Service, name: reviews}]
  rules:
  - matches: [{method: {service: shop.Reviews, method: Delete}}]
    backendRefs: [{name: reviews-v2, port: 9090}]
`

const goodReferenceGrant = `apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: web-routes, namespace: shop}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: web}]
  to: [{group: "", kind: Service}]
`

// The Gateway API kinds join the parser's tables (parse_test.go), so
// that TestVerdictsAgreeWithTheAPIServer holds them to the API server
// with the standard channel's CRDs, whose CEL rules run.
func init() {
	validManifests = append(validManifests,
		validCase{"an HTTPRoute", goodHTTPRoute, []string{"HTTPRoute"}},
		validCase{"an HTTPRoute (v1beta1)", strings.Replace(goodHTTPRoute, "/v1\n", "/v1beta1\n", 1), []string{"HTTPRoute"}},
		validCase{"a GRPCRoute", goodGRPCRoute, []string{"GRPCRoute"}},
		validCase{"a ReferenceGrant", goodReferenceGrant, []string{"ReferenceGrant"}},
		validCase{"a ReferenceGrant (v1)", strings.Replace(goodReferenceGrant, "/v1beta1", "/v1", 1), []string{"ReferenceGrant"}},
	)
	invalidManifests = append(invalidManifests,
		invalidCase{"an unknown field in an HTTPRoute rule", strings.Replace(goodHTTPRoute, "backendRefs: [{name: cart,", "backends: [{name: cart,", 1),
			1, 1, "spec.rules[1].backends", "unknown field"},
		invalidCase{"a Service backend without a port", strings.Replace(goodHTTPRoute, "{name: cart, port: 8080}", "{name: cart}", 1),
			1, 1, "spec.rules[1].backendRefs[0]", "needs a port"},
		invalidCase{"a weight beyond the maximum", strings.Replace(goodHTTPRoute, "weight: 1}", "weight: 1000001}", 1),
			1, 1, "spec.rules[0].backendRefs[0].weight", "Invalid value"},
		invalidCase{"a relative path prefix", strings.Replace(goodHTTPRoute, "value: /api", "value: api", 1),
			1, 1, "spec.rules[0].matches[0].path", "absolute path"},
		invalidCase{"a GRPCRoute method match without service and method", strings.Replace(goodGRPCRoute, "{service: shop.Reviews, method: Delete}", "{type: Exact}", 1),
			1, 1, "spec.rules[0].matches[0].method", "Required value"},
		invalidCase{"a GRPCRoute apiVersion the CRD does not serve", strings.Replace(goodGRPCRoute, "/v1\n", "/v1alpha2\n", 1),
			1, 1, "apiVersion", `"gateway.networking.k8s.io/v1"`},
	)
}

// TestParseGatewayKinds: each kind decodes into the type the Istio
// registry's informers hand out, at the version it reads, whichever the
// file names; status is dropped.
func TestParseGatewayKinds(t *testing.T) {
	data := strings.Replace(goodHTTPRoute, "/v1\n", "/v1beta1\n", 1) + "status: {parents: []}\n---\n" + goodGRPCRoute + "---\n" + strings.Replace(goodReferenceGrant, "/v1beta1", "/v1", 1)
	objs, problems := ParseFile("f.yaml", []byte(data))
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	if len(objs) != 3 {
		t.Fatalf("%d objects", len(objs))
	}
	hr, ok := objs[0].Obj.(*gatewayv1.HTTPRoute)
	if !ok || hr.APIVersion != "gateway.networking.k8s.io/v1" || len(hr.Spec.Rules) != 2 {
		t.Fatalf("HTTPRoute: %#v", objs[0].Obj)
	}
	if _, ok := objs[1].Obj.(*gatewayv1.GRPCRoute); !ok {
		t.Fatalf("GRPCRoute: %#v", objs[1].Obj)
	}
	rg, ok := objs[2].Obj.(*gatewayv1beta1.ReferenceGrant)
	if !ok || rg.APIVersion != "gateway.networking.k8s.io/v1beta1" {
		t.Fatalf("ReferenceGrant: %#v", objs[2].Obj)
	}
}

// TestIstioStoreGatewayKinds: a folder's routes and grants are read
// through the store and each change is one event.
func TestIstioStoreGatewayKinds(t *testing.T) {
	dir := t.TempDir()
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	store := r.Istio()
	var got []string
	store.AppendEventHandler(func(ev crd.Event) { got = append(got, ev.String()) })
	write := func(content string) {
		if err := os.WriteFile(filepath.Join(dir, "routes.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got = nil
		r.reload(nil, time.Time{})
	}
	const ns = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\n"
	write(ns + goodHTTPRoute + "---\n" + goodGRPCRoute + "---\n" + goodReferenceGrant)
	if want := []string{"HTTPRoute shop/cart", "GRPCRoute shop/reviews", "ReferenceGrant shop/web-routes"}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q (problems: %s)", got, want, describe(r.Problems()))
	}
	if store.HTTPRoute("shop", "cart") == nil || len(store.GRPCRoutes()) != 1 || len(store.ReferenceGrants()) != 1 {
		t.Fatalf("reads: %v %v %v", store.HTTPRoute("shop", "cart"), store.GRPCRoutes(), store.ReferenceGrants())
	}
	if w := store.Where(crd.GRPCRoute, "shop", "reviews"); !strings.HasSuffix(w, "routes.yaml:15 (document 3)") {
		t.Fatalf("GRPCRoute at %q", w)
	}
	write(ns + strings.Replace(goodHTTPRoute, "weight: 1}", "weight: 2}", 1) + "---\n" + goodGRPCRoute + "---\n" + goodReferenceGrant)
	if want := []string{"HTTPRoute shop/cart"}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}
