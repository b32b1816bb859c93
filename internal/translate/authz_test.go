package translate

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	rbac "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbachttp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// rbacOf unpacks the RBAC rules of the filters, by filter name.
func rbacOf(t *testing.T, fs []*hcm.HttpFilter) map[string]*rbac.RBAC {
	t.Helper()
	out := map[string]*rbac.RBAC{}
	for _, f := range fs {
		var r rbachttp.RBAC
		if err := f.GetTypedConfig().UnmarshalTo(&r); err != nil {
			t.Fatal(err)
		}
		if err := r.ValidateAll(); err != nil {
			t.Fatalf("filter %s: %v", f.GetName(), err)
		}
		out[f.GetName()] = r.GetRules()
	}
	return out
}

// jsonPrincipals and jsonPermissions read what a test expects, written
// as Envoy's JSON.
func jsonPrincipals(t *testing.T, js []string) []*rbac.Principal {
	t.Helper()
	var out []*rbac.Principal
	for _, j := range js {
		p := &rbac.Principal{}
		if err := protojson.Unmarshal([]byte(j), p); err != nil {
			t.Fatalf("%s: %v", j, err)
		}
		out = append(out, p)
	}
	return out
}

func jsonPermissions(t *testing.T, js []string) []*rbac.Permission {
	t.Helper()
	var out []*rbac.Permission
	for _, j := range js {
		p := &rbac.Permission{}
		if err := protojson.Unmarshal([]byte(j), p); err != nil {
			t.Fatalf("%s: %v", j, err)
		}
		out = append(out, p)
	}
	return out
}

func equalProtos[M proto.Message](a, b []M) bool {
	return slices.EqualFunc(a, b, func(x, y M) bool { return proto.Equal(x, y) })
}

func protosText[M proto.Message](ms []M) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(protojson.Format(m))
		b.WriteString("\n")
	}
	return b.String()
}

