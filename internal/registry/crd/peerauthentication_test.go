package crd

import (
	"maps"
	"testing"

	"sigs.k8s.io/yaml"

	securityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/meshpilot/meshpilot/internal/model"
)

func peerAuthentication(t *testing.T, spec string) *securityv1.PeerAuthentication {
	t.Helper()
	pa := &securityv1.PeerAuthentication{}
	if err := yaml.UnmarshalStrict([]byte("metadata: {namespace: ns, name: pa}\nspec:\n"+spec), pa); err != nil {
		t.Fatal(err)
	}
	return pa
}

func TestConvertPeerAuthentication(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		// refused is the refused field; "" when converted.
		refused  string
		mode     model.MTLSMode
		selector model.Labels
		ports    map[uint32]model.MTLSMode
	}{
		{name: "namespace STRICT", spec: "  mtls: {mode: STRICT}", mode: model.MTLSStrict},
		{name: "no mtls: UNSET inherits", spec: "  selector: {matchLabels: {app: a}}", mode: model.MTLSUnset, selector: model.Labels{"app": "a"}},
		{name: "port-level modes", spec: "  selector: {matchLabels: {app: a}}\n  mtls: {mode: STRICT}\n  portLevelMtls: {8080: {mode: DISABLE}, 9090: {mode: PERMISSIVE}}",
			mode: model.MTLSStrict, selector: model.Labels{"app": "a"}, ports: map[uint32]model.MTLSMode{8080: model.MTLSDisable, 9090: model.MTLSPermissive}},
		// istiod only warns: the policy is the namespace's.
		{name: "a selector without labels", spec: "  selector: {}\n  mtls: {mode: DISABLE}", mode: model.MTLSDisable},
		{name: "portLevelMtls without a selector", spec: "  mtls: {mode: STRICT}\n  portLevelMtls: {8080: {mode: DISABLE}}", refused: "spec.portLevelMtls"},
		{name: "portLevelMtls with a selector without labels", spec: "  selector: {matchLabels: {}}\n  portLevelMtls: {8080: {mode: DISABLE}}", refused: "spec.portLevelMtls"},
		{name: "port 0", spec: "  selector: {matchLabels: {app: a}}\n  portLevelMtls: {0: {mode: DISABLE}}", refused: "spec.portLevelMtls.0"},
		{name: "port above 65535", spec: "  selector: {matchLabels: {app: a}}\n  portLevelMtls: {65536: {mode: DISABLE}}", refused: "spec.portLevelMtls.65536"},
		{name: "a wildcard label", spec: "  selector: {matchLabels: {app: \"a*\"}}", refused: "spec.selector.matchLabels.app"},
		{name: "an empty label key", spec: "  selector: {matchLabels: {\"\": a}}", refused: "spec.selector.matchLabels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st := ConvertPeerAuthentication(peerAuthentication(t, tc.spec))
			if tc.refused != "" {
				if got != nil || st.Refused == nil || st.Refused.Path != tc.refused {
					t.Fatalf("got %+v, %+v; want refused at %s", got, st, tc.refused)
				}
				return
			}
			if got == nil || st.Refused != nil {
				t.Fatalf("refused: %+v", st.Refused)
			}
			if got.Mode != tc.mode || !maps.Equal(got.Selector, tc.selector) || !maps.Equal(got.PortModes, tc.ports) {
				t.Errorf("got mode %v selector %v ports %v; want %v %v %v", got.Mode, got.Selector, got.PortModes, tc.mode, tc.selector, tc.ports)
			}
			if len(st.IgnoredGRPC) != 0 || len(st.IgnoredEnvoy) != 1 || st.IgnoredEnvoy[0].Path != "spec" {
				t.Errorf("status %+v, want one note for Envoy on spec", st)
			}
		})
	}
}
