package xds

import (
	"testing"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
)

// workloadsByIP is a fixed WorkloadLookup: the registries' own (Pods by
// IP) are tested with them.
type workloadsByIP map[string]*model.Workload

func (w workloadsByIP) WorkloadByIP(ip string) *model.Workload { return w[ip] }

// TestGRPCClientsPerZoneAndNode: real grpc-go clients in two zones get the
// endpoints a service's trafficDistribution and internalTrafficPolicy
// give them: their own zone first, failing over when it has nothing
// HEALTHY; only their node's with Local. A client whose bootstrap says
// nothing of its node or zone is placed by the workload behind its
// address.
func TestGRPCClientsPerZoneAndNode(t *testing.T) {
	a1, a2 := grpctest.StartBackend(t, "127.0.0.2", 0), grpctest.StartBackend(t, "127.0.0.3", 0)
	b1 := grpctest.StartBackend(t, "127.0.0.4", 0)
	nodeOf := map[string]string{a1.IP: "node-a1", a2.IP: "node-a2", b1.IP: "node-b1"}
	zoneOf := map[string]string{a1.IP: "a", a2.IP: "a", b1.IP: "b"}
	eps := func(unhealthy ...string) []*model.Endpoint {
		var out []*model.Endpoint
		for _, b := range []grpctest.Backend{a1, a2, b1} {
			h := model.Healthy
			for _, u := range unhealthy {
				if u == b.IP {
					h = model.Unhealthy
				}
			}
			out = append(out, &model.Endpoint{Address: b.IP, Port: b.Port, ServicePortName: "grpc", Health: h,
				NodeName: nodeOf[b.IP], Locality: model.Locality{Region: "r", Zone: zoneOf[b.IP]}})
		}
		return out
	}
	st := model.NewStore()
	svc := service("echo", "default", 9080)
	svc.TrafficDistribution = model.PreferSameZone
	st.Update(svc, eps())
	// 10.9.9.9 is a client pod on node-b1 whose bootstrap has no locality.
	ts := startServer(t, st, func(o *Options) {
		o.Workloads = workloadsByIP{"10.9.9.9": {Name: "client", Namespace: "default", NodeName: "node-b1",
			Locality: model.Locality{Region: "r", Zone: "b"}}}
	})
	const target = "xds:///echo:9080"
	inA := grpctest.Channel(t, ts.addr, target, grpctest.ChannelOptions{Region: "r", Zone: "a", NodeName: "node-a1"})
	inB := grpctest.Channel(t, ts.addr, target, grpctest.ChannelOptions{Region: "r", Zone: "b", NodeName: "node-b1"})
	byPod := grpctest.Channel(t, ts.addr, target, grpctest.ChannelOptions{IP: "10.9.9.9"})

	t.Run("PreferSameZone: each zone its own", func(t *testing.T) {
		grpctest.AwaitSpread(t, inA, a1, a2)
		grpctest.AwaitSpread(t, inB, b1)
		grpctest.AwaitSpread(t, byPod, b1)
	})
	t.Run("PreferSameZone: failover when the zone has nothing healthy", func(t *testing.T) {
		st.Update(svc, eps(b1.IP))
		grpctest.AwaitSpread(t, inB, a1, a2)
		grpctest.AwaitSpread(t, inA, a1, a2)
		st.Update(svc, eps())
		grpctest.AwaitSpread(t, inB, b1)
	})
	t.Run("internalTrafficPolicy Local: the client's node only", func(t *testing.T) {
		local := *svc
		local.TrafficDistribution, local.InternalTrafficPolicy = model.TrafficDistributionAny, model.InternalTrafficLocal
		st.Update(&local, eps())
		grpctest.AwaitSpread(t, inA, a1)
		grpctest.AwaitSpread(t, inB, b1)
		grpctest.AwaitSpread(t, byPod, b1)
		// The node's only endpoint gone: nothing, not another node's.
		st.Update(&local, eps(a1.IP))
		grpctest.AwaitUnavailable(t, inA)
	})
	t.Run("no preference: everyone everything", func(t *testing.T) {
		plain := *svc
		plain.TrafficDistribution = model.TrafficDistributionAny
		st.Update(&plain, eps())
		grpctest.AwaitSpread(t, inA, a1, a2, b1)
		grpctest.AwaitSpread(t, inB, a1, a2, b1)
	})
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs:\n%s", n, ts.logs.String())
	}
}
