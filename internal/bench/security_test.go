package bench

import (
	"slices"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacconfig "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbac "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestSmallRunWithSecurityPolicies runs the benchmark with an
// AuthorizationPolicy per service and a simulated gRPC server for two of
// them: each server gets its inbound listener with its policy's RBAC
// filter, and every policy change reaches the server it selects.
func TestSmallRunWithSecurityPolicies(t *testing.T) {
	cfg := smallConfig(4, "authz")
	cfg.SecurityPolicies, cfg.Servers = true, 2
	res, log := runSmall(t, cfg)
	// 2 namespaces + 3 nodes + 4 services + 8 pods (create and status) +
	// 4 slices + an AuthorizationPolicy per service.
	if want := int64(2 + 3 + 4 + 2*8 + 4 + 4); res.Setup.Writes != want {
		t.Errorf("setup writes = %d, want %d", res.Setup.Writes, want)
	}
	if sc := res.ServerConvergence; sc == nil || sc.Clients != 2 || sc.P50MS <= 0 {
		t.Errorf("server convergence %+v, want 2 servers", sc)
	}
	pc := res.PolicyChurn
	if pc == nil {
		t.Fatalf("no policy churn result\n%s", log)
	}
	if pc.Changes != 3 || pc.Pairs != 3 || pc.Misses != 0 {
		t.Errorf("policy churn: %+v, want 3 changes, 3 pairs, no misses", *pc)
	}
	for _, ch := range pc.PerChange {
		if !strings.Contains(ch.Address, "#client-") {
			t.Errorf("policy change record %+v does not name a service and its account", ch)
		}
	}
	var phases []string
	for _, p := range res.Phases {
		phases = append(phases, p.Name)
	}
	if want := []string{"sync", "converged", "settled", "churn", "servers", "policy-churn"}; !slices.Equal(phases, want) {
		t.Errorf("phases %v, want %v", phases, want)
	}
}

// TestRBACAccounts: the accounts a listener's RBAC filters name are found
// wherever the filter's policies hold them, and only there.
func TestRBACAccounts(t *testing.T) {
	principal := func(sa string) *rbacconfig.Principal {
		return &rbacconfig.Principal{Identifier: &rbacconfig.Principal_Authenticated_{Authenticated: &rbacconfig.Principal_Authenticated{
			PrincipalName: &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: "spiffe://cluster.local/ns/a/sa/" + sa}}}}}
	}
	filter, err := anypb.New(&rbac.RBAC{Rules: &rbacconfig.RBAC{Policies: map[string]*rbacconfig.Policy{
		"a-p-0": {Principals: []*rbacconfig.Principal{principal("client-3")}, Permissions: []*rbacconfig.Permission{{Rule: &rbacconfig.Permission_Any{Any: true}}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := anypb.New(&hcm.HttpConnectionManager{
		HttpFilters: []*hcm.HttpFilter{{Name: "envoy.filters.http.rbac", ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: filter}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	l := &listener.Listener{FilterChains: []*listener.FilterChain{{Filters: []*listener.Filter{{Name: "hcm", ConfigType: &listener.Filter_TypedConfig{TypedConfig: m}}}}}}
	got, err := rbacAccounts(l)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"client-3"}) {
		t.Fatalf("accounts %v, want [client-3]", got)
	}
	if got, _ := rbacAccounts(&listener.Listener{}); len(got) != 0 {
		t.Fatalf("accounts of a listener without filters: %v", got)
	}
}
