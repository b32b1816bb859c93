package xds

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate/translatetest"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// testMesh is mesh settings a test changes; a change is pushed by the
// test.
type testMesh = translatetest.Mesh

func withMesh(m *testMesh) serverOpt { return func(o *Options) { o.Mesh = m } }

var meshChanged = model.Event{Kind: model.ConfigChanged, Config: model.MeshRetryKey}

// TestMeshChangeWakesOnlyRoutes: a change of the mesh settings is a
// change of every route configuration and of nothing else: a client that
// holds only endpoints is not woken.
func TestMeshChangeWakesOnlyRoutes(t *testing.T) {
	mesh := &testMesh{}
	ts := startServer(t, baseStore(), withMesh(mesh))
	// Both clients wait, each under the keys of what it holds.
	reviewsHost := model.Hostname("reviews.default.svc.cluster.local")
	routes, eds := reviewsReaders(t, ts, model.MeshRetryKey, model.EndpointsKey(reviewsHost))
	// istiod's default: 2 retries (internal/translate's TestRetryPolicy
	// holds the rest of it).
	if p := routeRetry(routes.RouteConfiguration(reviews)); p.GetNumRetries().GetValue() != 2 {
		t.Fatalf("retry policy %v, want istiod's default", p)
	}

	mesh.Set(&model.MeshSettings{DefaultHTTPRetry: &model.HTTPRetry{Attempts: 0}})
	before := len(ts.logs.String())
	ts.Push(pushOf(meshChanged))
	r := routes.Next()
	routes.ACK(r)
	if p := routeRetry(routes.RouteConfiguration(reviews)); r.TypeURL != resource.RouteType || p != nil {
		t.Fatalf("after attempts 0: %s with retry policy %v, want the route without one", r.TypeURL, p)
	}
	if log := ts.logs.String()[before:]; !strings.Contains(log, "watches=1 ") {
		t.Errorf("the push woke more than the route watch:\n%s", log)
	}
	// The EDS client's first response after that is its next change.
	ts.store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.9"))
	if got := claAddrs(t, eds.Next()); len(got[reviews]) != 1 || got[reviews][0] != "10.0.0.9" {
		t.Fatalf("EDS client got %v, want reviews' new endpoint", got)
	}
}

// reviewsReaders opens a client holding reviews' route configuration and
// one holding its endpoints, and waits until one watch waits on each key.
func reviewsReaders(t *testing.T, ts *testServer, keys ...model.ConfigKey) (routes, eds *xdstest.TestClient) {
	t.Helper()
	routes = openADS(t, dial(t, ts.addr), grpcNode("routes", "default"))
	routes.Subscribe(resource.RouteType, reviews)
	routes.ACK(routes.Next())
	eds = openADS(t, dial(t, ts.addr), grpcNode("eds", "default"))
	eds.Subscribe(resource.EndpointType, reviews)
	eds.ACK(eds.Next())
	deadline := time.Now().Add(wait)
	for slices.ContainsFunc(keys, func(k model.ConfigKey) bool { return waiting(ts.Server, k) != 1 }) {
		if time.Now().After(deadline) {
			t.Fatal("the clients' watches never waited")
		}
		time.Sleep(5 * time.Millisecond) // polling
	}
	return routes, eds
}

// waiting counts the watches waiting on a change of k.
func waiting(s *Server, k model.ConfigKey) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := map[*registration]struct{}{}
	s.watches.collect(k, rs)
	n := 0
	for r := range rs {
		if r.current != nil {
			n++
		}
	}
	return n
}

// registrations counts what the watch index holds: a type's
// registration outlives its watches, never its stream.
func registrations(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := map[*registration]struct{}{}
	s.watches.all(rs)
	return len(rs)
}

func routeRetry(rc *route.RouteConfiguration) *route.RetryPolicy {
	return rc.GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetRetryPolicy()
}

