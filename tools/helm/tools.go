//go:build tools

// Package tools pins the command this module builds: Helm's own main
// package, built as its Makefile builds it (see build.sh), so that the
// tests run the helm that operators run.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
