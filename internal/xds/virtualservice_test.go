package xds

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
