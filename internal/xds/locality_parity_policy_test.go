package xds

import (
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
)

// TestGRPCRuleLocalityLB: a real grpc-go client in region r1 follows its
// DestinationRule's localityLbSetting over the mesh's, as istiod's gRPC
// clients do (their endpoint assignments are a sidecar's): with the mesh's
// off and the rule's on (with outlier detection, which failover needs),
// every RPC goes to the backend of r1; the rule's enabled: false spreads
// RPCs over both regions although the mesh's is now on.
func TestGRPCRuleLocalityLB(t *testing.T) {
	near, far := grpctest.StartBackend(t, "127.0.0.2", 0), grpctest.StartBackend(t, "127.0.0.3", 0)
	st := model.NewStore()
	svc := service("echo", "default", 9080)
	st.Update(svc, []*model.Endpoint{
		{Address: near.IP, Port: near.Port, ServicePortName: "grpc", Locality: model.Locality{Region: "r1", Zone: "z"}},
		{Address: far.IP, Port: far.Port, ServicePortName: "grpc", Locality: model.Locality{Region: "r2", Zone: "z"}},
	})
	mesh := &testMesh{}
	off := model.DefaultMeshSettings()
	off.LocalityLB = &model.LocalityLB{Disabled: true}
	mesh.Set(off)
	rule := func(lb *model.LocalityLB) *model.DestinationRule {
		return &model.DestinationRule{Namespace: "default", Name: "echo", Host: svc.Hostname, Policy: &model.TrafficPolicy{
			LocalityLB: lb, OutlierDetection: &model.OutlierDetection{FailurePercentage: new(uint32), Interval: time.Second}}}
	}
	policies := &testPolicies{}
	policies.set(rule(&model.LocalityLB{}))
	ts := startServer(t, st, withPolicies(policies), withMesh(mesh))

	cc := grpctest.Channel(t, ts.addr, "xds:///echo:9080", grpctest.ChannelOptions{Namespace: "default", Region: "r1", Zone: "z"})
	grpctest.AwaitSpread(t, cc, near)
	if got := grpctest.CountRPCs(t, cc, 50); got[near.Addr] != 50 {
		t.Fatalf("RPCs by backend %v, want all 50 in r1", got)
	}

	mesh.Set(model.DefaultMeshSettings())
	ts.Push(pushOf(model.Event{Kind: model.ConfigChanged, Config: model.MeshLocalityLBKey}))
	policies.set(rule(&model.LocalityLB{Disabled: true}))
	ts.Push(pushOf(ruleChanged(svc.Hostname)))
	grpctest.AwaitSpread(t, cc, near, far)
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs:\n%s", n, ts.logs.String())
	}
}
