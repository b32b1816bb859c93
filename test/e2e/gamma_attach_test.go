package e2e

import (
	"testing"

	"github.com/meshpilot/meshpilot/internal/gwstatus"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The scenarios of this file tell whether a route applied by a response
// header it sets (ResponseHeaderModifier). grpc-go does not apply header
// changes and meshpilot does not send them to gRPC clients, so for a gRPC
// client each checks where the RPCs go, and the header on the route
// configuration an Envoy of the client's namespace receives.

// TestGAMMAMeshConsumerRoute: a route of the consumer namespace on
// echo-v1 of the mesh namespace applies to the consumer namespace's
// clients alone.
func TestGAMMAMeshConsumerRoute(t *testing.T) {
	g := startGAMMA(t)
	g.apply(t, "mesh-consumer-route.yaml")
	g.awaitReported(t, gwstatus.KindHTTPRoute, g.consumer, "mesh-echo-add-header", "spec.rules[0].filters[0]")
	// Its backend is the Service it attaches to: no ReferenceGrant needed.
	g.awaitCondition(t, g.consumer, "mesh-echo-add-header", "ResolvedRefs", "True/ResolvedRefs")
	name := g.routeName("echo-v1", 80)
	g.awaitEnvoyRoutes(t, g.envoy(t, g.consumer), name, "the consumer route's header", setsHeader("X-Header-Set", "set"))
	g.awaitEnvoyRoutes(t, g.envoy(t, g.mesh), name, "no header for the producer namespace", setsNoHeader("X-Header-Set"))
	g.awaitBackend(t, g.channel(t, g.consumer, "echo-v1."+g.mesh, 80), "echo-v1", "/")
	g.awaitBackend(t, g.channel(t, g.mesh, "echo-v1."+g.mesh, 80), "echo-v1", "/")
}

// TestGAMMAMeshPorts: parentRefs.port limits a route to that port of the
// Service; without it the route takes every port.
func TestGAMMAMeshPorts(t *testing.T) {
	g := startGAMMA(t)
	g.apply(t, "mesh-ports.yaml")
	g.awaitReported(t, gwstatus.KindHTTPRoute, g.mesh, "mesh-split-v1", "spec.rules[0].filters[0]")
	g.awaitReported(t, gwstatus.KindHTTPRoute, g.mesh, "mesh-split-v2", "spec.rules[0].filters[0]")
	envoy := g.envoy(t, g.mesh)
	g.awaitEnvoyRoutes(t, envoy, g.routeName("echo-v1", 80), "echo-v1:80 set v1", setsHeader("X-Header-Set", "v1"))
	g.awaitEnvoyRoutes(t, envoy, g.routeName("echo-v1", 8080), "echo-v1:8080 untouched", setsNoHeader("X-Header-Set"))
	g.awaitEnvoyRoutes(t, envoy, g.routeName("echo-v2", 80), "echo-v2:80 set v2", setsHeader("X-Header-Set", "v2"))
	g.awaitEnvoyRoutes(t, envoy, g.routeName("echo-v2", 8080), "echo-v2:8080 set v2", setsHeader("X-Header-Set", "v2"))
	for _, c := range []struct {
		host, backend string
		port          int
	}{{"echo-v1", "echo-v1", 80}, {"echo-v1", "echo-v1", 8080}, {"echo-v2", "echo-v2", 80}, {"echo-v2", "echo-v2", 8080}} {
		g.awaitBackend(t, g.channel(t, g.mesh, c.host, c.port), c.backend, "/")
	}
}

// TestGAMMAMeshFrontend: a route on echo-v2 applies to the traffic to the
// Service, not to the traffic to its Pod's address.
func TestGAMMAMeshFrontend(t *testing.T) {
	g := startGAMMA(t)
	g.apply(t, "mesh-frontend.yaml")
	rc := g.awaitEnvoyRoutes(t, g.envoy(t, g.mesh), g.routeName("echo-v2", 80), "echo-v2:80 set", setsHeader("X-Header-Set", "set"))
	pod := docAddr(g.v2.Backend)
	for _, vh := range rc.GetVirtualHosts() {
		for _, d := range vh.GetDomains() {
			if d == pod || d == pod+":8080" {
				t.Errorf("echo-v2's route configuration takes the Pod's address %s", d)
			}
		}
	}
	g.awaitBackend(t, g.channel(t, g.mesh, "echo-v2", 80), "echo-v2", "/")
	// The Pod's address is no Service: a client dials it directly, as
	// the suite's client does, and no route of meshpilot's is in the way.
	direct, err := grpc.NewClient(g.v2.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	if r := g.call(direct, "/"); r.err != nil || r.backend != "echo-v2" {
		t.Errorf("a call to the Pod's address went to %q (%v), want echo-v2", r.backend, r.err)
	}
}

// TestGAMMAMeshFrontendHostname: the route follows the Service called,
// not the Host (for gRPC, :authority) the request carries.
func TestGAMMAMeshFrontendHostname(t *testing.T) {
	g := startGAMMA(t)
	g.apply(t, "mesh-frontend.yaml")
	envoy := g.envoy(t, g.mesh)
	g.awaitEnvoyRoutes(t, envoy, g.routeName("echo-v2", 80), "echo-v2:80 set", setsHeader("X-Header-Set", "set"))
	g.awaitEnvoyRoutes(t, envoy, g.routeName("echo-v1", 80), "echo-v1:80 untouched", setsNoHeader("X-Header-Set"))
	toV2, toV1 := g.channel(t, g.mesh, "echo-v2", 80), g.channel(t, g.mesh, "echo-v1", 80)
	g.awaitBackend(t, toV2, "echo-v2", "/")
	g.awaitBackend(t, toV1, "echo-v1", "/")
	// grpc-go picks the route of the channel's target; an :authority of
	// the other Service changes nothing.
	for _, c := range []struct {
		cc                 *grpc.ClientConn
		authority, backend string
	}{{toV2, "echo-v1", "echo-v2"}, {toV1, "echo-v2", "echo-v1"}} {
		for range 10 {
			r := g.callWith(c.cc, "/", []grpc.CallOption{grpc.CallAuthority(c.authority)})
			if r.err != nil || r.backend != c.backend {
				t.Fatalf("a call with :authority %s went to %q (%v), want %s", c.authority, r.backend, r.err, c.backend)
			}
			if got := r.req.md.Get(":authority"); len(got) != 1 || got[0] != c.authority {
				t.Fatalf("the echo saw :authority %q, want %s", got, c.authority)
			}
		}
	}
}
