package translate

import (
	"fmt"
	"sync/atomic"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate/translatetest"
)

var (
	service   = translatetest.Service
	endpoints = translatetest.Endpoints
)

func itoa(i int) string { return fmt.Sprint(i) }

// testMesh is mesh settings a test changes.
type testMesh = translatetest.Mesh

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
