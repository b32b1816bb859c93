package translate

import (
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
)

// goldenGatewayRoutes converts a golden input's HTTPRoutes and
// GRPCRoutes and merges them as the Kubernetes source does, its services
// being the Services that exist. A refused route fails the case.
func goldenGatewayRoutes(t testing.TB, in *goldenInput, suffix string) []*model.VirtualService {
	t.Helper()
	opts := crd.GatewayConvertOptions{
		DomainSuffix: suffix,
		Grants:       in.ReferenceGrants,
		ServiceExists: func(ns, name string) bool {
			for _, s := range in.Services {
				if s.Namespace == ns && s.Name == name {
					return true
				}
			}
			return false
		},
	}
	var routes []*crd.GatewayRoute
	for _, obj := range in.HTTPRoutes {
		routes = append(routes, crd.ConvertHTTPRoute(obj, opts))
	}
	for _, obj := range in.GRPCRoutes {
		routes = append(routes, crd.ConvertGRPCRoute(obj, opts))
	}
	for _, r := range routes {
		if r.Status.Refused != nil {
			t.Fatalf("%s %s/%s is refused: %s: %s", r.Kind, r.Namespace, r.Name, r.Status.Refused.Path, r.Status.Refused.Why)
		}
	}
	return crd.MergeGatewayRoutes(routes)
}
