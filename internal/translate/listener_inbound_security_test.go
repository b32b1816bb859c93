package translate

import (
	"slices"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate/translatetest"
)

// TestGRPCServerMTLS: the transport a gRPC server gets for its port's
// PeerAuthentication mode, as istiod's grpcgen serves it: PERMISSIVE
// (also the mode without any policy) cannot be both plaintext and TLS on
// one port in grpc-go, so the tlsMode label decides it.
func TestGRPCServerMTLS(t *testing.T) {
	for _, tc := range []struct {
		mode     model.MTLSMode
		labelled bool
		want     bool
	}{
		{model.MTLSStrict, false, true},
		{model.MTLSStrict, true, true},
		{model.MTLSDisable, false, false},
		{model.MTLSDisable, true, false},
		{model.MTLSPermissive, false, false},
		{model.MTLSPermissive, true, true},
		{model.MTLSUnset, false, false},
		{model.MTLSUnset, true, true},
	} {
		if got := grpcServerMTLS(tc.mode, tc.labelled); got != tc.want {
			t.Errorf("%v, labelled %v: mutual TLS %v, want %v", tc.mode, tc.labelled, got, tc.want)
		}
	}
}

// inboundChain returns the listener's chain name and its HTTP filters'
// names.
func inboundChain(t *testing.T, r Result) (string, []string) {
	t.Helper()
	l, ok := r.Resource.(*listener.Listener)
	if !ok {
		t.Fatalf("got %T, want a listener", r.Resource)
	}
	if err := Validate(l); err != nil {
		t.Fatal(err)
	}
	fc := l.GetFilterChains()[0]
	var m hcm.HttpConnectionManager
	if err := fc.GetFilters()[0].GetTypedConfig().UnmarshalTo(&m); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range m.GetHttpFilters() {
		names = append(names, f.GetName())
	}
	return fc.GetName(), names
}

