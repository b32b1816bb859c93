package testenv

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// IstioCRDs returns the path of istio.io/api's CustomResourceDefinitions
// (all of Istio's, the four traffic kinds among them) in the module cache,
// at the version go.mod requires, so that tests install exactly what the
// code was built against.
func IstioCRDs() (string, error) {
	dir, err := moduleDir("istio.io/api")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kubernetes", "customresourcedefinitions.gen.yaml"), nil
}

// GatewayAPICRDs returns the folder of sigs.k8s.io/gateway-api's
// CustomResourceDefinitions of a release channel ("standard" or
// "experimental") in the module cache, at the version go.mod requires.
func GatewayAPICRDs(channel string) (string, error) {
	if channel != "standard" && channel != "experimental" {
		return "", fmt.Errorf("testenv: no Gateway API channel %q", channel)
	}
	dir, err := moduleDir("sigs.k8s.io/gateway-api")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "config", "crd", channel), nil
}

// InstallGatewayAPICRDs installs the Gateway API's CustomResourceDefinitions
// of a channel (GatewayAPICRDs), so that their CEL validation runs on
// every object a test writes, and waits until the API server serves them.
func (e *Env) InstallGatewayAPICRDs(t testing.TB, channel string) {
	t.Helper()
	path, err := GatewayAPICRDs(channel)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.InstallCRDs(path); err != nil {
		t.Fatal(err)
	}
}

// moduleDir is where the module cache holds module, at the version
// go.mod requires.
func moduleDir(module string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("testenv: locating %s in the module cache: %w\n%s", module, err, stderr.String())
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("testenv: %s is not downloaded; run go mod download", module)
	}
	return dir, nil
}

// InstallCRDs installs the CustomResourceDefinitions in the manifests at
// paths (files or folders) and waits until the API server serves them.
// CRDs are cluster-wide and cost the API server a little for every test
// that follows, so only the packages that need them call this.
func (e *Env) InstallCRDs(paths ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{
		Paths:              paths,
		ErrorIfPathMissing: true,
		MaxTime:            60 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("testenv: installing CRDs from %v: %w", paths, err)
	}
	return crds, nil
}

// InstallIstioCRDs installs Istio's CustomResourceDefinitions (IstioCRDs)
// and waits until the API server serves them.
func (e *Env) InstallIstioCRDs(t testing.TB) {
	t.Helper()
	path, err := IstioCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.InstallCRDs(path); err != nil {
		t.Fatal(err)
	}
}
