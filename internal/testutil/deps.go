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
// prints. It lets a test hold a package to the layering that
// docs/architecture.md describes: conversion without client-go, the file
// registry without the Kubernetes one, the xDS server over translation
// over the model.
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