// TestGRPCMeshRetryOff: MeshConfig's defaultHttpRetryPolicy with
// attempts 0 turns retries off, and a real grpc-go client then sees the
// backend's UNAVAILABLE; back to the default, it retries again.
func TestGRPCMeshRetryOff(t *testing.T) {
	b := grpctest.StartFirstAttemptFails(t, "127.0.0.2")
	st := model.NewStore()
	st.Update(service("flaky", "default", 9080), backendEndpoints(nil, b.Backend))
	mesh := &testMesh{}
	mesh.Set(&model.MeshSettings{DefaultHTTPRetry: &model.HTTPRetry{Attempts: 0}})
	ts := startServer(t, st, withMesh(mesh))
	cc := xdsChannel(t, ts.addr, "default", "xds:///flaky:9080")
	_, err := grpctest.Call(context.Background(), cc)
	if failed, served := b.Counts(); status.Code(err) != codes.Unavailable || failed != 1 || served != 0 {
		t.Fatalf("without retries: %v, backend failed %d and served %d; want the backend's UNAVAILABLE, not retried", err, failed, served)
	}
	mesh.Set(&model.MeshSettings{})
	ts.Push(pushOf(meshChanged))
	deadline := time.Now().Add(grpctest.Wait)
	for {
		_, err := grpctest.Call(context.Background(), cc)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with the default retry policy back: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // until the client holds the new route
	}
}

// clusterSANs lists, comma-separated, the subject alt names a gRPC
// client's cluster verifies (an error's text when it has no TLS).
func clusterSANs(c *xdstest.TestClient, name string) string {
	var out []string
	ctx := &tlsv3.UpstreamTlsContext{}
	if err := c.Cluster(name).GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
		return err.Error()
	}
	for _, m := range ctx.GetCommonTlsContext().GetValidationContext().GetMatchSubjectAltNames() {
		out = append(out, m.GetExact())
	}
	return strings.Join(out, ",")
}

// TestTrustDomainChangeWakesOnlyTLSClusters: a change of the trust
// domain regenerates the clusters that verify mesh identities
// (ISTIO_MUTUAL) and nothing else: a client holding the service's route
// and endpoints is not woken.
func TestTrustDomainChangeWakesOnlyTLSClusters(t *testing.T) {
	st := model.NewStore()
	st.Update(service("reviews", "default", 9080), []*model.Endpoint{
		{Address: "10.0.0.1", Port: 9080, ServicePortName: "grpc", Health: model.Healthy, ServiceAccount: "reviews"},
	})
	mesh := &testMesh{}
	mesh.Set(model.DefaultMeshSettings())
	policies := &testPolicies{}
	host := model.ServiceHostname("reviews", "default", "")
	policies.set(&model.DestinationRule{Namespace: "default", Name: "reviews", Host: host,
		Policy: &model.TrafficPolicy{TLS: &model.ClientTLS{Mode: model.TLSIstioMutual}}})
	ts := startServer(t, st, withMesh(mesh), withPolicies(policies))
	_, eds := reviewsReaders(t, ts, model.MeshRetryKey, model.EndpointsKey(host))
	cds := xdstest.Connect(t, dial(t, ts.addr), xdstest.Options{Node: grpcNode("cds", "default"), AutoACK: true, Wait: wait})
	cds.Subscribe(resource.ClusterType, reviews)
	sans := func() string { return clusterSANs(cds, reviews) }
	cds.WaitUntil("the cluster verifying reviews' identity", func() bool {
		return cds.Cluster(reviews) != nil && sans() == "spiffe://cluster.local/ns/default/sa/reviews"
	})
	deadline := time.Now().Add(wait)
	for waiting(ts.Server, model.MeshTrustDomainKey) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the cluster's watch never waited on the trust domain")
		}
		time.Sleep(5 * time.Millisecond) // polling
	}

	mesh.Set(&model.MeshSettings{TrustDomain: "example.org", TrustDomainAliases: []string{"cluster.local"}})
	before := len(ts.logs.String())
	ts.Push(pushOf(model.Event{Kind: model.ConfigChanged, Config: model.MeshTrustDomainKey}))
	cds.WaitUntil("the new trust domain, then the alias", func() bool {
		return sans() == "spiffe://example.org/ns/default/sa/reviews,spiffe://cluster.local/ns/default/sa/reviews"
	})
	if log := ts.logs.String()[before:]; !strings.Contains(log, "watches=1 ") {
		t.Errorf("the trust domain's push woke more than the cluster's watch:\n%s", log)
	}
	// The other clients' next responses are their next changes.
	st.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.9"))
	if got := claAddrs(t, eds.Next())[reviews]; len(got) != 1 || got[0] != "10.0.0.9" {
		t.Fatalf("EDS client got %v, want reviews' new endpoint", got)
	}
}
