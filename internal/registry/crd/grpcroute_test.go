package crd

import (
	"slices"
	"strings"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/meshpilot/meshpilot/internal/configstatus/statustest"
)

func parseGRPCRoute(t *testing.T, doc string) *gatewayv1.GRPCRoute {
	t.Helper()
	var r gatewayv1.GRPCRoute
	if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
		t.Fatal(err)
	}
	if r.Namespace == "" {
		r.Namespace = "shop"
	}
	return &r
}

// TestConvertGRPCRoute: a GRPCRoute's method and header matches as paths
// and headers, as istiod's createGRPCURIMatch writes them.
func TestConvertGRPCRoute(t *testing.T) {
	const parent = "metadata: {name: g}\nspec:\n  parentRefs: [{group: \"\", kind: Service, name: cart}]\n"
	for _, tc := range []struct {
		name   string
		doc    string
		want   []string
		grpc   []string
		envoy  []string
		refuse string
	}{
		{
			name: "method kinds",
			doc: parent + `  rules:
  - matches:
    - method: {service: shop.Cart, method: Checkout}
    - method: {service: shop.Cart}
    - method: {method: Ping}
    - method: {type: RegularExpression, service: "shop\\.Cart", method: "Get.*"}
    - method: {type: RegularExpression, service: "shop\\.Admin"}
    - headers: [{name: X-Tenant, value: acme}, {name: x-tier, type: RegularExpression, value: "gold|silver"}]
    backendRefs: [{name: v2, port: 9090}]
  - backendRefs: [{name: v1, port: 9090}]`,
			want: []string{"cart.shop producer",
				"  shop.g.0 [uri=/shop.Cart/Checkout] -> v2.shop:9090@100",
				"  shop.g.0 [uri^=/shop.Cart/] -> v2.shop:9090@100",
				"  shop.g.0 [uri~=/[^/]+/Ping] -> v2.shop:9090@100",
				`  shop.g.0 [uri~=/shop\.Cart/Get.*] -> v2.shop:9090@100`,
				`  shop.g.0 [uri~=/shop\.Admin/.+] -> v2.shop:9090@100`,
				"  shop.g.0 [x-tenant=acme x-tier~=gold|silver] -> v2.shop:9090@100",
				"  shop.g.1 -> v1.shop:9090@100",
				"cart: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
		},
		{
			name: "header changes and a mirror are for Envoy; weights",
			doc: parent + `  rules:
  - filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {add: [{name: x-route, value: grpc}]}
    - type: RequestMirror
      requestMirror: {backendRef: {name: shadow, port: 9090}, percent: 10}
    backendRefs:
    - name: v1
      port: 9090
      weight: 1
      filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-b, value: "1"}]}}]
    - {name: v2, port: 9090, weight: 3}`,
			want: []string{"cart.shop producer",
				"  shop.g.0 -> v1.shop:9090@1 v2.shop:9090@3 mirror=shadow.shop:9090@10 headers=map[]map[x-route:grpc][]/map[]map[][]",
				"cart: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
			grpc: []string{"spec.rules[0].filters[0]", "spec.rules[0].filters[1].requestMirror", "spec.rules[0].backendRefs[0].filters"},
		},
		{
			name: "an unsupported filter fails the rule",
			doc: parent + `  rules:
  - filters: [{type: ExtensionRef, extensionRef: {group: example.com, kind: Plugin, name: p}}]
    backendRefs: [{name: v1, port: 9090}]`,
			want: []string{"cart.shop producer", "  shop.g.0 -> answer 500",
				"cart: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs"},
			grpc:  []string{"spec.rules[0].filters[0]"},
			envoy: []string{"spec.rules[0].filters[0]"},
		},
		{
			name: "a method regular expression that is not RE2 is refused",
			doc: parent + `  rules:
  - matches: [{method: {type: RegularExpression, service: "(?<=a)", method: M}}]
    backendRefs: [{name: v1, port: 9090}]`,
			refuse: "spec.rules[0].matches[0].method",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ConvertGRPCRoute(parseGRPCRoute(t, tc.doc), GatewayConvertOptions{})
			statustest.Check(t, got.Status, false)
			if tc.refuse != "" {
				if got.Status.Refused == nil || got.Status.Refused.Path != tc.refuse {
					t.Fatalf("refused %+v, want %s", got.Status.Refused, tc.refuse)
				}
				return
			}
			if got.Status.Refused != nil {
				t.Fatalf("refused: %+v", *got.Status.Refused)
			}
			if d := describeRoute(got); !slices.Equal(d, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(d, "\n"), strings.Join(tc.want, "\n"))
			}
			checkPaths(t, "gRPC", got.Status.IgnoredGRPC, tc.grpc)
			checkPaths(t, "Envoy", got.Status.IgnoredEnvoy, tc.envoy)
		})
	}
}
