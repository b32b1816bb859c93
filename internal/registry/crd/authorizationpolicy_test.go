package crd

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	securityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

func authorizationPolicy(t *testing.T, spec string) *securityv1.AuthorizationPolicy {
	t.Helper()
	ap := &securityv1.AuthorizationPolicy{}
	if err := yaml.UnmarshalStrict([]byte("metadata: {namespace: ns, name: ap}\nspec:\n"+spec), ap); err != nil {
		t.Fatal(err)
	}
	return ap
}

// TestConvertAuthorizationPolicyRefuses: what istiod's validation
// refuses, each with the field it is about.
func TestConvertAuthorizationPolicyRefuses(t *testing.T) {
	for _, tc := range []struct{ name, spec, field string }{
		{"selector and targetRefs", "  selector: {matchLabels: {app: a}}\n  targetRefs: [{kind: Service, name: a}]", "spec"},
		{"targetRef and targetRefs", "  targetRef: {kind: Service, name: a}\n  targetRefs: [{kind: Service, name: a}]", "spec"},
		{"a wildcard in the selector", "  selector: {matchLabels: {app: \"*\"}}", "spec.selector.matchLabels.app"},
		{"a targetRef of a Deployment", "  targetRefs: [{group: apps, kind: Deployment, name: a}]", "spec.targetRefs[0]"},
		{"a targetRef of another namespace", "  targetRef: {kind: Service, name: a, namespace: other}", "spec.targetRef"},
		{"a targetRef without a name", "  targetRefs: [{kind: Service}]", "spec.targetRefs[0]"},
		{"CUSTOM without a provider", "  action: CUSTOM\n  rules: [{}]", "spec.provider.name"},
		{"CUSTOM without rules", "  action: CUSTOM\n  provider: {name: ext}", "spec.rules"},
		{"CUSTOM with principals", "  action: CUSTOM\n  provider: {name: ext}\n  rules: [{from: [{source: {principals: [a]}}]}]", "spec.rules[0].from[0].source.principals"},
		{"a provider without CUSTOM", "  provider: {name: ext}\n  rules: [{}]", "spec.provider"},
		{"DENY without rules", "  action: DENY", "spec.rules"},
		{"a from entry without a source", "  rules: [{from: [{}]}]", "spec.rules[0].from[0].source"},
		{"a source that sets nothing", "  rules: [{from: [{source: {}}]}]", "spec.rules[0].from[0].source"},
		{"a source that sets only an empty list", "  rules: [{from: [{source: {principals: []}}]}]", "spec.rules[0].from[0].source"},
		{"a to entry without an operation", "  rules: [{to: [{}]}]", "spec.rules[0].to[0].operation"},
		{"paths: [] alone", "  rules: [{to: [{operation: {paths: []}}]}]", "spec.rules[0].to[0].operation"},
		{"an empty path", "  rules: [{to: [{operation: {paths: [\"\"]}}]}]", "spec.rules[0].to[0].operation.paths"},
		{"a malformed CIDR", "  rules: [{from: [{source: {ipBlocks: [10.0.0.0/33]}}]}]", "spec.rules[0].from[0].source.ipBlocks"},
		{"a malformed address", "  rules: [{from: [{source: {notRemoteIpBlocks: [10.0.0]}}]}]", "spec.rules[0].from[0].source.notRemoteIpBlocks"},
		{"a port that is not a number", "  rules: [{to: [{operation: {ports: [http]}}]}]", "spec.rules[0].to[0].operation.ports"},
		{"a port above 65535", "  rules: [{to: [{operation: {notPorts: [\"70000\"]}}]}]", "spec.rules[0].to[0].operation.notPorts"},
		{"serviceAccounts with namespaces", "  rules: [{from: [{source: {namespaces: [a], serviceAccounts: [b]}}]}]", "spec.rules[0].from[0].source.serviceAccounts"},
		{"a service account with a wildcard", "  rules: [{from: [{source: {serviceAccounts: [\"ns/*\"]}}]}]", "spec.rules[0].from[0].source.serviceAccounts"},
		{"a trust domain with a slash", "  rules: [{from: [{source: {trustDomains: [a/b]}}]}]", "spec.rules[0].from[0].source.trustDomains"},
		{"a template path with {**} not last", "  rules: [{to: [{operation: {paths: [\"/{**}/a/{*}\"]}}]}]", "spec.rules[0].to[0].operation.paths"},
		{"an unknown when key", "  rules: [{when: [{key: source.color, values: [red]}]}]", "spec.rules[0].when[0].values"},
		{"a when key of v1alpha1", "  rules: [{when: [{key: destination.namespace, values: [a]}]}]", "spec.rules[0].when[0].values"},
		{"a when without values", "  rules: [{when: [{key: source.ip}]}]", "spec.rules[0].when[0]"},
		{"a when with an empty key", "  rules: [{when: [{values: [a]}]}]", "spec.rules[0].when[0].key"},
		{"a header key without brackets", "  rules: [{when: [{key: request.headers, values: [a]}]}]", "spec.rules[0].when[0].values"},
		{"a when port that is not a number", "  rules: [{when: [{key: destination.port, notValues: [x]}]}]", "spec.rules[0].when[0].notValues"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st := ConvertAuthorizationPolicy(authorizationPolicy(t, tc.spec))
			if got != nil || st.Refused == nil || st.Refused.Path != tc.field {
				t.Fatalf("got %+v, %+v; want refused at %s", got, st, tc.field)
			}
		})
	}
}

