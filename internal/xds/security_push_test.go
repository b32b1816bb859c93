package xds

import (
	"strings"
	"testing"
	"time"

	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate/translatetest"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

func withSecurity(s model.SecurityIndex) serverOpt { return func(o *Options) { o.Security = s } }

// securityChanged is the push of a changed policy, old and new versions
// alike: the keys of the workloads it can select.
func securityChanged(keys ...model.ConfigKey) pushRequest {
	var evs []model.Event
	for _, k := range keys {
		evs = append(evs, model.Event{Kind: model.ConfigChanged, Config: k})
	}
	return pushOf(evs...)
}

// pushLog returns what the server logged from offset before, once it
// holds the push's line: the server logs a push when it is done, which
// may come after a client already has what it sent.
func pushLog(t *testing.T, ts *testServer, before int) string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		log := ts.logs.String()[before:]
		if strings.Contains(log, `msg="xds: push"`) {
			return log
		}
		if time.Now().After(deadline) {
			t.Fatalf("no push logged:\n%s", log)
		}
		time.Sleep(5 * time.Millisecond) // polling
	}
}

// TestSecurityPolicyPush: a policy selecting app=a wakes only a's inbound
// listener watch, not b's of the same namespace and service, and a's
// listener gets the policy's RBAC filter while b's stays as it was; a
// namespace-wide policy wakes both.
func TestSecurityPolicyPush(t *testing.T) {
	st := model.NewStore()
	echo := &model.Service{Hostname: "echo.apps.svc.cluster.local", Name: "echo", Namespace: "apps",
		Ports: []model.Port{{Name: "grpc", Port: 9080, TargetPort: 8080, Protocol: model.GRPC}}}
	st.Update(echo, []*model.Endpoint{
		{Address: "10.0.0.1", Port: 8080, ServicePortName: "grpc", Namespace: "apps", Labels: map[string]string{"app": "a"}},
		{Address: "10.0.0.2", Port: 8080, ServicePortName: "grpc", Namespace: "apps", Labels: map[string]string{"app": "b"}},
	})
	sec := &translatetest.Security{}
	ts := startServer(t, st, withSecurity(sec))
	const name = model.InboundListenerPrefix + "[::]:8080"
	server := func(id, ip string) *xdstest.TestClient {
		c := xdstest.Connect(t, dial(t, ts.addr), xdstest.Options{
			Node:    xdstest.GRPCNode(xdstest.NodeOptions{ID: xdstest.SidecarID(ip, id, "apps"), Namespace: "apps", Metadata: map[string]string{"INSTANCE_IPS": ip}}),
			AutoACK: true,
			Wait:    wait,
		})
		c.Subscribe(resource.ListenerType, name)
		c.WaitFor(resource.ListenerType, name)
		return c
	}
	a, b := server("echo-a", "10.0.0.1"), server("echo-b", "10.0.0.2")
	filters := func(c *xdstest.TestClient) string {
		var m hcm.HttpConnectionManager
		if err := c.Listener(name).GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&m); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range m.GetHttpFilters() {
			names = append(names, f.GetName())
		}
		return strings.Join(names, ",")
	}
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
	awaitWatches(model.SecurityLabelKey("apps", "app", "a"), 1)
	awaitWatches(model.SecurityNamespaceKey("apps"), 2)

	onlyA := &model.AuthorizationPolicy{Namespace: "apps", Name: "only-a", Selector: model.Labels{"app": "a"},
		Action: model.AuthzDeny, Rules: []model.AuthzRule{{To: []model.AuthzOperation{{Paths: []string{"/echo.Admin/*"}}}}}}
	sec.Set("", nil, []*model.AuthorizationPolicy{onlyA})
	before := len(ts.logs.String())
	ts.Push(securityChanged(onlyA.Keys()...))
	a.WaitUntil("a's listener has the DENY filter", func() bool {
		return filters(a) == "envoy.filters.http.rbac.DENY,envoy.filters.http.router"
	})
	if log := pushLog(t, ts, before); !strings.Contains(log, "watches=1 ") {
		t.Errorf("the policy for app=a woke another watch than a's:\n%s", log)
	}
	if got := filters(b); got != "envoy.filters.http.router" {
		t.Errorf("b's listener: filters %s", got)
	}

	// a's watch is filed again once a has ACKed what the push sent.
	awaitWatches(model.SecurityNamespaceKey("apps"), 2)
	nsWide := &model.AuthorizationPolicy{Namespace: "apps", Name: "all", Rules: []model.AuthzRule{{}}}
	sec.Set("", nil, []*model.AuthorizationPolicy{onlyA, nsWide})
	before = len(ts.logs.String())
	ts.Push(securityChanged(nsWide.Keys()...))
	b.WaitUntil("b's listener has the ALLOW filter", func() bool {
		return filters(b) == "envoy.filters.http.rbac,envoy.filters.http.router"
	})
	a.WaitUntil("a's listener has both filters", func() bool {
		return filters(a) == "envoy.filters.http.rbac.DENY,envoy.filters.http.rbac,envoy.filters.http.router"
	})
	if log := pushLog(t, ts, before); !strings.Contains(log, "watches=2 ") {
		t.Errorf("the namespace's policy did not wake both watches:\n%s", log)
	}
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("%d NACKs:\n%s", n, ts.logs.String())
	}
}
