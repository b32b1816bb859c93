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
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "google.golang.org/grpc/xds") || strings.HasPrefix(pkg, "google.golang.org/grpc/internal/xds") ||
			pkg == "github.com/meshpilot/meshpilot/internal/demo" {
			t.Errorf("meshpilot links %s, which only meshpilot-demo needs", pkg)
		}
	}
}
