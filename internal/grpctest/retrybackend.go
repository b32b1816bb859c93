package grpctest

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// previousAttempts is the header a grpc-go client adds to every retry of
// an RPC (gRFC A6), with the number of attempts before it.
const previousAttempts = "grpc-previous-rpc-attempts"

// FirstAttemptFails is a gRPC backend (the health service) that fails the
// first attempt of every RPC with UNAVAILABLE and serves its retries:
// a client gets a success only if its retry policy retries UNAVAILABLE.
type FirstAttemptFails struct {
	Backend
	healthpb.UnimplementedHealthServer
	failed, served atomic.Int64
}

// StartFirstAttemptFails starts one on ip with a free port; the test
// stops it.
func StartFirstAttemptFails(t testing.TB, ip string) *FirstAttemptFails {
	t.Helper()
	b := &FirstAttemptFails{}
	b.Backend = serveHealth(t, ip, 0, b)
	return b
}

// Check fails with UNAVAILABLE unless the call is a retry.
func (b *FirstAttemptFails) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(previousAttempts)) == 0 {
		b.failed.Add(1)
		return nil, status.Error(codes.Unavailable, "first attempt fails")
	}
	b.served.Add(1)
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// Counts returns how many first attempts failed and how many retries
// were served.
func (b *FirstAttemptFails) Counts() (failed, served int64) {
	return b.failed.Load(), b.served.Load()
}