// TestAuthzFields: each field of a rule becomes the RBAC matcher Istio's
// authorization model writes for an HTTP filter with authenticated
// principals, in a rule of one from and one to: the source's fields as
// the AND of the principal, the operation's and the when conditions as
// the AND of the permission (when conditions on the caller in the
// principal).
func TestAuthzFields(t *testing.T) {
	mesh := &model.MeshSettings{TrustDomain: "cluster.local"}
	aliased := &model.MeshSettings{TrustDomain: "new.td", TrustDomainAliases: []string{"old.td"}}
	for _, tc := range []struct {
		desc        string
		mesh        *model.MeshSettings
		from        model.AuthzSource
		to          model.AuthzOperation
		when        []model.AuthzCondition
		principals  []string // the AND of the principal; nil: any
		permissions []string // the AND of the permission; nil: any
	}{
		{desc: "principals: exact, prefix, suffix, presence",
			from: model.AuthzSource{Principals: []string{"cluster.local/ns/a/sa/b", "cluster.local/ns/a/*", "*/sa/b", "*"}},
			principals: []string{`{"orIds":{"ids":[
				{"authenticated":{"principalName":{"exact":"spiffe://cluster.local/ns/a/sa/b"}}},
				{"authenticated":{"principalName":{"prefix":"spiffe://cluster.local/ns/a/"}}},
				{"authenticated":{"principalName":{"safeRegex":{"regex":"spiffe://.*/sa/b"}}}},
				{"authenticated":{"principalName":{"safeRegex":{"regex":".+"}}}}]}}`}},
		{desc: "notPrincipals",
			from:       model.AuthzSource{NotPrincipals: []string{"cluster.local/ns/a/sa/b"}},
			principals: []string{`{"notId":{"orIds":{"ids":[{"authenticated":{"principalName":{"exact":"spiffe://cluster.local/ns/a/sa/b"}}}]}}}`}},
		{desc: "principals in each trust domain of the mesh, cluster.local standing for the mesh's",
			mesh: aliased,
			from: model.AuthzSource{Principals: []string{"old.td/ns/a/sa/b", "cluster.local/ns/c/sa/d", "other.td/ns/e/sa/f", "*/ns/g/sa/h"}},
			principals: []string{`{"orIds":{"ids":[
				{"authenticated":{"principalName":{"exact":"spiffe://new.td/ns/a/sa/b"}}},
				{"authenticated":{"principalName":{"exact":"spiffe://old.td/ns/a/sa/b"}}},
				{"authenticated":{"principalName":{"exact":"spiffe://new.td/ns/c/sa/d"}}},
				{"authenticated":{"principalName":{"exact":"spiffe://old.td/ns/c/sa/d"}}},
				{"authenticated":{"principalName":{"exact":"spiffe://other.td/ns/e/sa/f"}}},
				{"authenticated":{"principalName":{"safeRegex":{"regex":"spiffe://.*/ns/g/sa/h"}}}}]}}`}},
		{desc: "namespaces and notNamespaces, with a wildcard",
			from: model.AuthzSource{Namespaces: []string{"front", "team-*"}, NotNamespaces: []string{"kube.system"}},
			principals: []string{
				`{"orIds":{"ids":[{"authenticated":{"principalName":{"safeRegex":{"regex":".*/ns/front/.*"}}}},
					{"authenticated":{"principalName":{"safeRegex":{"regex":".*/ns/team-.*/.*"}}}}]}}`,
				`{"notId":{"orIds":{"ids":[{"authenticated":{"principalName":{"safeRegex":{"regex":".*/ns/kube\\.system/.*"}}}}]}}}`}},
		{desc: "serviceAccounts of the policy's namespace or another, and notServiceAccounts",
			from: model.AuthzSource{ServiceAccounts: []string{"front", "other/back"}, NotServiceAccounts: []string{"bad"}},
			principals: []string{
				`{"orIds":{"ids":[{"authenticated":{"principalName":{"safeRegex":{"regex":"spiffe://.+/ns/apps/(.+/|)sa/front(/.+)?"}}}},
					{"authenticated":{"principalName":{"safeRegex":{"regex":"spiffe://.+/ns/other/(.+/|)sa/back(/.+)?"}}}}]}}`,
				`{"notId":{"orIds":{"ids":[{"authenticated":{"principalName":{"safeRegex":{"regex":"spiffe://.+/ns/apps/(.+/|)sa/bad(/.+)?"}}}}]}}}`}},
		{desc: "trustDomains, the mesh's standing for its aliases too, and notTrustDomains",
			mesh: aliased,
			from: model.AuthzSource{TrustDomains: []string{"new.td"}, NotTrustDomains: []string{"evil.td"}},
			principals: []string{
				`{"orIds":{"ids":[{"authenticated":{"principalName":{"prefix":"spiffe://new.td/"}}},
					{"authenticated":{"principalName":{"prefix":"spiffe://old.td/"}}}]}}`,
				`{"notId":{"orIds":{"ids":[{"authenticated":{"principalName":{"prefix":"spiffe://evil.td/"}}}]}}}`}},
		{desc: "ipBlocks and notIpBlocks: the peer's address",
			from: model.AuthzSource{IPBlocks: []string{"10.0.0.0/8", "192.0.2.7"}, NotIPBlocks: []string{"2001:db8::1"}},
			principals: []string{
				`{"orIds":{"ids":[{"directRemoteIp":{"addressPrefix":"10.0.0.0","prefixLen":8}},{"directRemoteIp":{"addressPrefix":"192.0.2.7","prefixLen":32}}]}}`,
				`{"notId":{"orIds":{"ids":[{"directRemoteIp":{"addressPrefix":"2001:db8::1","prefixLen":128}}]}}}`}},
		{desc: "remoteIpBlocks",
			from:       model.AuthzSource{RemoteIPBlocks: []string{"10.1.0.0/16"}, NotRemoteIPBlocks: []string{"10.1.2.0/24"}},
			principals: []string{`{"orIds":{"ids":[{"remoteIp":{"addressPrefix":"10.1.0.0","prefixLen":16}}]}}`, `{"notId":{"orIds":{"ids":[{"remoteIp":{"addressPrefix":"10.1.2.0","prefixLen":24}}]}}}`}},
		{desc: "the fields of a source in Istio's order",
			from: model.AuthzSource{IPBlocks: []string{"10.0.0.1"}, Namespaces: []string{"a"}, Principals: []string{"x"}},
			principals: []string{
				`{"orIds":{"ids":[{"authenticated":{"principalName":{"exact":"spiffe://x"}}}]}}`,
				`{"orIds":{"ids":[{"authenticated":{"principalName":{"safeRegex":{"regex":".*/ns/a/.*"}}}}]}}`,
				`{"orIds":{"ids":[{"directRemoteIp":{"addressPrefix":"10.0.0.1","prefixLen":32}}]}}`}},
		{desc: "paths: a gRPC method, a service's methods, a suffix, presence",
			to: model.AuthzOperation{Paths: []string{"/echo.Echo/Say", "/echo.Admin/*", "*/Health", "*"}, NotPaths: []string{"/echo.Admin/Drop"}},
			permissions: []string{`{"orRules":{"rules":[
				{"urlPath":{"path":{"exact":"/echo.Echo/Say"}}},
				{"urlPath":{"path":{"prefix":"/echo.Admin/"}}},
				{"urlPath":{"path":{"suffix":"/Health"}}},
				{"urlPath":{"path":{"safeRegex":{"regex":".+"}}}}]}}`,
				`{"notRule":{"orRules":{"rules":[{"urlPath":{"path":{"exact":"/echo.Admin/Drop"}}}]}}}`}},
		{desc: "methods: :method, which gRPC sets to POST",
			to:          model.AuthzOperation{Methods: []string{"POST"}, NotMethods: []string{"GET"}},
			permissions: []string{`{"orRules":{"rules":[{"header":{"name":":method","stringMatch":{"exact":"POST"}}}]}}`, `{"notRule":{"orRules":{"rules":[{"header":{"name":":method","stringMatch":{"exact":"GET"}}}]}}}`}},
		{desc: "hosts: :authority, ignoring case",
			to: model.AuthzOperation{Hosts: []string{"echo.apps", "*.example.com", "api.*", "*"}},
			permissions: []string{`{"orRules":{"rules":[
				{"header":{"name":":authority","stringMatch":{"exact":"echo.apps","ignoreCase":true}}},
				{"header":{"name":":authority","stringMatch":{"suffix":".example.com","ignoreCase":true}}},
				{"header":{"name":":authority","stringMatch":{"prefix":"api.","ignoreCase":true}}},
				{"header":{"name":":authority","presentMatch":true}}]}}`}},
		{desc: "ports: the server's",
			to:          model.AuthzOperation{Ports: []string{"8080"}, NotPorts: []string{"9090"}},
			permissions: []string{`{"orRules":{"rules":[{"destinationPort":8080}]}}`, `{"notRule":{"orRules":{"rules":[{"destinationPort":9090}]}}}`}},
		{desc: "the fields of an operation in Istio's order",
			to: model.AuthzOperation{Ports: []string{"8080"}, Paths: []string{"/a.B/C"}, Methods: []string{"POST"}, Hosts: []string{"h"}},
			permissions: []string{
				`{"orRules":{"rules":[{"header":{"name":":authority","stringMatch":{"exact":"h","ignoreCase":true}}}]}}`,
				`{"orRules":{"rules":[{"header":{"name":":method","stringMatch":{"exact":"POST"}}}]}}`,
				`{"orRules":{"rules":[{"urlPath":{"path":{"exact":"/a.B/C"}}}]}}`,
				`{"orRules":{"rules":[{"destinationPort":8080}]}}`}},
		{desc: "when request.headers",
			when: []model.AuthzCondition{{Key: "request.headers[x-user]", Values: []string{"alice", "bob-*", "*-ops", "*"}, NotValues: []string{"eve"}}},
			principals: []string{`{"orIds":{"ids":[
				{"header":{"name":"x-user","stringMatch":{"exact":"alice"}}},
				{"header":{"name":"x-user","stringMatch":{"prefix":"bob-"}}},
				{"header":{"name":"x-user","stringMatch":{"suffix":"-ops"}}},
				{"header":{"name":"x-user","presentMatch":true}}]}}`,
				`{"notId":{"orIds":{"ids":[{"header":{"name":"x-user","stringMatch":{"exact":"eve"}}}]}}}`}},
		{desc: "when source.ip, remote.ip, source.namespace, source.principal",
			when: []model.AuthzCondition{{Key: "source.ip", Values: []string{"10.0.0.0/8"}}, {Key: "remote.ip", Values: []string{"10.1.0.0/16"}},
				{Key: "source.namespace", Values: []string{"a"}}, {Key: "source.principal", NotValues: []string{"cluster.local/ns/a/sa/b"}}},
			principals: []string{
				`{"orIds":{"ids":[{"directRemoteIp":{"addressPrefix":"10.0.0.0","prefixLen":8}}]}}`,
				`{"orIds":{"ids":[{"remoteIp":{"addressPrefix":"10.1.0.0","prefixLen":16}}]}}`,
				`{"orIds":{"ids":[{"authenticated":{"principalName":{"safeRegex":{"regex":".*/ns/a/.*"}}}}]}}`,
				`{"notId":{"orIds":{"ids":[{"authenticated":{"principalName":{"exact":"spiffe://cluster.local/ns/a/sa/b"}}}]}}}`}},
		{desc: "when source.serviceAccount and source.trustDomain",
			mesh: aliased,
			when: []model.AuthzCondition{{Key: "source.serviceAccount", Values: []string{"web", "other/api"}}, {Key: "source.trustDomain", Values: []string{"new.td"}}},
			principals: []string{
				`{"orIds":{"ids":[{"authenticated":{"principalName":{"safeRegex":{"regex":"spiffe://.+/ns/apps/(.+/|)sa/web(/.+)?"}}}},
					{"authenticated":{"principalName":{"safeRegex":{"regex":"spiffe://.+/ns/other/(.+/|)sa/api(/.+)?"}}}}]}}`,
				`{"orIds":{"ids":[{"authenticated":{"principalName":{"prefix":"spiffe://new.td/"}}},{"authenticated":{"principalName":{"prefix":"spiffe://old.td/"}}}]}}`}},
		{desc: "when destination.port and destination.ip, after the operation's fields",
			to:   model.AuthzOperation{Paths: []string{"/a.B/C"}},
			when: []model.AuthzCondition{{Key: "destination.port", Values: []string{"8080"}}, {Key: "destination.ip", Values: []string{"10.0.0.7"}}},
			permissions: []string{
				`{"orRules":{"rules":[{"urlPath":{"path":{"exact":"/a.B/C"}}}]}}`,
				`{"orRules":{"rules":[{"destinationPort":8080}]}}`,
				`{"orRules":{"rules":[{"destinationIp":{"addressPrefix":"10.0.0.7","prefixLen":32}}]}}`}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			m := tc.mesh
			if m == nil {
				m = mesh
			}
			r := model.AuthzRule{When: tc.when}
			if !isZeroSource(tc.from) {
				r.From = []model.AuthzSource{tc.from}
			}
			if !isZeroOperation(tc.to) {
				r.To = []model.AuthzOperation{tc.to}
			}
			p := &model.AuthorizationPolicy{Namespace: "apps", Name: "p", Rules: []model.AuthzRule{r}}
			rules := rbacOf(t, rbacFilters([]*model.AuthorizationPolicy{p}, m, false))[rbacFilterAllow]
			got := rules.GetPolicies()["apps-p-0"]
			if got == nil || len(got.GetPermissions()) != 1 || len(got.GetPrincipals()) != 1 {
				t.Fatalf("policy apps-p-0: %v", rules)
			}
			wantPrin := jsonPrincipals(t, tc.principals)
			if len(wantPrin) == 0 {
				wantPrin = []*rbac.Principal{principalAny()}
			}
			wantPerm := jsonPermissions(t, tc.permissions)
			if len(wantPerm) == 0 {
				wantPerm = []*rbac.Permission{permissionAny()}
			}
			if gotPrin := got.GetPrincipals()[0].GetAndIds().GetIds(); !equalProtos(gotPrin, wantPrin) {
				t.Errorf("principal:\n%s\nwant:\n%s", protosText(gotPrin), protosText(wantPrin))
			}
			if gotPerm := got.GetPermissions()[0].GetAndRules().GetRules(); !equalProtos(gotPerm, wantPerm) {
				t.Errorf("permission:\n%s\nwant:\n%s", protosText(gotPerm), protosText(wantPerm))
			}
		})
	}
}

