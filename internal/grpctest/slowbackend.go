package grpctest

import (
	"context"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Slow is a gRPC backend (the health service) that answers every RPC
// after a fixed delay, or when the RPC ends, whichever comes first: a
// client gets an answer only if its deadline is later than the delay.
type Slow struct {
	Backend
	healthpb.UnimplementedHealthServer
	delay time.Duration
}

// StartSlow starts one on ip with a free port; the test stops it.
func StartSlow(t testing.TB, ip string, delay time.Duration) *Slow {
	t.Helper()
	b := &Slow{delay: delay}
	b.Backend = serveHealth(t, ip, 0, b)
	return b
}

// Check answers SERVING after the delay.
func (b *Slow) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	select {
	case <-time.After(b.delay):
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
