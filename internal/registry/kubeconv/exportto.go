package kubeconv

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ExportToAnnotation is Istio's annotation of a Kubernetes Service that
// limits which namespaces see it, like a ServiceEntry's exportTo: a comma
// separated list of ".", "*", "~" and namespace names.
const ExportToAnnotation = "networking.istio.io/exportTo"

// CanonicalServiceAccountsAnnotation lists, comma separated, identities a
// Service's workloads may present beyond its endpoints' (Istio's
// alpha.istio.io/canonical-serviceaccounts).
const CanonicalServiceAccountsAnnotation = "alpha.istio.io/canonical-serviceaccounts"

// canonicalServiceAccounts reads the annotation as istiod does: split on
// commas, nothing trimmed.
func canonicalServiceAccounts(annotations map[string]string) []string {
	v := annotations[CanonicalServiceAccountsAnnotation]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// exportTo reads the annotation's value as Istio does (entries split on
// commas, spaces trimmed). An entry that is none of ".", "*", "~" or a
// namespace name (a DNS-1123 label), an empty one included, is skipped,
// as the conversion ignores other values it cannot read: the API server
// does not check annotations, so such a value reaches meshpilot. Skipping
// never widens visibility: a value of only bad entries exports the
// service to no namespace ("~"), as Istio's list of names that no
// namespace has would.
func exportTo(annotations map[string]string) []string {
	v, ok := annotations[ExportToAnnotation]
	if !ok || strings.TrimSpace(v) == "" {
		return nil
	}
	var out []string
	for e := range strings.SplitSeq(v, ",") {
		e = strings.TrimSpace(e)
		switch {
		case e == "." || e == "*" || e == "~":
		case len(validation.IsDNS1123Label(e)) == 0:
		default:
			continue
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return []string{"~"}
	}
	return out
}