func isZeroSource(s model.AuthzSource) bool {
	return reflect.ValueOf(s).IsZero()
}

func isZeroOperation(o model.AuthzOperation) bool {
	return reflect.ValueOf(o).IsZero()
}

// TestAuthzFailClosed: what a gRPC server cannot evaluate voids a rule
// of an ALLOW policy (it allows nothing) and is left out of a rule of a
// DENY or CUSTOM policy (it denies more), as istiod treats what it cannot
// express.
func TestAuthzFailClosed(t *testing.T) {
	front := model.AuthzSource{Namespaces: []string{"front"}}
	for _, tc := range []struct {
		desc string
		rule model.AuthzRule
	}{
		{"requestPrincipals", model.AuthzRule{From: []model.AuthzSource{{RequestPrincipals: []string{"*"}, Namespaces: []string{"front"}}}}},
		{"notRequestPrincipals", model.AuthzRule{From: []model.AuthzSource{{NotRequestPrincipals: []string{"iss/sub"}, Namespaces: []string{"front"}}}}},
		{"a JWT claim", model.AuthzRule{From: []model.AuthzSource{front}, When: []model.AuthzCondition{{Key: "request.auth.claims[groups]", Values: []string{"admin"}}}}},
		{"request.auth.principal", model.AuthzRule{From: []model.AuthzSource{front}, When: []model.AuthzCondition{{Key: "request.auth.principal", Values: []string{"a/b"}}}}},
		{"connection.sni, which grpc-go matches as empty", model.AuthzRule{From: []model.AuthzSource{front}, When: []model.AuthzCondition{{Key: "connection.sni", NotValues: []string{"x.example"}}}}},
		{"Envoy filter metadata", model.AuthzRule{From: []model.AuthzSource{front}, When: []model.AuthzCondition{{Key: "experimental.envoy.filters.network.mysql_proxy[db.table]", Values: []string{"[update]"}}}}},
		{"an unknown key", model.AuthzRule{From: []model.AuthzSource{front}, When: []model.AuthzCondition{{Key: "source.color", Values: []string{"blue"}}}}},
		{"a grpc- header, which grpc-go refuses", model.AuthzRule{From: []model.AuthzSource{front}, When: []model.AuthzCondition{{Key: "request.headers[grpc-timeout]", Values: []string{"1S"}}}}},
		{"a path template", model.AuthzRule{From: []model.AuthzSource{front}, To: []model.AuthzOperation{{Paths: []string{"/echo.{*}/Say"}}}}},
		{"an invalid port", model.AuthzRule{From: []model.AuthzSource{front}, To: []model.AuthzOperation{{Ports: []string{"http"}}}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			mesh := model.DefaultMeshSettings()
			allow := &model.AuthorizationPolicy{Namespace: "apps", Name: "p", Rules: []model.AuthzRule{tc.rule, {}}}
			got := rbacOf(t, rbacFilters([]*model.AuthorizationPolicy{allow}, mesh, false))
			if ps := got[rbacFilterAllow].GetPolicies(); len(got) != 1 || ps["apps-p-0"] != nil || ps["apps-p-1"] == nil {
				t.Errorf("ALLOW: %v, want the rule dropped, the next one kept", got)
			}
			for _, action := range []model.AuthzAction{model.AuthzDeny, model.AuthzCustom} {
				deny := &model.AuthorizationPolicy{Namespace: "apps", Name: "p", Action: action, Rules: []model.AuthzRule{tc.rule}}
				got := rbacOf(t, rbacFilters([]*model.AuthorizationPolicy{deny}, mesh, false))
				p := got[rbacFilterDeny].GetPolicies()["apps-p-0"]
				if len(got) != 1 || p == nil {
					t.Fatalf("%v: %v, want a DENY filter with the rule", action, got)
				}
				// What is left: the rule's namespaces, nothing else.
				want := jsonPrincipals(t, []string{`{"orIds":{"ids":[{"authenticated":{"principalName":{"safeRegex":{"regex":".*/ns/front/.*"}}}}]}}`})
				if ids := p.GetPrincipals()[0].GetAndIds().GetIds(); !equalProtos(ids, want) {
					t.Errorf("%v principal:\n%s", action, protosText(ids))
				}
				if perm := p.GetPermissions()[0].GetAndRules().GetRules(); !equalProtos(perm, []*rbac.Permission{permissionAny()}) {
					t.Errorf("%v permission:\n%s", action, protosText(perm))
				}
			}
		})
	}
}

