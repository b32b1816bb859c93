package crd

import (
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestConvertHTTPRouteRedirect: a RequestRedirect's scheme, port and
// path replacements reach the route as istiod reads them (the mesh
// conformance scenarios MeshHTTPRouteRedirectPath, ...Port and
// MeshHTTPRouteSchemeRedirect): no port keeps the request's, unless a
// scheme is set, which takes its own default port.
func TestConvertHTTPRouteRedirect(t *testing.T) {
	const parent = `metadata: {name: r, namespace: shop}
spec:
  parentRefs: [{group: "", kind: Service, name: cart}]
  rules:
  - filters: [{type: RequestRedirect, requestRedirect: `
	for _, tc := range []struct {
		name, filter string
		want         model.HTTPRedirect
	}{
		{"nothing but the status", `{statusCode: 301}`, model.HTTPRedirect{Code: 301, PortFromRequest: true}},
		{"a port", `{port: 8083}`, model.HTTPRedirect{Code: 302, Port: 8083}},
		{"a scheme, no port", `{scheme: https}`, model.HTTPRedirect{Code: 302, Scheme: "https"}},
		{"a scheme and a port", `{scheme: https, port: 8443, hostname: example.org}`, model.HTTPRedirect{Code: 302, Scheme: "https", Port: 8443, Authority: "example.org"}},
		{"a prefix replaced", `{path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}}`, model.HTTPRedirect{Code: 302, PrefixRewrite: "/new", PortFromRequest: true}},
		{"the full path replaced", `{path: {type: ReplaceFullPath, replaceFullPath: /full}}`, model.HTTPRedirect{Code: 302, URI: "/full", PortFromRequest: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ConvertHTTPRoute(parseHTTPRoute(t, parent+tc.filter+`}]`), GatewayConvertOptions{})
			if got.Status.Refused != nil {
				t.Fatalf("refused: %+v", *got.Status.Refused)
			}
			if len(got.Status.IgnoredEnvoy) != 0 {
				t.Errorf("not for Envoy: %+v", got.Status.IgnoredEnvoy)
			}
			var rd *model.HTTPRedirect
			for _, p := range got.Parents {
				for _, r := range p.Rules {
					if r.Redirect != nil {
						rd = r.Redirect
					}
				}
			}
			if rd == nil || *rd != tc.want {
				t.Errorf("redirect %+v, want %+v", rd, tc.want)
			}
		})
	}
}
