package translate

import (
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestVirtualServiceRedirectAndOtherPort: a redirect goes to gRPC
// clients as to Envoy, as istiod sends it (grpc-go fails the RPCs it
// matches); and a VirtualService whose routes all match another port
// leaves this port's default route.
func TestVirtualServiceRedirectAndOtherPort(t *testing.T) {
	st := model.NewStore()
	svc := service("reviews", "default", 9080)
	st.Update(svc, nil)
	host := svc.Hostname
	name := model.ClusterName(9080, "", host)
	routes := &testRoutes{}
	g := &routeGenerator{GeneratorOptions{Discovery: st, Routes: routes}}
	grpcClient, envoy := &Client{GRPC: true, Namespace: "default"}, &Client{Namespace: "default"}
	first := func(c *Client) *route.Route {
		return g.Generate(c, name).Resource.(*route.RouteConfiguration).GetVirtualHosts()[0].GetRoutes()[0]
	}
	redirect := &model.VirtualService{Namespace: "default", Name: "r", Hosts: []model.Hostname{host},
		HTTP: []model.HTTPRoute{{Redirect: &model.HTTPRedirect{URI: "/elsewhere"}}}}
	routes.set(redirect)
	for _, c := range []*Client{grpcClient, envoy} {
		if r := first(c); r.GetRedirect().GetPathRedirect() != "/elsewhere" {
			t.Errorf("grpc %v: %v, want the redirect", c.GRPC, r)
		}
	}
	if res := g.Generate(grpcClient, name); res.Vary&VaryKind == 0 {
		t.Errorf("vary %v: the answer depends on the client's kind", res.Vary)
	}
	otherPort := &model.VirtualService{Namespace: "default", Name: "p", Hosts: []model.Hostname{host},
		HTTP: []model.HTTPRoute{{Match: []model.HTTPMatch{{Port: 9090}}, Route: []model.RouteDestination{{Host: host, Subset: "v1", Weight: 100}}}}}
	routes.set(otherPort)
	for _, c := range []*Client{grpcClient, envoy} {
		if r := first(c); r.GetRoute().GetCluster() != name {
			t.Errorf("grpc %v: %v, want the default route", c.GRPC, r)
		}
	}
}

// TestVirtualServiceByClientNamespace: a VirtualService exported to its
// own namespace routes that namespace's clients only, and the route then
// varies by namespace; one exported to all does not.
func TestVirtualServiceByClientNamespace(t *testing.T) {
	st := model.NewStore()
	svc := service("reviews", "default", 9080)
	st.Update(svc, nil)
	name := model.ClusterName(9080, "", svc.Hostname)
	v1 := model.ClusterName(9080, "v1", svc.Hostname)
	routes := &testRoutes{}
	g := &routeGenerator{GeneratorOptions{Discovery: st, Routes: routes}}
	vs := &model.VirtualService{Namespace: "team", Name: "r", Hosts: []model.Hostname{svc.Hostname},
		HTTP: []model.HTTPRoute{{Route: []model.RouteDestination{{Host: svc.Hostname, Subset: "v1", Weight: 100}}}}}
	for _, tc := range []struct {
		exportTo []string
		clientNS string
		want     string
		vary     Vary
	}{
		{[]string{"."}, "team", v1, VaryKind | VaryNamespace},
		{[]string{"."}, "other", name, VaryNamespace},
		{nil, "other", v1, VaryKind},
	} {
		v := *vs
		v.ExportTo = tc.exportTo
		routes.set(&v)
		res := g.Generate(&Client{GRPC: true, Namespace: tc.clientNS}, name)
		got := res.Resource.(*route.RouteConfiguration).GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetCluster()
		if got != tc.want || res.Vary != tc.vary {
			t.Errorf("exportTo %v, client in %s: cluster %s, vary %b; want %s, %b", tc.exportTo, tc.clientNS, got, res.Vary, tc.want, tc.vary)
		}
	}
}