// TestConvertAuthorizationPolicy: what is converted, and what gRPC
// servers are said not to enforce as written.
func TestConvertAuthorizationPolicy(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		check      func(*model.AuthorizationPolicy) bool
		// ignored are the fields reported for gRPC, and a word of each why.
		ignored map[string]string
		// none: the policy applies to no gRPC server.
		none bool
	}{
		{name: "an empty ALLOW policy denies every call", spec: "  {}",
			check: func(p *model.AuthorizationPolicy) bool {
				return p.Action == model.AuthzAllow && p.Rules == nil && p.Selector == nil
			}},
		{name: "an empty rule matches every call", spec: "  action: DENY\n  rules: [{}]",
			check: func(p *model.AuthorizationPolicy) bool { return p.Action == model.AuthzDeny && len(p.Rules) == 1 }},
		// Decoded from JSON, an empty list is no list: istiod reads it so.
		{name: "from: [] matches every caller, as in istiod", spec: "  rules: [{from: []}]",
			check: func(p *model.AuthorizationPolicy) bool { return len(p.Rules) == 1 && len(p.Rules[0].From) == 0 }},
		{name: "a selector without labels is the namespace's", spec: "  selector: {}\n  rules: [{}]",
			check: func(p *model.AuthorizationPolicy) bool { return p.Selector == nil }},
		{name: "fields carried", spec: `  selector: {matchLabels: {app: a}}
  rules:
  - from: [{source: {principals: [cluster.local/ns/a/sa/b], notNamespaces: [x], trustDomains: ["*.local"]}}, {source: {serviceAccounts: [ns/sa]}}]
    to: [{operation: {methods: [POST], paths: ["/pkg.Svc/*"], notPorts: ["9000"], hosts: [a.example.com]}}]
    when: [{key: source.ip, values: [10.0.0.0/8], notValues: [10.1.0.0/16]}, {key: "request.headers[x-a]", values: [b]}]`,
			check: func(p *model.AuthorizationPolicy) bool {
				r := p.Rules[0]
				return p.Selector["app"] == "a" && r.From[0].Principals[0] == "cluster.local/ns/a/sa/b" && r.From[0].NotNamespaces[0] == "x" &&
					r.From[1].ServiceAccounts[0] == "ns/sa" && r.From[0].TrustDomains[0] == "*.local" &&
					r.To[0].Methods[0] == "POST" && r.To[0].Paths[0] == "/pkg.Svc/*" && r.To[0].NotPorts[0] == "9000" && r.To[0].Hosts[0] == "a.example.com" &&
					len(r.When) == 2 && r.When[0].NotValues[0] == "10.1.0.0/16" && r.When[1].Key == "request.headers[x-a]"
			}},
		{name: "requestPrincipals in ALLOW never match", spec: "  rules: [{from: [{source: {requestPrincipals: [\"*\"]}}]}]",
			ignored: map[string]string{"spec.rules[0].from[0].source.requestPrincipals": "never matches"}},
		{name: "notRequestPrincipals in ALLOW never match, where istiod allows more", spec: "  rules: [{from: [{source: {notRequestPrincipals: [\"*\"]}}]}]",
			ignored: map[string]string{"spec.rules[0].from[0].source.notRequestPrincipals": "would allow more"}},
		{name: "JWT claims in DENY deny more", spec: "  action: DENY\n  rules: [{when: [{key: \"request.auth.claims[groups]\", values: [a]}]}]",
			ignored: map[string]string{"spec.rules[0].when[0].values": "denies more"}},
		{name: "remoteIpBlocks are the peer's address", spec: "  rules: [{from: [{source: {remoteIpBlocks: [192.0.2.0/24]}}]}]",
			ignored: map[string]string{"spec.rules[0].from[0].source.remoteIpBlocks": "X-Forwarded-For"}},
		{name: "AUDIT", spec: "  action: AUDIT\n  rules: [{}]", ignored: map[string]string{"spec.action": "AUDIT"}},
		{name: "CUSTOM", spec: "  action: CUSTOM\n  provider: {name: ext}\n  rules: [{to: [{operation: {paths: [/a]}}]}]",
			ignored: map[string]string{"spec.action": "external authorizer"}},
		{name: "targetRefs of Services", spec: "  targetRefs: [{kind: Service, name: a}, {group: \"\", kind: Service, name: b}]\n  rules: [{}]",
			check:   func(p *model.AuthorizationPolicy) bool { return slices.Equal(p.TargetServices, []string{"a", "b"}) },
			ignored: map[string]string{"spec.targetRefs[0]": "istiod applies targetRefs", "spec.targetRefs[1]": "istiod applies targetRefs"}},
		{name: "the legacy targetRef", spec: "  targetRef: {kind: Service, name: a}\n  rules: [{}]",
			check:   func(p *model.AuthorizationPolicy) bool { return slices.Equal(p.TargetServices, []string{"a"}) },
			ignored: map[string]string{"spec.targetRef": "istiod applies targetRefs"}},
		{name: "a Gateway's policy applies to no gRPC server", spec: "  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]\n  rules: [{}]",
			none: true, ignored: map[string]string{"spec.targetRefs[0]": "never to a gRPC server"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st := ConvertAuthorizationPolicy(authorizationPolicy(t, tc.spec))
			if st.Refused != nil {
				t.Fatalf("refused: %+v", st.Refused)
			}
			if tc.none != (got == nil) {
				t.Fatalf("got %+v, want none: %v", got, tc.none)
			}
			if tc.check != nil && !tc.check(got) {
				t.Errorf("converted as %+v", got)
			}
			ignored := map[string]string{}
			for _, f := range st.IgnoredGRPC {
				ignored[f.Path] = f.Why
			}
			if len(ignored) != len(tc.ignored) {
				t.Errorf("ignored for gRPC: %v, want %v", st.IgnoredGRPC, tc.ignored)
			}
			for path, word := range tc.ignored {
				if !strings.Contains(ignored[path], word) {
					t.Errorf("ignored for gRPC at %s: %q, want it to say %q", path, ignored[path], word)
				}
			}
			if !slices.Equal(st.IgnoredEnvoy, []configstatus.Field{{Path: "spec", Why: whyNoEnvoyInbound}}) {
				t.Errorf("ignored for Envoy: %v", st.IgnoredEnvoy)
			}
		})
	}
}
