package xds

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// testRoutes is a RouteIndex a test replaces; a change is pushed by the
// test.
type testRoutes struct {
	r atomic.Pointer[model.StaticRoutes]
}

func (t *testRoutes) set(vss ...*model.VirtualService) { t.r.Store(model.NewStaticRoutes(vss)) }

func (t *testRoutes) VirtualServiceFor(h model.Hostname, clientNS string) (*model.VirtualService, bool) {
	return t.r.Load().VirtualServiceFor(h, clientNS)
}

func withRoutes(r *testRoutes) serverOpt { return func(o *Options) { o.Routes = r } }

// TestVirtualServiceChangeWakesOnlyItsRoutes: a VirtualService change is
// pushed as the key of its host: it regenerates only that host's route
// and reaches only the client subscribed to it, not the one holding
// another host's route.
func TestVirtualServiceChangeWakesOnlyItsRoutes(t *testing.T) {
	st := model.NewStore()
	st.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.1"))
	st.Update(service("ratings", "default", 9080), endpoints(9080, model.Healthy, "10.0.1.1"))
	routes := &testRoutes{}
	routes.set()
	ts := startServer(t, st, withRoutes(routes))
	reviewsHost, ratingsHost := model.ServiceHostname("reviews", "default", ""), model.ServiceHostname("ratings", "default", "")
	reviewsRoute, ratingsRoute := model.ClusterName(9080, "", reviewsHost), model.ClusterName(9080, "", ratingsHost)
	a := openADS(t, dial(t, ts.addr), grpcNode("a", "default"))
	a.Subscribe(resource.RouteType, reviewsRoute)
	a.ACK(a.Next())
	b := openADS(t, dial(t, ts.addr), grpcNode("b", "default"))
	b.Subscribe(resource.RouteType, ratingsRoute)
	b.ACK(b.Next())
	deadline := time.Now().Add(wait)
	for waiting(ts.Server, model.VirtualServiceKey(reviewsHost)) != 1 || waiting(ts.Server, model.VirtualServiceKey(ratingsHost)) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the clients' watches never waited on their hosts' VirtualService keys")
		}
		time.Sleep(5 * time.Millisecond) // polling
	}

	routes.set(&model.VirtualService{Namespace: "default", Name: "reviews", Hosts: []model.Hostname{reviewsHost},
		HTTP: []model.HTTPRoute{{Route: []model.RouteDestination{{Host: reviewsHost, Subset: "v1", Weight: 100}}, Timeout: time.Second}}})
	before := len(ts.logs.String())
	ts.Push(pushOf(model.Event{Kind: model.ConfigChanged, Config: model.VirtualServiceKey(reviewsHost)}))
	r := a.Next()
	a.ACK(r)
	got := a.RouteConfiguration(reviewsRoute).GetVirtualHosts()[0].GetRoutes()[0].GetRoute()
	if got.GetCluster() != model.ClusterName(9080, "v1", reviewsHost) || got.GetMaxStreamDuration().GetMaxStreamDuration().AsDuration() != time.Second {
		t.Fatalf("reviews' route after the push: %v", got)
	}
	if log := ts.logs.String()[before:]; !strings.Contains(log, "watches=1 ") {
		t.Errorf("the push woke more than reviews' route watch:\n%s", log)
	}
	// b's next response is its own host's next change, not reviews'.
	routes.set(&model.VirtualService{Namespace: "default", Name: "ratings", Hosts: []model.Hostname{ratingsHost},
		HTTP: []model.HTTPRoute{{Route: []model.RouteDestination{{Host: ratingsHost, Subset: "v2", Weight: 100}}}}})
	ts.Push(pushOf(model.Event{Kind: model.ConfigChanged, Config: model.VirtualServiceKey(ratingsHost)}))
	b.ACK(b.Next())
	if c := b.RouteConfiguration(ratingsRoute).GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetCluster(); c != model.ClusterName(9080, "v2", ratingsHost) {
		t.Fatalf("ratings' route: cluster %s", c)
	}
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("%d NACKs:\n%s", n, ts.logs.String())
	}
}

// TestVirtualServiceNotForGRPC: a VirtualService gRPC clients cannot
// honour leaves them the default route, while Envoy gets its routes; and
// a VirtualService whose routes all match another port leaves this
// port's default route.
func TestVirtualServiceNotForGRPC(t *testing.T) {
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
	redirect := &model.VirtualService{Namespace: "default", Name: "r", Hosts: []model.Hostname{host}, NotForGRPC: "spec.http[0].redirect",
		HTTP: []model.HTTPRoute{{Redirect: &model.HTTPRedirect{URI: "/elsewhere"}}}}
	routes.set(redirect)
	if r := first(grpcClient); r.GetRoute().GetCluster() != name {
		t.Errorf("gRPC client: %v, want the default route", r)
	}
	if r := first(envoy); r.GetRedirect().GetPathRedirect() != "/elsewhere" {
		t.Errorf("Envoy: %v, want the redirect", r)
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
