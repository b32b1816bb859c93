package testenv

import "path/filepath"

// PromQLCheck builds the PromQL checker (tools/promql, Prometheus' own
// parser in a module of its own) if needed and returns its path.
func PromQLCheck() (string, error) {
	dir, err := buildTools(filepath.Join("tools", "promql", "build.sh"), "promqlcheck")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "promqlcheck"), nil
}

// PrometheusRuleCRD returns the path of the Prometheus Operator's
// PrometheusRule CustomResourceDefinition, which tools/promql/build.sh
// copies from the operator's Go module beside the checker.
func PrometheusRuleCRD() (string, error) {
	const crd = "monitoring.coreos.com_prometheusrules.yaml"
	dir, err := buildTools(filepath.Join("tools", "promql", "build.sh"), "promqlcheck", crd)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, crd), nil
}
