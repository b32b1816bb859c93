package xds

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// testPolicies is a PolicyIndex a test replaces; a change is pushed by
// the test.
type testPolicies struct {
	p atomic.Pointer[model.StaticPolicies]
}

func (t *testPolicies) set(rules ...*model.DestinationRule) {
	t.p.Store(model.NewStaticPolicies("istio-system", rules))
}

func (t *testPolicies) AppendDestinationRuleKeys(deps []model.ConfigKey, h model.Hostname) []model.ConfigKey {
	return t.p.Load().AppendDestinationRuleKeys(deps, h)
}

func (t *testPolicies) DestinationRuleFor(h model.Hostname, svcNS, clientNS string) (*model.DestinationRule, bool) {
	return t.p.Load().DestinationRuleFor(h, svcNS, clientNS)
}

func withPolicies(p *testPolicies) serverOpt { return func(o *Options) { o.Policies = p } }

func ruleChanged(h model.Hostname) model.Event {
	return model.Event{Kind: model.ConfigChanged, Config: model.DestinationRuleKey(h)}
}

// TestDestinationRuleSubsets, through the served path with an ADS client:
// subset clusters and their endpoints appear when a rule defining them is
// pushed, follow endpoint changes (an endpoints-only change reaches
// subset assignments), and go when the rule goes. No real grpc-go client
// here: it reaches a subset cluster only through a route naming it,
// which VirtualService brings.
func TestDestinationRuleSubsets(t *testing.T) {
	host := model.ServiceHostname("reviews", "default", "")
	whole, v1, v2 := model.ClusterName(9080, "", host), model.ClusterName(9080, "v1", host), model.ClusterName(9080, "v2", host)
	labelled := func(addrVersion ...string) []*model.Endpoint {
		var out []*model.Endpoint
		for i := 0; i < len(addrVersion); i += 2 {
			out = append(out, &model.Endpoint{Address: addrVersion[i], Port: 9080, ServicePortName: "grpc",
				Labels: map[string]string{"version": addrVersion[i+1]}})
		}
		return out
	}
	st := model.NewStore()
	svc := service("reviews", "default", 9080)
	st.Update(svc, labelled("10.0.0.1", "v1", "10.0.0.2", "v2"))
	policies := &testPolicies{}
	policies.set()
	ts := startServer(t, st, withPolicies(policies))
	c := xdstest.Connect(t, dial(t, ts.addr), xdstest.Options{Node: grpcNode("c", "default"), AutoACK: true, Wait: wait})
	c.Subscribe(resource.ClusterType, whole, v1, v2)
	c.Subscribe(resource.EndpointType, v1, v2)
	c.WaitFor(resource.ClusterType, whole)
	c.WaitFor(resource.EndpointType)
	// A client of the whole service's endpoints reads the rule too: its
	// localityLbSetting would order them.
	eds := xdstest.Connect(t, dial(t, ts.addr), xdstest.Options{Node: grpcNode("eds", "default"), AutoACK: true, Wait: wait})
	eds.Subscribe(resource.EndpointType, whole)
	eds.WaitFor(resource.EndpointType, whole)
	// c's two watches and eds's wait on the rule's key.
	deadline := time.Now().Add(wait)
	for waiting(ts.Server, model.DestinationRuleKey(host)) != 3 || waiting(ts.Server, model.EndpointsKey(host)) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("watches on the rule: %d, want 3", waiting(ts.Server, model.DestinationRuleKey(host)))
		}
		time.Sleep(5 * time.Millisecond) // polling
	}

	rule := &model.DestinationRule{Namespace: "default", Name: "reviews", Host: host,
		Policy: &model.TrafficPolicy{LoadBalancer: model.LBLeastRequest},
		Subsets: []model.Subset{
			{Name: "v1", Labels: model.Labels{"version": "v1"}},
			{Name: "v2", Labels: model.Labels{"version": "v2"}},
		}}
	policies.set(rule)
	before := len(ts.logs.String())
	ts.Push(pushOf(ruleChanged(host)))
	c.WaitFor(resource.ClusterType, whole, v1, v2)
	c.WaitFor(resource.EndpointType, v1, v2)
	// eds's watch wakes too, and is sent nothing: its assignment is
	// unchanged.
	if log := ts.logs.String()[before:]; !strings.Contains(log, "watches=3 sent=2 ") {
		t.Errorf("the rule's push woke other watches than c's two and eds's, or sent eds something:\n%s", log)
	}
	for _, name := range []string{whole, v1, v2} {
		if lb := c.Cluster(name).GetLbPolicy(); lb != cluster.Cluster_LEAST_REQUEST {
			t.Errorf("%s: lb_policy %v, want LEAST_REQUEST", name, lb)
		}
	}
	assertAddrs := func(name string, want ...string) {
		t.Helper()
		c.WaitUntil(name+" holds "+strings.Join(want, ","), func() bool {
			return slices.Equal(xdstest.Addresses(c.LoadAssignment(name)), want)
		})
	}
	assertAddrs(v1, "10.0.0.1")
	assertAddrs(v2, "10.0.0.2")

	st.Update(svc, labelled("10.0.0.1", "v1", "10.0.0.2", "v2", "10.0.0.3", "v2"))
	assertAddrs(v2, "10.0.0.2", "10.0.0.3")
	assertAddrs(v1, "10.0.0.1")

	policies.set()
	ts.Push(pushOf(ruleChanged(host)))
	c.WaitFor(resource.ClusterType, whole)
	if lb := c.Cluster(whole).GetLbPolicy(); lb != cluster.Cluster_ROUND_ROBIN {
		t.Errorf("without the rule: lb_policy %v, want ROUND_ROBIN", lb)
	}
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("%d NACKs:\n%s", n, ts.logs.String())
	}
}

