package xds

import (
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
)

func backendEndpoints(health map[string]model.Health, bs ...grpctest.Backend) []*model.Endpoint {
	var out []*model.Endpoint
	for _, b := range bs {
		out = append(out, &model.Endpoint{
			Address: b.IP, Port: b.Port, ServicePortName: "grpc", Health: health[b.IP],
			Locality: model.Locality{Region: "r1", Zone: "z" + b.IP[len(b.IP)-1:]},
		})
	}
	return out
}

func xdsChannel(t *testing.T, serverAddr, ns, target string) *grpc.ClientConn {
	return grpctest.Channel(t, serverAddr, target, grpctest.ChannelOptions{Namespace: ns})
}

// TestGRPCClients runs real grpc-go xDS clients against the server and
// real gRPC backends on 127.0.0.2-4.
func TestGRPCClients(t *testing.T) {
	b2, b3, b4 := grpctest.StartBackend(t, "127.0.0.2", 0), grpctest.StartBackend(t, "127.0.0.3", 0), grpctest.StartBackend(t, "127.0.0.4", 0)
	st := model.NewStore()
	svc := service("echo", "default", 9080)
	st.Update(svc, backendEndpoints(nil, b2, b3, b4))
	ts := startServer(t, st)

	cc := xdsChannel(t, ts.addr, "default", "xds:///echo:9080")
	t.Run("spread over all healthy endpoints", func(t *testing.T) {
		grpctest.AwaitSpread(t, cc, b2, b3, b4)
	})
	t.Run("unhealthy and draining endpoints get no RPCs", func(t *testing.T) {
		st.Update(svc, backendEndpoints(map[string]model.Health{"127.0.0.3": model.Unhealthy}, b2, b3, b4))
		grpctest.AwaitSpread(t, cc, b2, b4)
		st.Update(svc, backendEndpoints(map[string]model.Health{"127.0.0.2": model.Draining}, b2, b3, b4))
		grpctest.AwaitSpread(t, cc, b3, b4)
	})
	t.Run("scale to zero gives Unavailable, scaling back recovers", func(t *testing.T) {
		st.Update(svc, nil)
		grpctest.AwaitUnavailable(t, cc)
		st.Update(svc, backendEndpoints(nil, b4))
		grpctest.AwaitSpread(t, cc, b4)
		st.Update(svc, backendEndpoints(nil, b2, b3, b4))
		grpctest.AwaitSpread(t, cc, b2, b3, b4)
	})
	t.Run("short and long names", func(t *testing.T) {
		for _, target := range []string{"xds:///echo.default:9080", "xds:///echo.default.svc:9080", "xds:///echo.default.svc.cluster.local:9080"} {
			grpctest.AwaitSpread(t, xdsChannel(t, ts.addr, "default", target), b2, b3, b4)
		}
		// From another namespace, name.namespace works. (That the bare
		// name does not is in the golden files: grpc-go only reports a
		// listener it never had as missing after a 15 s timer.)
		grpctest.AwaitSpread(t, xdsChannel(t, ts.addr, "other", "xds:///echo.default:9080"), b2, b3, b4)
	})
	t.Run("a new service appears to a new channel", func(t *testing.T) {
		st.Update(service("fresh", "apps", 7070), backendEndpoints(nil, b3))
		grpctest.AwaitSpread(t, xdsChannel(t, ts.addr, "apps", "xds:///fresh:7070"), b3)
	})
	t.Run("a deleted service disappears", func(t *testing.T) {
		st.Delete(svc.Hostname)
		grpctest.AwaitUnavailable(t, cc)
	})
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs:\n%s", n, ts.logs.String())
	}
	if strings.Contains(ts.logs.String(), "level=ERROR") {
		t.Fatalf("server logged errors:\n%s", ts.logs.String())
	}
}
