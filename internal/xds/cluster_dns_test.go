package xds

import (
	"fmt"
	"testing"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
)

// TestGRPCResolvesALogicalDNSCluster: a real grpc-go client reaches the
// backend behind a LOGICAL_DNS cluster by resolving its name itself
// ("localhost" is 127.0.0.1 in /etc/hosts): the cluster of an ExternalName
// Service and of a DNS ServiceEntry without endpoints, whose external
// name is its own host.
func TestGRPCResolvesALogicalDNSCluster(t *testing.T) {
	b := grpctest.StartBackend(t, "127.0.0.1", 0)
	st := model.NewStore()
	st.Update(&model.Service{Hostname: "search.example.com", Name: "search.example.com", Namespace: "ext",
		Resolution: model.DNSAlias, ExternalName: "localhost",
		Ports: []model.Port{{Name: "grpc", Port: int32(b.Port), Protocol: model.GRPC}}}, nil)
	ts := startServer(t, st)
	grpctest.AwaitSpread(t, xdsChannel(t, ts.addr, "client", fmt.Sprintf("xds:///search.example.com:%d", b.Port)), b)
}
