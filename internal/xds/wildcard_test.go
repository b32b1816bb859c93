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
// host that did not have one, pushed under the wildcard's key and "*"
// as the registry reports it (model.AppendRuleKeys), reaches the cluster
// of a host it matches; a later change of that wildcard's rules, pushed
// under its key alone, wakes only the watches of the hosts it matches; a
// service created later that the wildcard matches gets the rule; and the
// rule's removal reaches both.
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
	// not match: its watch must not be woken by the wildcard's changes.
	web := service("web", "front", 9080)
	st.Update(web, nil)
	d := xdstest.Connect(t, dial(t, ts.addr), xdstest.Options{Node: grpcNode("d", "front"), AutoACK: true, Wait: wait})
	webCluster := model.ClusterName(9080, "", web.Hostname)
	d.Subscribe(resource.ClusterType, webCluster)
	d.WaitFor(resource.ClusterType, webCluster)
	awaitWatches := func(key model.ConfigKey, want int) {
		t.Helper()
		deadline := time.Now().Add(wait)
		for waiting(ts.Server, key) != want {
			if time.Now().After(deadline) {
				t.Fatalf("watches on %v: %d, want %d", key, waiting(ts.Server, key), want)
			}
			time.Sleep(5 * time.Millisecond) // polling
		}
	}
	awaitWatches(model.DestinationRuleKey("*"), 2)

	const wildcard = model.Hostname("*.shop.svc.cluster.local")
	policies.set(&model.DestinationRule{Namespace: "shop", Name: "shop-wide", Host: wildcard,
		Policy: &model.TrafficPolicy{LoadBalancer: model.LBLeastRequest}})
	ts.Push(pushOf(ruleChanged(wildcard), ruleChanged("*")))
	lb := func(name string, want cluster.Cluster_LbPolicy) {
		t.Helper()
		c.WaitUntil(name+" has lb_policy "+want.String(), func() bool { return c.Cluster(name).GetLbPolicy() == want })
	}
	lb(ordersCluster, cluster.Cluster_LEAST_REQUEST)

	// Now that the wildcard has a rule, c's watch names its key.
	awaitWatches(model.DestinationRuleKey(wildcard), 1)
	policies.set(&model.DestinationRule{Namespace: "shop", Name: "shop-wide", Host: wildcard,
		Policy: &model.TrafficPolicy{LoadBalancer: model.LBLeastRequest, ConnectionPool: &model.ConnectionPool{MaxRequests: 7}}})
	before := len(ts.logs.String())
	ts.Push(pushOf(ruleChanged(wildcard)))
	c.WaitUntil(ordersCluster+" has max_requests 7", func() bool {
		th := c.Cluster(ordersCluster).GetCircuitBreakers().GetThresholds()
		return len(th) > 0 && th[0].GetMaxRequests().GetValue() == 7
	})
	if log := ts.logs.String()[before:]; !strings.Contains(log, "watches=1 ") {
		t.Errorf("the wildcard's push woke another watch than c's:\n%s", log)
	}

	cart := service("cart", "shop", 9080)
	st.Update(cart, nil)
	cartCluster := model.ClusterName(9080, "", cart.Hostname)
	c.Subscribe(resource.ClusterType, ordersCluster, cartCluster)
	lb(cartCluster, cluster.Cluster_LEAST_REQUEST)

	policies.set()
	ts.Push(pushOf(ruleChanged(wildcard), ruleChanged("*")))
	lb(ordersCluster, cluster.Cluster_ROUND_ROBIN)
	lb(cartCluster, cluster.Cluster_ROUND_ROBIN)
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("%d NACKs:\n%s", n, ts.logs.String())
	}
}
