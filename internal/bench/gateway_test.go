package bench

import (
	"slices"
	"strings"
	"testing"
)

// TestSmallRunWithGatewayRoutes runs the benchmark with an HTTPRoute
// attached to every service, splitting its traffic with another service
// of its namespace: clients converge on both clusters, and every route
// weight change reaches every subscribed client.
func TestSmallRunWithGatewayRoutes(t *testing.T) {
	cfg := smallConfig(4, "gamma")
	cfg.GatewayRoutes = true
	res, log := runSmall(t, cfg)
	// 2 namespaces + 3 nodes + 4 services + 8 pods (create and status) +
	// 4 slices + an HTTPRoute per service.
	if want := int64(2 + 3 + 4 + 2*8 + 4 + 4); res.Setup.Writes != want {
		t.Errorf("setup writes = %d, want %d", res.Setup.Writes, want)
	}
	rc := res.RouteChurn
	if rc == nil {
		t.Fatalf("no route churn result\n%s", log)
	}
	if rc.Changes != 3 || rc.Misses != 0 || rc.Pairs < 3 || rc.Pairs > 9 {
		t.Errorf("route churn: %+v, want 3 changes, 3 to 9 pairs, no misses", *rc)
	}
	for _, ch := range rc.PerChange {
		if !strings.Contains(ch.Address, "outbound|7070||") || !strings.Contains(ch.Address, "#") {
			t.Errorf("route change record %+v does not name a route and its weights", ch)
		}
	}
	var phases []string
	for _, p := range res.Phases {
		phases = append(phases, p.Name)
	}
	if want := []string{"sync", "converged", "settled", "churn", "route-churn"}; !slices.Equal(phases, want) {
		t.Errorf("phases %v, want %v", phases, want)
	}
}

// TestGatewayRoutesNeedPartners: a route splits a service's traffic with
// another service of its namespace, so there must be two per namespace;
// and it would route the hosts VirtualServices route.
func TestGatewayRoutesNeedPartners(t *testing.T) {
	cfg := smallConfig(2, "gamma")
	cfg.GatewayRoutes = true
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "twice the namespaces") {
		t.Errorf("2 services over 2 namespaces: %v, want a refusal", err)
	}
	cfg = smallConfig(4, "gamma")
	cfg.GatewayRoutes, cfg.TrafficRules = true, true
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "choose one") {
		t.Errorf("with traffic rules: %v, want a refusal", err)
	}
	cfg.TrafficRules = false
	w := newWorkload(nil, &cfg)
	for _, svc := range w.services {
		if p := w.partner(svc); p == svc || p.ns != svc.ns {
			t.Errorf("partner of %s is %s/%s", svc.hostname, p.ns, p.name)
		}
	}
}
