package translate

import (
	"fmt"
	"sync/atomic"

	"github.com/meshpilot/meshpilot/internal/model"
)

// service makes a service in namespace ns with one gRPC port.
func service(name, ns string, port int32) *model.Service {
	return &model.Service{
		Hostname:  model.ServiceHostname(name, ns, ""),
		Name:      name,
		Namespace: ns,
		Ports:     []model.Port{{Name: "grpc", Port: port, Protocol: model.GRPC}},
	}
}

func endpoints(port uint32, health model.Health, addrs ...string) []*model.Endpoint {
	var out []*model.Endpoint
	for _, a := range addrs {
		out = append(out, &model.Endpoint{Address: a, Port: port, ServicePortName: "grpc", Health: health})
	}
	return out
}

func itoa(i int) string { return fmt.Sprint(i) }

// testMesh is mesh settings a test changes.
type testMesh struct {
	p atomic.Pointer[model.MeshSettings]
}

func (m *testMesh) Mesh() *model.MeshSettings { return m.p.Load() }

// testPolicies is a PolicyIndex a test replaces.
type testPolicies struct {
	p atomic.Pointer[model.StaticPolicies]
}

func (t *testPolicies) set(rules ...*model.DestinationRule) {
	t.p.Store(model.NewStaticPolicies("istio-system", rules))
}

func (t *testPolicies) AppendDestinationRuleKeys(deps []model.ConfigKey, h model.Hostname) []model.ConfigKey {
	return t.p.Load().AppendDestinationRuleKeys(deps, h)
}

func (t *testPolicies) DestinationRuleFor(h model.Hostname, svcNS, clientNS string) (*model.DestinationRule, bool) {
	return t.p.Load().DestinationRuleFor(h, svcNS, clientNS)
}

// testRoutes is a RouteIndex a test replaces.
type testRoutes struct {
	r atomic.Pointer[model.StaticRoutes]
}

func (t *testRoutes) set(vss ...*model.VirtualService) { t.r.Store(model.NewStaticRoutes(vss)) }

func (t *testRoutes) VirtualServiceFor(h model.Hostname, clientNS string) (*model.VirtualService, bool) {
	return t.r.Load().VirtualServiceFor(h, clientNS)
}
