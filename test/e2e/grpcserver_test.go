package e2e

import (
	"testing"

	"github.com/meshpilot/meshpilot/internal/bootstrap"
	"github.com/meshpilot/meshpilot/internal/grpctest"
)

// TestGRPCServerFollowsKubernetes: a real grpc-go xDS server (gRFC A36)
// started with `meshpilot bootstrap`'s document, before its Service and
// EndpointSlice exist, becomes SERVING once they put its Pod address
// behind the port it listens on, and answers a grpc-go xDS client.
//
// The server listens on 127.0.0.31 and asks for
// "xds.istio.io/grpc/lds/inbound/127.0.0.31:<port>"; its Pod address, in
// the bootstrap and the slice, is 192.0.2.31 (the API server refuses
// loopback addresses). As in istiod, the workload is found by the
// client's address, the listener's address is the name's.
func TestGRPCServerFollowsKubernetes(t *testing.T) {
	ns := env.Namespace(t, nil)
	mp := startMeshpilot(t, ns)
	port := grpctest.FreePort(t, "127.0.0.31")
	bs, err := bootstrap.JSON(bootstrap.Options{XDSServer: mp.XDSAddr(), Namespace: ns, Pod: "echo-0", IP: "192.0.2.31"})
	if err != nil {
		t.Fatal(err)
	}
	srv := grpctest.StartXDSBackend(t, "127.0.0.31", port, bs)

	createService(t, ns, "echo", 7070)
	writeSlice(t, ns, "echo", []grpctest.Backend{srv.Backend})
	srv.AwaitServing(t)
	cc := grpctest.Channel(t, mp.XDSAddr(), "xds:///echo."+ns+":7070",
		grpctest.ChannelOptions{Namespace: "other", MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, srv.Backend)

	writeSlice(t, ns, "echo", nil)
	if err := srv.AwaitNotServing(t); err == nil {
		t.Fatal("not serving without an error")
	}
	if n := mp.XDS().NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs", n)
	}
}
