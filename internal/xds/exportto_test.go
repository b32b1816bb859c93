package xds

import (
	"slices"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// exported is a service of namespace ns with one gRPC port, exported to
// exportTo.
func exported(name, ns string, port int32, exportTo ...string) *model.Service {
	s := service(name, ns, port)
	s.ExportTo = exportTo
	return s
}

// TestExportToSharesTheCommonCase: a service exported to all is one
// marshalled resource per type for clients of every namespace; only a
// service whose exportTo restricts it is built per namespace, once for
// each namespace that sees it, and clients of a namespace it is not
// exported to get nothing for it.
func TestExportToSharesTheCommonCase(t *testing.T) {
	st := model.NewStore()
	api := service("api", "shop", 80)
	cart := exported("cart", "shop", 9080, ".", "web")
	st.Update(api, endpoints(80, model.Healthy, "10.0.0.1"))
	st.Update(cart, endpoints(9080, model.Healthy, "10.0.0.2"))
	ts := startServer(t, st)
	cc := dial(t, ts.addr)

	names := func(svc *model.Service) map[string]string {
		c := model.ClusterName(svc.Ports[0].Port, "", svc.Hostname)
		return map[string]string{
			resource.ListenerType: string(svc.Hostname) + ":" + itoa(int(svc.Ports[0].Port)),
			resource.RouteType:    c, resource.ClusterType: c, resource.EndpointType: c,
		}
	}
	apiNames, cartNames := names(api), names(cart)
	namespaces := []string{"shop", "web", "other", "shop", "web", "other"}
	for i, ns := range namespaces {
		a := openADS(t, cc, grpcNode("c"+itoa(i), ns))
		for _, typ := range []string{resource.ListenerType, resource.RouteType, resource.ClusterType, resource.EndpointType} {
			a.Subscribe(typ, apiNames[typ], cartNames[typ])
			r := a.Next()
			want := []string{apiNames[typ], cartNames[typ]}
			if ns == "other" {
				want = want[:1]
			}
			if got := r.Names(); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
				t.Fatalf("client of %s, %s: got %v, want %v", ns, typ, got, want)
			}
			a.ACK(r)
		}
	}
	// api: one per type for all six clients; cart: one per type for each
	// of shop and web, none for other.
	if got, want := ts.Stats().Marshals, uint64(4+4*2); got != want {
		t.Fatalf("%d marshals, want %d", got, want)
	}
}

// TestExportToWildcard: Envoy's wildcard subscriptions (state of the
// world and delta) list every service's names, but a client is sent only
// what it may see; a change of exportTo adds the service for a namespace
// it is now exported to and removes it when it is no longer.
func TestExportToWildcard(t *testing.T) {
	st := model.NewStore()
	api := service("api", "shop", 80)
	st.Update(api, endpoints(80, model.Healthy, "10.0.0.1"))
	st.Update(exported("cart", "shop", 9080, "."), endpoints(9080, model.Healthy, "10.0.0.2"))
	ts := startServer(t, st)
	cc := dial(t, ts.addr)
	apiCluster := model.ClusterName(80, "", api.Hostname)
	cartCluster := model.ClusterName(9080, "", "cart.shop.svc.cluster.local")
	node := func(id, ns string) *core.Node {
		return xdstest.EnvoyNode(xdstest.NodeOptions{ID: id, Namespace: ns})
	}

	shop := openADS(t, cc, node("shop", "shop"))
	web := openADS(t, cc, node("web", "web"))
	webDelta := openDelta(t, cc, node("web-delta", "web"))
	for _, c := range []struct {
		client *xdstest.TestClient
		want   []string
	}{
		{shop, []string{apiCluster, cartCluster}},
		{web, []string{apiCluster}},
		{webDelta, []string{apiCluster}},
	} {
		c.client.Subscribe(resource.ClusterType)
		r := c.client.Next()
		if got := sortedNames(r); !slices.Equal(got, c.want) {
			t.Fatalf("%s: wildcard CDS %v, want %v", c.client.Node().GetId(), got, c.want)
		}
		c.client.ACK(r)
	}

	st.Update(exported("cart", "shop", 9080, ".", "web"), endpoints(9080, model.Healthy, "10.0.0.2"))
	r := web.Next()
	if got := sortedNames(r); !slices.Equal(got, []string{apiCluster, cartCluster}) {
		t.Fatalf("web's wildcard CDS once cart is exported to web: %v", got)
	}
	web.ACK(r)
	r = webDelta.Next()
	if got := sortedNames(r); !slices.Equal(got, []string{cartCluster}) || len(r.Removed) != 0 {
		t.Fatalf("web's delta once cart is exported to web: %v, removed %v", got, r.Removed)
	}
	webDelta.ACK(r)

	st.Update(exported("cart", "shop", 9080, "."), endpoints(9080, model.Healthy, "10.0.0.2"))
	r = web.Next()
	if got := sortedNames(r); !slices.Equal(got, []string{apiCluster}) {
		t.Fatalf("web's wildcard CDS once cart is hidden again: %v", got)
	}
	web.ACK(r)
	r = webDelta.Next()
	if len(r.Resources) != 0 || !slices.Equal(r.Removed, []string{cartCluster}) {
		t.Fatalf("web's delta once cart is hidden again: %v, removed %v", sortedNames(r), r.Removed)
	}
}

// TestExportToGRPCClients: real grpc-go xDS clients. A client of the
// service's namespace reaches a service exported to ".", one of another
// namespace does not: when exportTo stops naming its namespace, its
// listener goes and its RPCs fail with UNAVAILABLE, while the client of
// the service's namespace keeps being served; exported again, it
// recovers.
func TestExportToGRPCClients(t *testing.T) {
	b := grpctest.StartBackend(t, "127.0.0.2", 0)
	st := model.NewStore()
	eps := backendEndpoints(nil, b)
	st.Update(exported("cart", "shop", int32(b.Port)), eps)
	ts := startServer(t, st)
	target := "xds:///cart.shop.svc.cluster.local:" + itoa(int(b.Port))
	shop := xdsChannel(t, ts.addr, "shop", target)
	web := xdsChannel(t, ts.addr, "web", target)
	grpctest.AwaitSpread(t, shop, b)
	grpctest.AwaitSpread(t, web, b)

	st.Update(exported("cart", "shop", int32(b.Port), "."), eps)
	grpctest.AwaitUnavailable(t, web)
	grpctest.AwaitSpread(t, shop, b)

	st.Update(exported("cart", "shop", int32(b.Port), ".", "web"), eps)
	grpctest.AwaitSpread(t, web, b)
}
