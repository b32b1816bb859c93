package crd

import (
	"slices"
	"strings"
	"testing"

	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

// TestConvertHTTPRouteParentAsBackend: a route of another namespace may
// send its requests to the Service it attaches to without a
// ReferenceGrant (the mesh conformance scenario MeshConsumerRoute); any
// other Service of that namespace still needs one.
func TestConvertHTTPRouteParentAsBackend(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		grants    []*gatewayv1beta1.ReferenceGrant
		want      []string
	}{
		{
			name: "the parent Service as backend, no grant",
			doc: `metadata: {name: r, namespace: web}
spec:
  parentRefs: [{group: "", kind: Service, name: cart, namespace: shop}]
  rules:
  - backendRefs: [{name: cart, namespace: shop, port: 80}]`,
			want: []string{"cart.shop consumer", "  web.r.0 [uri^=/] -> cart.shop:80@100",
				"cart: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
		},
		{
			name: "another Service of the parent's namespace still needs a grant",
			doc: `metadata: {name: r, namespace: web}
spec:
  parentRefs: [{group: "", kind: Service, name: cart, namespace: shop}]
  rules:
  - backendRefs: [{name: cart, namespace: shop, port: 80}, {name: cart-canary, namespace: shop, port: 80}]`,
			want: []string{"cart.shop consumer", "  web.r.0 [uri^=/] -> cart.shop:80@100",
				"cart: Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted"},
		},
		{
			name: "a Service of the same name in a third namespace needs a grant",
			doc: `metadata: {name: r, namespace: web}
spec:
  parentRefs: [{group: "", kind: Service, name: cart, namespace: shop}]
  rules:
  - backendRefs: [{name: cart, namespace: ops, port: 80}, {name: local, port: 80}]`,
			grants: []*gatewayv1beta1.ReferenceGrant{grant("web", "shop", "HTTPRoute")},
			want: []string{"cart.shop consumer", "  web.r.0 [uri^=/] -> local.web:80@100",
				"cart: Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ConvertHTTPRoute(parseHTTPRoute(t, tc.doc), GatewayConvertOptions{Grants: tc.grants})
			if got.Status.Refused != nil {
				t.Fatalf("refused: %+v", *got.Status.Refused)
			}
			if d := describeRoute(got); !slices.Equal(d, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(d, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
