package xds

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// TestMeshPartsWakeOnlyTheirReaders: a change of the mesh's locality
// setting wakes endpoint assignments only, one of the retry policy routes
// only, and one of the trust domain nothing served here.
func TestMeshPartsWakeOnlyTheirReaders(t *testing.T) {
	st := model.NewStore()
	st.Update(service("reviews", "default", 9080), []*model.Endpoint{
		{Address: "10.0.0.1", Port: 9080, ServicePortName: "grpc", Health: model.Healthy, Locality: model.Locality{Region: "r1"}},
		{Address: "10.0.0.2", Port: 9080, ServicePortName: "grpc", Health: model.Healthy, Locality: model.Locality{Region: "r2"}},
	})
	mesh := &testMesh{}
	settings := model.DefaultMeshSettings()
	mesh.Set(settings)
	ts := startServer(t, st, withMesh(mesh))
	routes, eds := reviewsReaders(t, ts, model.MeshRetryKey, model.MeshLocalityLBKey)
	change := func(key model.ConfigKey, edit func(m *model.MeshSettings), watches int) {
		t.Helper()
		next := *settings
		edit(&next)
		settings = &next
		mesh.Set(settings)
		before := len(ts.logs.String())
		ts.Push(pushOf(model.Event{Kind: model.ConfigChanged, Config: key}))
		checkPushWoke(t, ts, before, "a change of "+key.String(), watches)
	}

	change(model.MeshLocalityLBKey, func(m *model.MeshSettings) {
		m.LocalityLB = &model.LocalityLB{Distribute: []model.LocalityDistribute{{From: "*", To: map[string]uint32{"r1": 100}}}}
	}, 1)
	r := eds.Next()
	eds.ACK(r)
	if got := claAddrs(t, r)[reviews]; r.TypeURL != resource.EndpointType || strings.Join(got, ",") != "10.0.0.1" {
		t.Fatalf("after distributing all to r1: %s %v, want reviews' endpoint in r1 alone", r.TypeURL, got)
	}
	change(model.MeshRetryKey, func(m *model.MeshSettings) { m.DefaultHTTPRetry = &model.HTTPRetry{} }, 1)
	r = routes.Next()
	routes.ACK(r)
	if r.TypeURL != resource.RouteType || routeRetry(routes.RouteConfiguration(reviews)) != nil {
		t.Fatalf("after attempts 0: %s, retry policy %v; want the route without one", r.TypeURL, routeRetry(routes.RouteConfiguration(reviews)))
	}
	change(model.MeshTrustDomainKey, func(m *model.MeshSettings) { m.TrustDomain = "example.org" }, 0)
	// The EDS client's next response is its next change.
	st.Update(service("reviews", "default", 9080), []*model.Endpoint{
		{Address: "10.0.0.3", Port: 9080, ServicePortName: "grpc", Health: model.Healthy, Locality: model.Locality{Region: "r1"}},
	})
	if got := claAddrs(t, eds.Next())[reviews]; strings.Join(got, ",") != "10.0.0.3" {
		t.Fatalf("EDS client got %v, want reviews' new endpoint", got)
	}
}

// TestLocalityVariantsShared: locality failover makes an endpoint
// assignment vary by the client's locality only when it moves something:
// a cluster without outlier detection, or with endpoints in one locality,
// is one resource for every client.
func TestLocalityVariantsShared(t *testing.T) {
	st := model.NewStore()
	spread, single := service("spread", "default", 80), service("single", "default", 80)
	st.Update(spread, []*model.Endpoint{
		{Address: "10.0.0.1", Port: 80, ServicePortName: "grpc", Locality: model.Locality{Region: "r1"}},
		{Address: "10.0.1.1", Port: 80, ServicePortName: "grpc", Locality: model.Locality{Region: "r2"}},
	})
	st.Update(single, []*model.Endpoint{
		{Address: "10.0.2.1", Port: 80, ServicePortName: "grpc", Locality: model.Locality{Region: "r1"}},
		{Address: "10.0.2.2", Port: 80, ServicePortName: "grpc", Locality: model.Locality{Region: "r1"}},
	})
	ejecting := &model.TrafficPolicy{OutlierDetection: &model.OutlierDetection{Interval: time.Second}}
	for _, tc := range []struct {
		desc     string
		policy   *model.TrafficPolicy
		marshals uint64
	}{
		{"no outlier detection: one for all", &model.TrafficPolicy{ConnectionPool: &model.ConnectionPool{MaxRequests: 1}}, 1 + 1},
		{"outlier detection: one per client region where endpoints are spread", ejecting, 2 + 1},
	} {
		policies := &testPolicies{}
		policies.set(
			&model.DestinationRule{Namespace: "default", Name: "spread", Host: spread.Hostname, Policy: tc.policy},
			&model.DestinationRule{Namespace: "default", Name: "single", Host: single.Hostname, Policy: tc.policy},
		)
		m := &servedModel{s: NewServer(Options{Discovery: st, Policies: policies})}
		for i := range 10 {
			c := translate.Client{Namespace: "default", GRPC: true, Locality: model.Locality{Region: []string{"r1", "r2"}[i%2]}}
			first := m.endpoints(t, c, model.ClusterName(80, "", spread.Hostname)).GetEndpoints()[0]
			if tc.policy.OutlierDetection != nil && first.GetLocality().GetRegion() != c.Locality.Region {
				t.Errorf("%s: a client of %s gets %v first", tc.desc, c.Locality.Region, first.GetLocality())
			}
			m.endpoints(t, c, model.ClusterName(80, "", single.Hostname))
		}
		if got := m.s.Stats().Marshals; got != tc.marshals {
			t.Errorf("%s: %d marshals for 10 clients in 2 regions, want %d", tc.desc, got, tc.marshals)
		}
	}
}

// TestEndpointVariantsShared: a ClusterLoadAssignment that depends on the
// client's zone is generated and marshalled once per zone, not per
// client; one that depends on nothing about the client, once.
func TestEndpointVariantsShared(t *testing.T) {
	st := model.NewStore()
	zoned := service("zoned", "default", 80)
	zoned.TrafficDistribution = model.PreferSameZone
	plain := service("plain", "default", 80)
	for _, svc := range []*model.Service{zoned, plain} {
		st.Update(svc, []*model.Endpoint{
			{Address: "10.0.0.1", Port: 80, ServicePortName: "grpc", Locality: model.Locality{Region: "r", Zone: "a"}},
			{Address: "10.0.1.1", Port: 80, ServicePortName: "grpc", Locality: model.Locality{Region: "r", Zone: "b"}},
		})
	}
	m := serve(st)
	for i := range 20 {
		zone := []string{"a", "b"}[i%2]
		c := translate.Client{Namespace: "default", GRPC: i%4 < 2, NodeName: fmt.Sprint("node-", i),
			Locality: model.Locality{Region: "r", Zone: zone, Subzone: fmt.Sprint(i)}}
		first := m.endpoints(t, c, model.ClusterName(80, "", zoned.Hostname)).GetEndpoints()[0]
		if first.GetLocality().GetZone() != zone || first.GetPriority() != 0 {
			t.Fatalf("client in zone %s: priority 0 is %v", zone, first)
		}
		m.endpoints(t, c, model.ClusterName(80, "", plain.Hostname))
	}
	if got := m.s.Stats().Marshals; got != 2+1 {
		t.Errorf("%d marshals for 20 clients in 2 zones, want one per zone (2) + one for the service without preference", got)
	}
}
