package xds

import (
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// TestGRPCOutlierDetection: a real grpc-go client accepts the outlier
// detection gRPC clients get (failure percentage, success rate off, with
// its timing) and keeps spreading RPCs over every healthy endpoint; a
// rule with consecutive errors only gives it none, and no NACK either.
func TestGRPCOutlierDetection(t *testing.T) {
	b2, b3 := grpctest.StartBackend(t, "127.0.0.2", 0), grpctest.StartBackend(t, "127.0.0.3", 0)
	st := model.NewStore()
	svc := service("echo", "default", 9080)
	st.Update(svc, backendEndpoints(nil, b2, b3))
	five, fifty := uint32(5), uint32(50)
	policies := &testPolicies{}
	policies.set(&model.DestinationRule{Namespace: "default", Name: "echo", Host: svc.Hostname,
		Policy: &model.TrafficPolicy{OutlierDetection: &model.OutlierDetection{
			Consecutive5xx: &five, FailurePercentage: &fifty, Interval: time.Second, BaseEjectionTime: 30 * time.Second, MaxEjectionPercent: 50,
		}}})
	ts := startServer(t, st, withPolicies(policies))
	cc := xdsChannel(t, ts.addr, "default", "xds:///echo:9080")
	grpctest.AwaitSpread(t, cc, b2, b3)
	// What it holds: the failure percentage, success rate off.
	name := model.ClusterName(9080, "", svc.Hostname)
	od := (&servedModel{s: ts.Server}).get(t, resource.ClusterType, translate.Client{GRPC: true, Namespace: "default"}, name).(*cluster.Cluster).GetOutlierDetection()
	if od.GetFailurePercentageThreshold().GetValue() != 50 || od.GetEnforcingSuccessRate() == nil || od.GetEnforcingSuccessRate().GetValue() != 0 || od.GetConsecutive_5Xx() != nil {
		t.Fatalf("gRPC client's outlier detection: %v", od)
	}

	changeRule(t, ts, policies, &model.DestinationRule{Namespace: "default", Name: "echo", Host: svc.Hostname,
		Policy: &model.TrafficPolicy{OutlierDetection: &model.OutlierDetection{Consecutive5xx: &five}}})
	grpctest.AwaitSpread(t, cc, b2, b3)
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs:\n%s", n, ts.logs.String())
	}
}
