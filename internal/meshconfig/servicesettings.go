package meshconfig

import (
	"fmt"
	"strings"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshpilot/meshpilot/internal/model"
)

// serviceSettingsOf converts serviceSettings, refusing the hosts Istio's
// validation (validateServiceSettings) refuses.
func serviceSettingsOf(in []*meshv1alpha1.MeshConfig_ServiceSettings) ([]model.ServiceSettings, error) {
	var out []model.ServiceSettings
	for i, s := range in {
		ss := model.ServiceSettings{ClusterLocal: s.GetSettings().GetClusterLocal()}
		for j, h := range s.GetHosts() {
			if err := checkWildcardHost(h); err != nil {
				return nil, fmt.Errorf("serviceSettings[%d].hosts[%d]: %w", i, j, err)
			}
			ss.Hosts = append(ss.Hosts, model.Hostname(h))
		}
		out = append(out, ss)
	}
	return out, nil
}

// checkWildcardHost accepts a hostname whose first label may be a
// wildcard ("*", "*.ns.svc.cluster.local", "*-foo.example.com"), as
// Istio's ValidateWildcardDomain does.
func checkWildcardHost(h string) error {
	if h == "" {
		return fmt.Errorf("empty host")
	}
	first, rest, dotted := strings.Cut(h, ".")
	if strings.HasPrefix(first, "*") {
		first = strings.TrimPrefix(first, "*")
		if first != "" && len(validation.IsDNS1123Label("x"+strings.ToLower(first))) > 0 {
			return fmt.Errorf("%q is not a host: bad wildcard label", h)
		}
	} else if len(validation.IsDNS1123Label(strings.ToLower(first))) > 0 {
		return fmt.Errorf("%q is not a host: label %q is not a DNS label", h, first)
	}
	if !dotted {
		return nil
	}
	for _, label := range strings.Split(rest, ".") {
		if len(validation.IsDNS1123Label(strings.ToLower(label))) > 0 {
			return fmt.Errorf("%q is not a host: label %q is not a DNS label", h, label)
		}
	}
	return nil
}
