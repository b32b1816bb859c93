//go:build tools

// Package tools pins pilot-discovery's module for build.sh.
package tools

import _ "istio.io/istio/pilot/cmd/pilot-discovery"
