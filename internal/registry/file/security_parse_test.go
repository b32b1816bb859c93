package file

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	securityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
)

const goodPeerAuthentication = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: reviews}
spec:
  selector: {matchLabels: {app: reviews}}
  mtls: {mode: STRICT}
  portLevelMtls:
    9080: {mode: DISABLE}
`

const goodAuthorizationPolicy = `apiVersion: security.istio.io/v1beta1
kind: AuthorizationPolicy
metadata: {name: reviews}
spec:
  selector: {matchLabels: {app: reviews}}
  action: DENY
  rules:
  - from: [{source: {notNamespaces: [default], ipBlocks: [192.0.2.0/24]}}]
    to: [{operation: {paths: ["/reviews.Reviews/*"], ports: ["9080"]}}]
    when: [{key: "request.headers[x-user]", values: [admin]}]
`

// The security kinds join the parser's tables (parse_test.go), so that
// TestVerdictsAgreeWithTheAPIServer holds them to the API server with
// Istio's CRDs too.
func init() {
	validManifests = append(validManifests,
		validCase{"a PeerAuthentication", goodPeerAuthentication, []string{"PeerAuthentication"}},
		validCase{"an AuthorizationPolicy (v1beta1)", goodAuthorizationPolicy, []string{"AuthorizationPolicy"}},
	)
	invalidManifests = append(invalidManifests,
		invalidCase{"an unknown mutual TLS mode", strings.Replace(goodPeerAuthentication, "{mode: STRICT}", "{mode: STRONG}", 1),
			1, 1, "spec.mtls.mode", `Unsupported value: "STRONG"`},
		invalidCase{"an unknown field in an AuthorizationPolicy rule", strings.Replace(goodAuthorizationPolicy, "ipBlocks:", "ipBlock:", 1),
			1, 1, "spec.rules[0].from[0].source.ipBlock", "unknown field"},
		invalidCase{"a security apiVersion Istio does not serve", strings.Replace(goodPeerAuthentication, "security.istio.io/v1", "security.istio.io/v1alpha1", 1),
			1, 1, "apiVersion", `"security.istio.io/v1"`},
	)
}

// TestParseSecurityKinds: both kinds decode into istio.io/client-go's
// security/v1 types, whichever version the file names.
func TestParseSecurityKinds(t *testing.T) {
	objs, problems := ParseFile("f.yaml", []byte(goodPeerAuthentication+"---\n"+goodAuthorizationPolicy))
	if len(problems) > 0 {
		t.Fatal(describe(problems))
	}
	if len(objs) != 2 {
		t.Fatalf("%d objects, want 2", len(objs))
	}
	pa := objs[0].Obj.(*securityv1.PeerAuthentication)
	if pa.APIVersion != "security.istio.io/v1" || pa.Spec.GetMtls().GetMode().String() != "STRICT" ||
		pa.Spec.GetPortLevelMtls()[9080].GetMode().String() != "DISABLE" {
		t.Errorf("PeerAuthentication decoded as %v", pa)
	}
	ap := objs[1].Obj.(*securityv1.AuthorizationPolicy)
	if ap.APIVersion != "security.istio.io/v1" || ap.Spec.GetAction().String() != "DENY" ||
		ap.Spec.GetRules()[0].GetTo()[0].GetOperation().GetPorts()[0] != "9080" {
		t.Errorf("AuthorizationPolicy decoded as %v", ap)
	}
}

// TestSecurityStatusNamesFileAndLine: from a folder, a security policy
// the conversion refuses is reported with its file and line, and its last
// good version stays in force.
func TestSecurityStatusNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	status := configstatus.NewReporter()
	sec := crd.NewSecurity(r.Istio(), crd.SecurityOptions{Status: status})
	path := filepath.Join(dir, "policies.yaml")
	badCIDR := strings.Replace(goodAuthorizationPolicy, "192.0.2.0/24", "192.0.2.0/33", 1)
	for _, step := range []struct {
		content, where, state, field string
		policies                     int
	}{
		{goodAuthorizationPolicy, path + ":1 (document 1)", configstatus.StatePartial, "", 1},
		{goodService + "---\n" + badCIDR, path + ":10 (document 2)", configstatus.StateRefused, "spec.rules[0].from[0].source.ipBlocks", 1},
	} {
		if err := os.WriteFile(path, []byte(step.content), 0o644); err != nil {
			t.Fatal(err)
		}
		r.reload(nil, time.Time{})
		entries := status.List()
		if len(entries) != 1 || entries[0].Where != step.where || entries[0].State() != step.state ||
			step.field != "" && entries[0].Refused.Path != step.field {
			t.Fatalf("status %+v, want one %s entry at %s", entries, step.state, step.where)
		}
		if n := len(sec.SecurityPoliciesFor("default").Authz); n != step.policies {
			t.Errorf("%d policies in force, want %d", n, step.policies)
		}
	}
}
