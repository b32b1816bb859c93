package meshconfig

import (
	"fmt"
	"strings"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshpilot/meshpilot/internal/model"
)

// trustDomainsOf sets out's trust domain and aliases, refused as Istio's
// validation (validateTrustDomainConfig) refuses them. An empty
// trustDomain is unset in proto3, which Istio reads as its default.
func trustDomainsOf(mesh *meshv1alpha1.MeshConfig, out *model.MeshSettings) error {
	if td := mesh.GetTrustDomain(); td != "" {
		if err := checkTrustDomain(td); err != nil {
			return fmt.Errorf("trustDomain: %w", err)
		}
		out.TrustDomain = td
	}
	for i, alias := range mesh.GetTrustDomainAliases() {
		if err := checkTrustDomain(alias); err != nil {
			return fmt.Errorf("trustDomainAliases[%d]: %w", i, err)
		}
		out.TrustDomainAliases = append(out.TrustDomainAliases, alias)
	}
	return nil
}

// checkTrustDomain accepts dot-separated DNS labels, the last one
// possibly empty ("example.org."), as Istio's ValidateTrustDomain does;
// like it, it lets upper case through.
func checkTrustDomain(domain string) error {
	if domain == "" {
		return fmt.Errorf("empty trust domain")
	}
	labels := strings.Split(domain, ".")
	for i, label := range labels {
		if i == len(labels)-1 && label == "" {
			return nil
		}
		if len(validation.IsDNS1123Label(strings.ToLower(label))) > 0 {
			return fmt.Errorf("%q is not a trust domain: label %q is not a DNS label", domain, label)
		}
	}
	return nil
}
