package xds

import (
	"context"
	"testing"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
)

// TestGRPCDefaultRetry: with istiod's default retry policy on the route,
// a real grpc-go client retries a server's UNAVAILABLE, so every RPC to a
// backend that fails each first attempt succeeds on its retry.
func TestGRPCDefaultRetry(t *testing.T) {
	b := grpctest.StartFirstAttemptFails(t, "127.0.0.2")
	st := model.NewStore()
	st.Update(service("flaky", "default", 9080), backendEndpoints(nil, b.Backend))
	ts := startServer(t, st)
	cc := xdsChannel(t, ts.addr, "default", "xds:///flaky:9080")

	const rpcs = 5
	for i := range rpcs {
		if _, err := grpctest.Call(context.Background(), cc); err != nil {
			t.Fatalf("RPC %d: %v", i, err)
		}
	}
	if failed, served := b.Counts(); failed != rpcs || served != rpcs {
		t.Errorf("backend failed %d first attempts and served %d retries, want %d and %d", failed, served, rpcs, rpcs)
	}
}
