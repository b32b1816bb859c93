package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/debug"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// gatewayFolder is a folder's Services and routes: an HTTPRoute whose
// query match gRPC clients never apply, and a GRPCRoute whose backend of
// another namespace, not the Service it attaches to (which needs none), no
// ReferenceGrant allows.
const gatewayFolder = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Namespace
metadata: {name: web}
---
apiVersion: v1
kind: Service
metadata: {name: cart, namespace: shop}
spec:
  ports: [{name: grpc, port: 9080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: cart, namespace: shop}
spec:
  parentRefs: [{group: "", kind: Service, name: cart}]
  rules:
  - matches: [{queryParams: [{name: debug, value: "1"}]}]
    backendRefs: [{name: cart, port: 9080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: cart, namespace: web}
spec:
  parentRefs: [{group: "", kind: Service, name: cart, namespace: shop}]
  rules:
  - backendRefs: [{name: orders, namespace: shop, port: 9080}]
---
apiVersion: v1
kind: Service
metadata: {name: orders, namespace: shop}
spec:
  ports: [{name: grpc, port: 9080}]
`

// TestStatusConfigGatewayRoutes runs meshpilot serve --from a folder of
// Gateway API routes: each is on /debug/configz and in status config,
// with what gRPC clients (and Envoy) do not get of it and where it was
// read; a ReferenceGrant added to the folder makes the GRPCRoute whole.
func TestStatusConfigGatewayRoutes(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "mesh.yaml")
	if err := os.WriteFile(manifest, []byte(gatewayFolder), 0o644); err != nil {
		t.Fatal(err)
	}
	httpAddr := closedPort(t)
	p := start(t, nil, "serve", "--from", dir, "--xds-addr", "127.0.0.1:0", "--http-addr", httpAddr)
	server := "http://" + httpAddr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := func(states ...string) {
		t.Helper()
		testenv.Eventually(t, "the routes on /debug/configz", func() (bool, string) {
			var z debug.Configz
			if err := getJSON(ctx, statusFlags{server: server, timeout: 5 * time.Second}, "/debug/configz", &z); err != nil {
				return false, err.Error()
			}
			var got []string
			for _, o := range z.Objects {
				got = append(got, fmt.Sprintf("%s %s/%s %s", o.Kind, o.Namespace, o.Name, o.State))
			}
			return slices.Equal(got, states), fmt.Sprintf("%q", got)
		})
	}
	want("GRPCRoute web/cart "+configstatus.StatePartial, "HTTPRoute shop/cart "+configstatus.StatePartial)
	out, code := runStatus(t, "--server", server, "config")
	for _, line := range []string{
		"(HTTPRoute shop/cart " + manifest + ":15 (document 4)) spec.rules[0].matches[0].queryParams: ",
		"(GRPCRoute web/cart " + manifest + ":24 (document 5)) spec.rules[0].backendRefs[0]: no ReferenceGrant of namespace shop allows it",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("status config: exit %d, no %q in:\n%s", code, line, out)
		}
	}

	grant := `---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: web-routes, namespace: shop}
spec:
  from: [{group: gateway.networking.k8s.io, kind: GRPCRoute, namespace: web}]
  to: [{group: "", kind: Service, name: orders}]
`
	if err := os.WriteFile(manifest, []byte(gatewayFolder+grant), 0o644); err != nil {
		t.Fatal(err)
	}
	want("GRPCRoute web/cart "+configstatus.StateApplied, "HTTPRoute shop/cart "+configstatus.StatePartial)
	p.interrupt()
}
