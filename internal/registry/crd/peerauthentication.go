package crd

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	securityapi "istio.io/api/security/v1beta1"
	typeapi "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// whyNoEnvoyInbound is reported on every security policy: the policies
// take effect on a server's inbound listener, and meshpilot serves Envoy
// outbound configuration only.
const whyNoEnvoyInbound = "meshpilot serves Envoy no inbound listeners, so Envoy sidecars do not get this policy from meshpilot: only proxyless gRPC servers do"

// ConvertPeerAuthentication converts a PeerAuthentication into the model,
// refusing (nil, Status.Refused) what istiod's validation refuses: a
// selector label with an empty key or a wildcard, portLevelMtls on a
// policy without a selector (a namespace's or the mesh's), or on port 0
// or above 65535. A selector without labels is taken as none (the
// namespace's policy), as istiod takes it, which only warns.
func ConvertPeerAuthentication(pa *securityv1.PeerAuthentication) (*model.PeerAuthentication, configstatus.Status) {
	spec := &pa.Spec
	if st, bad := checkSelector(spec.GetSelector()); bad {
		return nil, st
	}
	out := &model.PeerAuthentication{
		Namespace: pa.Namespace,
		Name:      pa.Name,
		Created:   pa.CreationTimestamp.Time,
		Mode:      mtlsMode(spec.GetMtls()),
	}
	if labels := spec.GetSelector().GetMatchLabels(); len(labels) > 0 {
		out.Selector = model.Labels(labels)
	}
	if spec.PortLevelMtls != nil {
		if len(out.Selector) == 0 {
			return nil, configstatus.Refuse("spec.portLevelMtls",
				"a policy without a selector (the namespace's or the mesh's) cannot set port-level mutual TLS: istiod refuses it")
		}
		if len(spec.PortLevelMtls) == 0 {
			return nil, configstatus.Refuse("spec.portLevelMtls", "port-level mutual TLS, when given, needs at least one port: istiod refuses it empty")
		}
		out.PortModes = make(map[uint32]model.MTLSMode, len(spec.PortLevelMtls))
		for _, port := range slices.Sorted(maps.Keys(spec.PortLevelMtls)) {
			if port == 0 || port > 65535 {
				return nil, configstatus.Refuse(fmt.Sprintf("spec.portLevelMtls.%d", port), "a port must be from 1 to 65535")
			}
			out.PortModes[port] = mtlsMode(spec.PortLevelMtls[port])
		}
	}
	var st configstatus.Status
	st.IgnoreEnvoy("spec", whyNoEnvoyInbound)
	return out, st
}

func mtlsMode(m *securityapi.PeerAuthentication_MutualTLS) model.MTLSMode {
	switch m.GetMode() {
	case securityapi.PeerAuthentication_MutualTLS_DISABLE:
		return model.MTLSDisable
	case securityapi.PeerAuthentication_MutualTLS_PERMISSIVE:
		return model.MTLSPermissive
	case securityapi.PeerAuthentication_MutualTLS_STRICT:
		return model.MTLSStrict
	}
	return model.MTLSUnset
}

// checkSelector refuses what istiod's validateWorkloadSelector refuses: a
// label with an empty key, or with "*" in its key or value.
func checkSelector(sel *typeapi.WorkloadSelector) (configstatus.Status, bool) {
	for _, k := range slices.Sorted(maps.Keys(sel.GetMatchLabels())) {
		v := sel.GetMatchLabels()[k]
		switch {
		case k == "":
			return configstatus.Refuse("spec.selector.matchLabels", "a label's key must not be empty"), true
		case strings.Contains(k, "*") || strings.Contains(v, "*"):
			return configstatus.Refuse("spec.selector.matchLabels."+k, "a selector matches labels exactly: a wildcard is not supported"), true
		}
	}
	return configstatus.Status{}, false
}
