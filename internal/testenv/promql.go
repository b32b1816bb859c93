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
