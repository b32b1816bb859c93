package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoXDSClientLinked: grpc-go's xDS client (its resolver, balancers,
// bootstrap and the protos it registers) is the demo's alone; Go links and
// initialises every package of a binary whatever the command runs, so it
// must not come back into meshpilot through an import.
func TestNoXDSClientLinked(t *testing.T) {
	for _, pkg := range deps(t) {
		if strings.HasPrefix(pkg, "google.golang.org/grpc/xds") || strings.HasPrefix(pkg, "google.golang.org/grpc/internal/xds") ||
			pkg == "github.com/meshpilot/meshpilot/internal/demo" {
			t.Errorf("meshpilot links %s, which only meshpilot-demo needs", pkg)
		}
	}
}

// TestNoTemplatesInTheImage: built as the Dockerfile builds it (tag
// grpcnotrace), meshpilot links neither golang.org/x/net/trace nor
// html/template. A template may call any exported method by name, so
// once one can run the linker keeps every exported method of every type
// that reaches an interface: the image's binary grew from 27 to 38 MB.
func TestNoTemplatesInTheImage(t *testing.T) {
	for _, pkg := range deps(t, "-tags", "grpcnotrace") {
		if pkg == "golang.org/x/net/trace" || pkg == "html/template" {
			t.Errorf("built with -tags grpcnotrace, meshpilot links %s", pkg)
		}
	}
}

// deps lists the packages meshpilot links, built with flags.
func deps(t *testing.T, flags ...string) []string {
	t.Helper()
	args := append(append([]string{"list", "-deps"}, flags...), ".")
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
	return strings.Fields(string(out))
}
