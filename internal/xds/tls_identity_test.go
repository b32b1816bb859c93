package xds

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// TestEndpointChangeKeepingServiceAccountsWakesNoCluster: an ISTIO_MUTUAL
// cluster verifies the identities of the service's endpoints, so it
// depends on their service accounts, not on the endpoints: endpoints
// coming and going under the same accounts wake the endpoint assignment's
// watch alone; a new account wakes the cluster too, and its SANs follow.
func TestEndpointChangeKeepingServiceAccountsWakesNoCluster(t *testing.T) {
	host := model.ServiceHostname("reviews", "default", "")
	as := func(sa string, addrs ...string) []*model.Endpoint {
		eps := endpoints(9080, model.Healthy, addrs...)
		for _, ep := range eps {
			ep.ServiceAccount = sa
		}
		return eps
	}
	st := model.NewStore()
	st.Update(service("reviews", "default", 9080), as("reviews", "10.0.0.1"))
	policies := &testPolicies{}
	policies.set(&model.DestinationRule{Namespace: "default", Name: "reviews", Host: host,
		Policy: &model.TrafficPolicy{TLS: &model.ClientTLS{Mode: model.TLSIstioMutual}}})
	mesh := &testMesh{}
	mesh.Set(model.DefaultMeshSettings())
	ts := startServer(t, st, withMesh(mesh), withPolicies(policies))

	eds := openADS(t, dial(t, ts.addr), grpcNode("eds", "default"))
	eds.Subscribe(resource.EndpointType, reviews)
	eds.ACK(eds.Next())
	cds := xdstest.Connect(t, dial(t, ts.addr), xdstest.Options{Node: grpcNode("cds", "default"), AutoACK: true, Wait: wait})
	cds.Subscribe(resource.ClusterType, reviews)
	cds.WaitUntil("the cluster verifying reviews' identity", func() bool {
		return cds.Cluster(reviews) != nil && clusterSANs(cds, reviews) == "spiffe://cluster.local/ns/default/sa/reviews"
	})
	// update changes reviews' endpoints, once both clients wait for a
	// change, and checks how many watches the push woke.
	update := func(what string, eps []*model.Endpoint, watches int) {
		t.Helper()
		deadline := time.Now().Add(wait)
		for waiting(ts.Server, model.ServiceAccountsKey(host)) != 1 || waiting(ts.Server, model.EndpointsKey(host)) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: watches on the service accounts %d, on the endpoints %d; want the cluster's on the first, the assignment's on the second",
					what, waiting(ts.Server, model.ServiceAccountsKey(host)), waiting(ts.Server, model.EndpointsKey(host)))
			}
			time.Sleep(5 * time.Millisecond) // polling
		}
		before := len(ts.logs.String())
		st.Update(service("reviews", "default", 9080), eps)
		checkPushWoke(t, ts, before, what, watches)
	}
	update("an endpoint under the same account", as("reviews", "10.0.0.1", "10.0.0.2"), 1)
	r := eds.Next()
	eds.ACK(r)
	if got := claAddrs(t, r)[reviews]; strings.Join(got, ",") != "10.0.0.1,10.0.0.2" {
		t.Fatalf("EDS client got %v, want both endpoints", got)
	}
	update("an endpoint under a new account", append(as("reviews", "10.0.0.1"), as("reviews-v2", "10.0.0.3")...), 2)
	cds.WaitUntil("the cluster verifying both accounts", func() bool {
		return clusterSANs(cds, reviews) == "spiffe://cluster.local/ns/default/sa/reviews,spiffe://cluster.local/ns/default/sa/reviews-v2"
	})
	if got := claAddrs(t, eds.Next())[reviews]; strings.Join(got, ",") != "10.0.0.1,10.0.0.3" {
		t.Fatalf("EDS client got %v, want the endpoints of both accounts", got)
	}
}

// checkPushWoke waits for the push logged after the first before bytes of
// the server's log and checks that it woke that many watches.
func checkPushWoke(t *testing.T, ts *testServer, before int, what string, watches int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !strings.Contains(ts.logs.String()[before:], "watches=") {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no push logged", what)
		}
		time.Sleep(5 * time.Millisecond) // polling
	}
	if log := ts.logs.String()[before:]; !strings.Contains(log, fmt.Sprintf("watches=%d ", watches)) {
		t.Errorf("%s woke other than %d watches:\n%s", what, watches, log)
	}
}