// TestAuthzActions: Istio's evaluation order in the filters grpc-go runs
// one after the other: DENY (and CUSTOM) first, then ALLOW; an ALLOW
// policy without rules is an ALLOW filter without policies (nothing is
// allowed), a DENY policy without rules denies nothing, AUDIT is not
// served, and a rule {} matches every call.
func TestAuthzActions(t *testing.T) {
	mesh := model.DefaultMeshSettings()
	pol := func(name string, a model.AuthzAction, rules ...model.AuthzRule) *model.AuthorizationPolicy {
		return &model.AuthorizationPolicy{Namespace: "apps", Name: name, Action: a, Rules: rules}
	}
	type filter struct {
		name     string
		policies []string
	}
	for _, tc := range []struct {
		desc     string
		policies []*model.AuthorizationPolicy
		mTLS     bool
		want     []filter
	}{
		{"none", nil, false, nil},
		{"ALLOW without rules allows nothing", []*model.AuthorizationPolicy{pol("a", model.AuthzAllow)}, false,
			[]filter{{rbacFilterAllow, nil}}},
		{"DENY without rules denies nothing", []*model.AuthorizationPolicy{pol("d", model.AuthzDeny)}, false, nil},
		{"AUDIT is not served", []*model.AuthorizationPolicy{pol("au", model.AuthzAudit, model.AuthzRule{})}, false, nil},
		{"DENY before ALLOW, CUSTOM with DENY", []*model.AuthorizationPolicy{
			pol("a", model.AuthzAllow, model.AuthzRule{}, model.AuthzRule{}), pol("d", model.AuthzDeny, model.AuthzRule{}), pol("c", model.AuthzCustom, model.AuthzRule{})}, false,
			[]filter{{rbacFilterDeny, []string{"apps-c-0", "apps-d-0"}}, {rbacFilterAllow, []string{"apps-a-0", "apps-a-1"}}}},
		{"mutual TLS: the trust domain check alone", nil, true, []filter{{rbacFilterDeny, []string{trustDomainPolicy}}}},
		{"mutual TLS: the trust domain check with the DENY rules", []*model.AuthorizationPolicy{pol("d", model.AuthzDeny, model.AuthzRule{})}, true,
			[]filter{{rbacFilterDeny, []string{"apps-d-0", trustDomainPolicy}}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			fs := rbacFilters(tc.policies, mesh, tc.mTLS)
			var got []filter
			for _, f := range fs {
				r := rbacOf(t, []*hcm.HttpFilter{f})[f.GetName()]
				want := rbac.RBAC_ALLOW
				if f.GetName() == rbacFilterDeny {
					want = rbac.RBAC_DENY
				}
				if r == nil || r.GetAction() != want {
					t.Fatalf("filter %s: rules %v, want action %v", f.GetName(), r, want)
				}
				var names []string
				for n := range r.GetPolicies() {
					names = append(names, n)
				}
				slices.Sort(names)
				got = append(got, filter{f.GetName(), names})
			}
			if !slices.EqualFunc(got, tc.want, func(a, b filter) bool { return a.name == b.name && slices.Equal(a.policies, b.policies) }) {
				t.Fatalf("filters %v, want %v", got, tc.want)
			}
			for _, f := range fs {
				for _, p := range rbacOf(t, []*hcm.HttpFilter{f})[f.GetName()].GetPolicies() {
					if len(p.GetPermissions()) == 0 || len(p.GetPrincipals()) == 0 {
						t.Errorf("a policy without permissions or principals, which Envoy refuses: %v", p)
					}
				}
			}
		})
	}
}

