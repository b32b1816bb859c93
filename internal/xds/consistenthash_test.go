package xds

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
)

// TestGRPCRingHash: a real grpc-go client accepts the ring hash cluster
// and header hash policy of a rule with consistentHash.httpHeaderName,
// and keeps every RPC with one value of the header on one backend, while
// different values spread over the backends.
func TestGRPCRingHash(t *testing.T) {
	backends := grpctest.StartBackends(t, "127.0.0.2", "127.0.0.3", "127.0.0.4")
	st := model.NewStore()
	svc := service("echo", "default", 9080)
	st.Update(svc, backendEndpoints(nil, backends...))
	policies := &testPolicies{}
	policies.set(&model.DestinationRule{Namespace: "default", Name: "echo", Host: svc.Hostname,
		Policy: &model.TrafficPolicy{ConsistentHash: &model.ConsistentHash{HeaderName: "x-user", MinimumRingSize: 1024}}})
	ts := startServer(t, st, withPolicies(policies))
	cc := xdsChannel(t, ts.addr, "default", "xds:///echo:9080")

	const users, perUser = 30, 20
	servedBy := map[string]string{} // user -> the backend that served it
	for u := range users {
		user := fmt.Sprintf("user-%d", u)
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user", user)
		for range perUser {
			addr, err := grpctest.Call(ctx, cc)
			if err != nil {
				t.Fatalf("%s: %v", user, err)
			}
			if prev, ok := servedBy[user]; ok && prev != addr {
				t.Fatalf("%s was served by %s and by %s", user, prev, addr)
			}
			servedBy[user] = addr
		}
	}
	// Each of 30 users lands on one of 3 backends by its hash: all on
	// one backend would be about one chance in 10^14.
	distinct := map[string]bool{}
	for _, addr := range servedBy {
		distinct[addr] = true
	}
	if len(distinct) < 2 {
		t.Errorf("%d users all reached %v: the header is not hashed", users, distinct)
	}
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs:\n%s", n, ts.logs.String())
	}
}
