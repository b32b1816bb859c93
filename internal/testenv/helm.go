package testenv

import "path/filepath"

// Helm builds helm (tools/helm) if needed and returns its path, so that
// tests can lint, render and install charts/meshpilot with the helm
// operators run, and run the README's helm commands as written.
func Helm() (string, error) {
	dir, err := buildTools(filepath.Join("tools", "helm", "build.sh"), "helm")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "helm"), nil
}