// TestInboundSecurity: a server's listener follows the policies that
// select its workload (by the labels and services of its endpoints, not
// of another workload), and depends on the keys of every policy that
// could.
func TestInboundSecurity(t *testing.T) {
	st := model.NewStore()
	echo := &model.Service{Hostname: "echo.apps.svc.cluster.local", Name: "echo", Namespace: "apps",
		Ports: []model.Port{{Name: "grpc", Port: 9080, TargetPort: 8080, Protocol: model.GRPC}}}
	st.Update(echo, []*model.Endpoint{
		{Address: "10.0.0.1", Port: 8080, ServicePortName: "grpc", Labels: map[string]string{"app": "a"}},
		{Address: "10.0.0.2", Port: 8080, ServicePortName: "grpc", Labels: map[string]string{"app": "b", tlsModeLabel: "istio"}},
	})
	sec := &translatetest.Security{}
	g := &listenerGenerator{GeneratorOptions{Discovery: st, Security: sec}}
	a := &Client{Namespace: "apps", IPs: []string{"10.0.0.1"}}
	b := &Client{Namespace: "apps", IPs: []string{"10.0.0.2"}}
	const name = model.InboundListenerPrefix + "[::]:8080"
	selectA := model.Labels{"app": "a"}

	for _, tc := range []struct {
		desc        string
		peer        []*model.PeerAuthentication
		authz       []*model.AuthorizationPolicy
		client      *Client
		wantChain   string
		wantFilters []string
	}{
		{desc: "no policy, not labelled: plaintext", client: a, wantChain: "inbound-plaintext",
			wantFilters: []string{"envoy.filters.http.router"}},
		{desc: "no policy, labelled: mutual TLS as before policies, no trust domain check", client: b, wantChain: "inbound-mtls",
			wantFilters: []string{"envoy.filters.http.router"}},
		{desc: "STRICT for a", client: a, wantChain: "inbound-mtls",
			peer:        []*model.PeerAuthentication{{Namespace: "apps", Name: "a", Selector: selectA, Mode: model.MTLSStrict}},
			wantFilters: []string{rbacFilterDeny, "envoy.filters.http.router"}},
		{desc: "STRICT for a, not for b", client: b, wantChain: "inbound-mtls", // b keeps its label's
			peer:        []*model.PeerAuthentication{{Namespace: "apps", Name: "a", Selector: selectA, Mode: model.MTLSStrict}},
			wantFilters: []string{"envoy.filters.http.router"}},
		{desc: "PERMISSIVE for b, raised by its label: the trust domain check", client: b, wantChain: "inbound-mtls",
			peer:        []*model.PeerAuthentication{{Namespace: "apps", Name: "ns", Mode: model.MTLSPermissive}},
			wantFilters: []string{rbacFilterDeny, "envoy.filters.http.router"}},
		{desc: "DISABLE overrides the label", client: b, wantChain: "inbound-plaintext",
			peer:        []*model.PeerAuthentication{{Namespace: "apps", Name: "ns", Mode: model.MTLSDisable}},
			wantFilters: []string{"envoy.filters.http.router"}},
		{desc: "the mesh's STRICT", client: a, wantChain: "inbound-mtls",
			peer:        []*model.PeerAuthentication{{Namespace: model.DefaultRootNamespace, Name: "default", Mode: model.MTLSStrict}},
			wantFilters: []string{rbacFilterDeny, "envoy.filters.http.router"}},
		{desc: "portLevelMtls of the server's port, the workload's", client: a, wantChain: "inbound-plaintext",
			peer: []*model.PeerAuthentication{{Namespace: "apps", Name: "a", Selector: selectA, Mode: model.MTLSStrict,
				PortModes: map[uint32]model.MTLSMode{8080: model.MTLSDisable, 9080: model.MTLSStrict}}},
			wantFilters: []string{"envoy.filters.http.router"}},
		{desc: "an ALLOW policy for a", client: a, wantChain: "inbound-plaintext",
			authz:       []*model.AuthorizationPolicy{{Namespace: "apps", Name: "a", Selector: selectA, Rules: []model.AuthzRule{{}}}},
			wantFilters: []string{rbacFilterAllow, "envoy.filters.http.router"}},
		{desc: "an ALLOW policy for a, not for b", client: b, wantChain: "inbound-mtls",
			authz:       []*model.AuthorizationPolicy{{Namespace: "apps", Name: "a", Selector: selectA, Rules: []model.AuthzRule{{}}}},
			wantFilters: []string{"envoy.filters.http.router"}},
		{desc: "a policy targeting the Service", client: a, wantChain: "inbound-plaintext",
			authz:       []*model.AuthorizationPolicy{{Namespace: "apps", Name: "t", TargetServices: []string{"echo"}, Action: model.AuthzDeny, Rules: []model.AuthzRule{{}}}},
			wantFilters: []string{rbacFilterDeny, "envoy.filters.http.router"}},
		{desc: "a policy targeting another Service", client: a, wantChain: "inbound-plaintext",
			authz:       []*model.AuthorizationPolicy{{Namespace: "apps", Name: "t", TargetServices: []string{"other"}, Action: model.AuthzDeny, Rules: []model.AuthzRule{{}}}},
			wantFilters: []string{"envoy.filters.http.router"}},
		{desc: "a policy of another namespace", client: a, wantChain: "inbound-plaintext",
			authz:       []*model.AuthorizationPolicy{{Namespace: "other", Name: "a", Action: model.AuthzDeny, Rules: []model.AuthzRule{{}}}},
			wantFilters: []string{"envoy.filters.http.router"}},
		{desc: "DENY and ALLOW under STRICT", client: a, wantChain: "inbound-mtls",
			peer: []*model.PeerAuthentication{{Namespace: "apps", Name: "ns", Mode: model.MTLSStrict}},
			authz: []*model.AuthorizationPolicy{{Namespace: "apps", Name: "al", Rules: []model.AuthzRule{{}}},
				{Namespace: model.DefaultRootNamespace, Name: "d", Action: model.AuthzDeny, Rules: []model.AuthzRule{{}}}},
			wantFilters: []string{rbacFilterDeny, rbacFilterAllow, "envoy.filters.http.router"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			sec.Set("", tc.peer, tc.authz)
			chain, filters := inboundChain(t, g.Generate(tc.client, name))
			if chain != tc.wantChain || !slices.Equal(filters, tc.wantFilters) {
				t.Fatalf("chain %s with %v, want %s with %v", chain, filters, tc.wantChain, tc.wantFilters)
			}
		})
	}

	t.Run("what the answer depends on", func(t *testing.T) {
		sec.Set("", nil, nil)
		r := g.Generate(a, name)
		want := []model.ConfigKey{model.NamespaceKey("apps"), model.EndpointsKey(echo.Hostname)}
		want = model.AppendWorkloadSecurityKeys(want, "apps", model.DefaultRootNamespace, map[string]string{"app": "a"}, []string{"echo"})
		want = append(want, model.MeshRootNamespaceKey)
		if !slices.Equal(r.Deps, want) || r.Vary != VaryNamespace|VaryAddresses {
			t.Errorf("deps %v, vary %b; want %v, namespace and addresses", r.Deps, r.Vary, want)
		}
		for _, k := range []model.ConfigKey{model.SecurityLabelKey("apps", "app", "a"), model.SecurityServiceKey("apps", "echo"),
			model.SecurityNamespaceKey("apps"), model.SecurityNamespaceKey(model.DefaultRootNamespace)} {
			if !slices.Contains(r.Deps, k) {
				t.Errorf("deps lack %v", k)
			}
		}
		if slices.Contains(r.Deps, model.SecurityLabelKey("apps", "app", "b")) {
			t.Errorf("a's listener depends on b's label")
		}
		// A PeerAuthentication's mutual TLS reads the trust domains.
		sec.Set("", []*model.PeerAuthentication{{Namespace: "apps", Name: "ns", Mode: model.MTLSStrict}}, nil)
		if r := g.Generate(b, name); !slices.Contains(r.Deps, model.MeshTrustDomainKey) {
			t.Errorf("b's deps lack the trust domain: %v", r.Deps)
		}
	})
}