// TestGRPCDestinationRulePolicy: real grpc-go clients accept the traffic
// policies meshpilot sends them (RANDOM as round robin, LEAST_REQUEST,
// a circuit breaker) and keep spreading RPCs over every endpoint; none of
// them NACKs.
func TestGRPCDestinationRulePolicy(t *testing.T) {
	b2, b3 := grpctest.StartBackend(t, "127.0.0.2", 0), grpctest.StartBackend(t, "127.0.0.3", 0)
	st := model.NewStore()
	svc := service("echo", "default", 9080)
	st.Update(svc, backendEndpoints(nil, b2, b3))
	policies := &testPolicies{}
	random := &model.DestinationRule{Namespace: "default", Name: "echo", Host: svc.Hostname,
		Policy: &model.TrafficPolicy{LoadBalancer: model.LBRandom, ConnectionPool: &model.ConnectionPool{MaxRequests: 100}}}
	policies.set(random)
	ts := startServer(t, st, withPolicies(policies))
	cc := xdsChannel(t, ts.addr, "default", "xds:///echo:9080")
	grpctest.AwaitSpread(t, cc, b2, b3)

	least := &model.DestinationRule{Namespace: "default", Name: "echo", Host: svc.Hostname,
		Policy: &model.TrafficPolicy{LoadBalancer: model.LBLeastRequest, ConnectionPool: &model.ConnectionPool{MaxRequests: 100}}}
	changeRule(t, ts, policies, least)
	grpctest.AwaitSpread(t, cc, b2, b3)
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs:\n%s", n, ts.logs.String())
	}
}

// TestVariantsThatVaryDifferently: one namespace's rule makes the cluster
// depend on the client's kind (RANDOM, which gRPC clients get as round
// robin), another's does not; the name's variants then differ in what
// they vary by. Clients of both namespaces and kinds, asking in turn, must
// each get their own cluster and not evict each other's: after the first
// round nothing is generated again.
func TestVariantsThatVaryDifferently(t *testing.T) {
	svc := service("echo", "echo", 7070)
	st := model.NewStore()
	st.Update(svc, nil)
	rules := []*model.DestinationRule{
		{Namespace: "team-a", Name: "r", Host: svc.Hostname, Policy: &model.TrafficPolicy{LoadBalancer: model.LBRandom}},
		{Namespace: "team-b", Name: "r", Host: svc.Hostname, Policy: &model.TrafficPolicy{LoadBalancer: model.LBLeastRequest}},
	}
	m := &servedModel{s: NewServer(Options{Discovery: st, Policies: model.NewStaticPolicies("istio-system", rules)})}
	name := model.ClusterName(7070, "", svc.Hostname)
	type asker struct {
		namespace string
		grpc      bool
	}
	want := map[asker]cluster.Cluster_LbPolicy{
		{"team-a", true}:  cluster.Cluster_ROUND_ROBIN,
		{"team-a", false}: cluster.Cluster_RANDOM,
		{"team-b", true}:  cluster.Cluster_LEAST_REQUEST,
		{"team-b", false}: cluster.Cluster_LEAST_REQUEST,
	}
	order := []asker{{"team-a", true}, {"team-b", true}, {"team-a", false}, {"team-b", false}}
	var afterFirst uint64
	for round := range 3 {
		for _, a := range order {
			cl, _ := m.get(t, resource.ClusterType, translate.Client{Namespace: a.namespace, GRPC: a.grpc}, name).(*cluster.Cluster)
			if got := cl.GetLbPolicy(); got != want[a] {
				t.Fatalf("round %d, %+v: lb_policy %v, want %v", round, a, got, want[a])
			}
		}
		if round == 0 {
			afterFirst = m.s.Stats().Marshals
		}
	}
	if got := m.s.Stats().Marshals; got != afterFirst {
		t.Errorf("%d marshals after the first round, %d after three: variants evicted each other", afterFirst, got)
	}
}

// changeRule puts rule in force for its host, pushes the change, and
// waits until the server's one client has ACKed a new cluster version.
func changeRule(t *testing.T, ts *testServer, policies *testPolicies, rule *model.DestinationRule) {
	t.Helper()
	cds := func(ci ClientInfo) *TypeSync { return ci.Types["CDS"] }
	before := awaitClient(t, ts.Server, "the client ACKed its cluster", func(ci ClientInfo) bool {
		return cds(ci) != nil && cds(ci).Status == Synced
	})
	policies.set(rule)
	ts.Push(pushOf(ruleChanged(rule.Host)))
	awaitClient(t, ts.Server, "the client ACKed the new cluster", func(ci ClientInfo) bool {
		return cds(ci) != nil && cds(ci).LastACK != nil && cds(ci).LastACK.Version != cds(before).LastACK.Version
	})
}
