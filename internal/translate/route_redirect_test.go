package translate

import (
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestRedirectAction: a redirect's scheme, port and path replacement as
// istiod writes them for Envoy; the request's port is the route's, and
// a scheme's own port is left out of the location.
func TestRedirectAction(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   model.HTTPRedirect
		port int32
		want *route.RedirectAction
	}{
		{"the request's port, not http's own", model.HTTPRedirect{Code: 302, PortFromRequest: true}, 8080,
			&route.RedirectAction{ResponseCode: route.RedirectAction_FOUND, PortRedirect: 8080}},
		{"the request's port, http's own: left out", model.HTTPRedirect{Code: 302, PortFromRequest: true}, 80,
			&route.RedirectAction{ResponseCode: route.RedirectAction_FOUND}},
		{"a port", model.HTTPRedirect{Code: 302, Port: 8083}, 80,
			&route.RedirectAction{ResponseCode: route.RedirectAction_FOUND, PortRedirect: 8083}},
		{"https on 443: left out", model.HTTPRedirect{Code: 301, Scheme: "https", Port: 443}, 80,
			&route.RedirectAction{SchemeRewriteSpecifier: &route.RedirectAction_SchemeRedirect{SchemeRedirect: "https"}}},
		{"a scheme alone: its default port", model.HTTPRedirect{Code: 302, Scheme: "https", Authority: "example.org"}, 8080,
			&route.RedirectAction{ResponseCode: route.RedirectAction_FOUND, HostRedirect: "example.org",
				SchemeRewriteSpecifier: &route.RedirectAction_SchemeRedirect{SchemeRedirect: "https"}}},
		{"a prefix replaced", model.HTTPRedirect{Code: 303, PrefixRewrite: "/new", PortFromRequest: true}, 80,
			&route.RedirectAction{ResponseCode: route.RedirectAction_SEE_OTHER, PathRewriteSpecifier: &route.RedirectAction_PrefixRewrite{PrefixRewrite: "/new"}}},
		{"the full path replaced", model.HTTPRedirect{Code: 308, URI: "/full"}, 80,
			&route.RedirectAction{ResponseCode: route.RedirectAction_PERMANENT_REDIRECT, PathRewriteSpecifier: &route.RedirectAction_PathRedirect{PathRedirect: "/full"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := redirectAction(&tc.in, tc.port).Redirect
			if !proto.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if err := got.ValidateAll(); err != nil {
				t.Error(err)
			}
		})
	}
}
