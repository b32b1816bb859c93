package xds

import (
	"strings"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// TestWildcardRulePush, through the served path: a rule for a wildcard
// host, pushed under the wildcard's key, reaches the cluster of a host it
// matches (which depends on the keys of every wildcard that could match
// it); a service created later that the wildcard matches gets the rule;
// and the rule's removal reaches both.
func TestWildcardRulePush(t *testing.T) {
	st := model.NewStore()
	orders := service("orders", "shop", 9080)
	st.Update(orders, nil)
	policies := &testPolicies{}
	policies.set()
	ts := startServer(t, st, withPolicies(policies))
	c := xdstest.Connect(t, dial(t, ts.addr), xdstest.Options{Node: grpcNode("c", "shop"), AutoACK: true, Wait: wait})
	ordersCluster := model.ClusterName(9080, "", orders.Hostname)
	c.Subscribe(resource.ClusterType, ordersCluster)
	c.WaitFor(resource.ClusterType, ordersCluster)
	// A client of a host of another namespace, which the wildcard does
	// not match: its watch must not be woken.
	web := service("web", "front", 9080)
	st.Update(web, nil)
	d := xdstest.Connect(t, dial(t, ts.addr), xdstest.Options{Node: grpcNode("d", "front"), AutoACK: true, Wait: wait})
	webCluster := model.ClusterName(9080, "", web.Hostname)
	d.Subscribe(resource.ClusterType, webCluster)
	d.WaitFor(resource.ClusterType, webCluster)

	const wildcard = model.Hostname("*.shop.svc.cluster.local")
	deadline := time.Now().Add(wait)
	for waiting(ts.Server, model.DestinationRuleKey(wildcard)) != 1 || waiting(ts.Server, model.DestinationRuleKey("*")) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("watches on the wildcard's key: %d, want c's", waiting(ts.Server, model.DestinationRuleKey(wildcard)))
		}
		time.Sleep(5 * time.Millisecond) // polling
	}
	policies.set(&model.DestinationRule{Namespace: "shop", Name: "shop-wide", Host: wildcard,
		Policy: &model.TrafficPolicy{LoadBalancer: model.LBLeastRequest}})
	before := len(ts.logs.String())
	ts.Push(pushOf(ruleChanged(wildcard)))
	lb := func(name string, want cluster.Cluster_LbPolicy) {
		t.Helper()
		c.WaitUntil(name+" has lb_policy "+want.String(), func() bool { return c.Cluster(name).GetLbPolicy() == want })
	}
	lb(ordersCluster, cluster.Cluster_LEAST_REQUEST)
	if log := ts.logs.String()[before:]; !strings.Contains(log, "watches=1 ") {
		t.Errorf("the wildcard's push woke another watch than c's:\n%s", log)
	}

	cart := service("cart", "shop", 9080)
	st.Update(cart, nil)
	cartCluster := model.ClusterName(9080, "", cart.Hostname)
	c.Subscribe(resource.ClusterType, ordersCluster, cartCluster)
	lb(cartCluster, cluster.Cluster_LEAST_REQUEST)

	policies.set()
	ts.Push(pushOf(ruleChanged(wildcard)))
	lb(ordersCluster, cluster.Cluster_ROUND_ROBIN)
	lb(cartCluster, cluster.Cluster_ROUND_ROBIN)
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("%d NACKs:\n%s", n, ts.logs.String())
	}
}
