package testutil

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// Deps lists the packages that pkg (a pattern `go list` takes, relative to
// the test's package folder: "." for the package under test) imports,
// directly or not, the standard library included: what `go list -deps`
// prints. It lets a test hold a package to the layering of DESIGN.md.
func Deps(t testing.TB, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, exit.Stderr)
		}
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}