// TestTrustDomainPolicy: under mutual TLS a peer whose certificate is of
// neither the mesh's trust domain nor an alias is denied (grpc-go cannot
// check the client certificate's SANs in the TLS context).
func TestTrustDomainPolicy(t *testing.T) {
	mesh := &model.MeshSettings{TrustDomain: "new.td", TrustDomainAliases: []string{"old.td", "new.td"}}
	p := rbacOf(t, rbacFilters(nil, mesh, true))[rbacFilterDeny].GetPolicies()[trustDomainPolicy]
	want := jsonPrincipals(t, []string{`{"notId":{"orIds":{"ids":[
		{"authenticated":{"principalName":{"prefix":"spiffe://new.td/"}}},
		{"authenticated":{"principalName":{"prefix":"spiffe://old.td/"}}}]}}}`})
	if !equalProtos(p.GetPrincipals(), want) || !equalProtos(p.GetPermissions(), []*rbac.Permission{permissionAny()}) {
		t.Fatalf("trust domain policy: %v", p)
	}
}

// TestValidateRBAC: Validate holds a server listener's RBAC filters to
// what grpc-go refuses (gRFC A41), which Envoy's field rules allow.
func TestValidateRBAC(t *testing.T) {
	headerRule := func(name string) *rbac.Policy {
		return &rbac.Policy{
			Permissions: []*rbac.Permission{{Rule: &rbac.Permission_NotRule{NotRule: &rbac.Permission{Rule: &rbac.Permission_Header{Header: mustHeader(t, name)}}}}},
			Principals:  []*rbac.Principal{principalAny()},
		}
	}
	for _, tc := range []struct {
		desc  string
		rules *rbac.RBAC
		ok    bool
	}{
		{"a header", &rbac.RBAC{Policies: map[string]*rbac.Policy{"p": headerRule("x-user")}}, true},
		{"a grpc- header", &rbac.RBAC{Policies: map[string]*rbac.Policy{"p": headerRule("grpc-timeout")}}, false},
		{":scheme", &rbac.RBAC{Policies: map[string]*rbac.Policy{"p": headerRule(":scheme")}}, false},
		{"LOG", &rbac.RBAC{Action: rbac.RBAC_LOG}, false},
		{"a policy without principals", &rbac.RBAC{Policies: map[string]*rbac.Policy{"p": {Permissions: []*rbac.Permission{permissionAny()}}}}, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			l := buildInboundListener(model.InboundListenerPrefix+"0.0.0.0:8080", "0.0.0.0", 8080,
				inboundSecurity{Filters: []*hcm.HttpFilter{rbacFilter(rbacFilterDeny, tc.rules)}})
			if err := Validate(l); (err == nil) != tc.ok {
				t.Fatalf("Validate: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func mustHeader(t *testing.T, name string) *route.HeaderMatcher {
	t.Helper()
	return &route.HeaderMatcher{Name: name, HeaderMatchSpecifier: &route.HeaderMatcher_PresentMatch{PresentMatch: true}}
}

// TestAuthorizationGRPCIgnored: what /debug/configz says of a policy a
// gRPC server does not enforce as written, by the field's path.
func TestAuthorizationGRPCIgnored(t *testing.T) {
	rules := []model.AuthzRule{
		{From: []model.AuthzSource{{Namespaces: []string{"a"}}, {RequestPrincipals: []string{"*"}}}},
		{To: []model.AuthzOperation{{Paths: []string{"/a.B/{*}"}}}, When: []model.AuthzCondition{{Key: "connection.sni", Values: []string{"x"}}, {Key: "source.ip", Values: []string{"10.0.0.1"}}}},
		{},
	}
	paths := func(fs []configstatus.Field) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Path)
		}
		return out
	}
	wantRules := []string{"spec.rules[0].from[1].source.requestPrincipals", "spec.rules[1].when[0]", "spec.rules[1].to[0].operation.paths"}
	for _, tc := range []struct {
		action model.AuthzAction
		want   []string
		why    string // in the rules' fields
	}{
		{model.AuthzAllow, wantRules, "allows nothing"},
		{model.AuthzDeny, wantRules, "denies more"},
		{model.AuthzCustom, append([]string{"spec.action"}, wantRules...), "denies more"},
		{model.AuthzAudit, []string{"spec.action"}, ""},
	} {
		got := AuthorizationGRPCIgnored(&model.AuthorizationPolicy{Namespace: "apps", Name: "p", Action: tc.action, Rules: rules})
		if !slices.Equal(paths(got), tc.want) {
			t.Errorf("%v: %v, want %v", tc.action, paths(got), tc.want)
		}
		for _, f := range got {
			if f.Path != "spec.action" && !strings.Contains(f.Why, tc.why) {
				t.Errorf("%v: %s: %q, want it to say %q", tc.action, f.Path, f.Why, tc.why)
			}
		}
	}
	if got := AuthorizationGRPCIgnored(&model.AuthorizationPolicy{Rules: []model.AuthzRule{{From: []model.AuthzSource{{Principals: []string{"x"}}}}}}); len(got) != 0 {
		t.Errorf("a policy gRPC servers enforce as written: %v", got)
	}
}
