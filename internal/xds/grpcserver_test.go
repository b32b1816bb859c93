package xds

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/bootstrap"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
)

// serverBootstrap is the bootstrap `meshpilot bootstrap` writes for a pod
// of namespace ns on ip.
func serverBootstrap(t *testing.T, xdsAddr, ns, pod, ip string) []byte {
	t.Helper()
	b, err := bootstrap.JSON(bootstrap.Options{XDSServer: xdsAddr, Namespace: ns, Pod: pod, IP: ip})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGRPCServers runs real grpc-go xDS servers (gRFC A36) with
// meshpilot's bootstrap. One behind a service becomes SERVING and answers
// a grpc-go xDS client's RPCs; one that no service of its namespace has
// behind its port does not serve (istiod sends it no listener) until a
// service puts it there, and stops when its endpoint goes.
func TestGRPCServers(t *testing.T) {
	st := model.NewStore()
	ts := startServer(t, st)

	t.Run("a server behind a service serves xDS clients", func(t *testing.T) {
		port := grpctest.FreePort(t, "127.0.0.5")
		echo := &model.Service{Hostname: "echo.apps.svc.cluster.local", Name: "echo", Namespace: "apps",
			Ports: []model.Port{{Name: "grpc", Port: 9080, TargetPort: int32(port), Protocol: model.GRPC}}}
		st.Update(echo, endpoints(uint32(port), model.Healthy, "127.0.0.5"))
		srv := grpctest.StartXDSBackend(t, "127.0.0.5", port, serverBootstrap(t, ts.addr, "apps", "echo-1", "127.0.0.5"))
		srv.AwaitServing(t)
		grpctest.AwaitSpread(t, xdsChannel(t, ts.addr, "apps", "xds:///echo:9080"), srv.Backend)
	})

	t.Run("a server behind no service serves once one puts it there", func(t *testing.T) {
		port := grpctest.FreePort(t, "127.0.0.6")
		srv := grpctest.StartXDSBackend(t, "127.0.0.6", port, serverBootstrap(t, ts.addr, "apps", "lone-1", "127.0.0.6"))
		// istiod sends no listener for a port no service of the workload
		// has; grpc-go gives a listener it never had 15 s (its
		// does-not-exist timer), then reports it missing. Meanwhile, and
		// after, it closes every connection it accepts.
		err := srv.AwaitNotServing(t)
		if !strings.Contains(err.Error(), model.InboundListenerName(srv.Addr)) {
			t.Fatalf("not serving for another reason: %v", err)
		}
		if _, err := grpctest.Call(context.Background(), dial(t, srv.Addr)); status.Code(err) != codes.Unavailable {
			t.Fatalf("an RPC to a server that is not serving: %v, want Unavailable", err)
		}

		// A service created after the server asked: it had no key of its
		// own to depend on, its namespace's set of services had.
		lone := &model.Service{Hostname: "lone.apps.svc.cluster.local", Name: "lone", Namespace: "apps",
			Ports: []model.Port{{Name: "grpc", Port: 9090, TargetPort: int32(port), Protocol: model.GRPC}}}
		st.Update(lone, endpoints(uint32(port), model.Healthy, "127.0.0.6"))
		srv.AwaitServing(t)
		grpctest.AwaitSpread(t, xdsChannel(t, ts.addr, "apps", "xds:///lone:9090"), srv.Backend)

		// The endpoint goes: the listener is withdrawn, and grpc-go stops
		// serving at once; it comes back: so does the listener.
		st.Update(lone, nil)
		if err := srv.AwaitNotServing(t); !strings.Contains(err.Error(), "removed") {
			t.Fatalf("not serving for another reason: %v", err)
		}
		st.Update(lone, endpoints(uint32(port), model.Healthy, "127.0.0.6"))
		srv.AwaitServing(t)
	})

	if n := ts.NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs:\n%s", n, ts.logs.String())
	}
	if strings.Contains(ts.logs.String(), "level=ERROR") {
		t.Fatalf("server logged errors:\n%s", ts.logs.String())
	}
}
