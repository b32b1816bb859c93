package kubeconv_test

import (
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/testutil"
)

// TestNoClientGo: conversion reads objects it is given. Registries that
// never watch a cluster (files, tests) share it, so it must not bring in
// client-go's informers, listers or caches.
func TestNoClientGo(t *testing.T) {
	for _, dep := range testutil.Deps(t, ".") {
		if dep == "k8s.io/client-go" || strings.HasPrefix(dep, "k8s.io/client-go/") {
			t.Errorf("kubeconv imports %s", dep)
		}
	}
}
