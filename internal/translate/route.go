package translate

import (
	"slices"
	"strconv"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// routeGenerator builds the route configuration "outbound|<port>||<FQDN>":
// one virtual host whose domains are the forms a client may use for the
// service, with the routes of the VirtualService the client follows
// (route_vs.go), or else one routing "/" to the cluster of the same name
// with istiod's default retry policy, or the mesh settings'
// (DefaultHTTPRetry), no timeout, and the hash policy of the host's
// DestinationRule (hashPolicy).
type routeGenerator struct{ GeneratorOptions }

func (*routeGenerator) Type() ResourceType {
	return ResourceType{URL: resource.RouteType, Short: "RDS", Wildcard: true}
}

func (g *routeGenerator) AllNames() []string { return clusterNames(g.Discovery, false) }

func (g *routeGenerator) Generate(c *Client, name string) Result {
	svc, port, deps, seen := servicePort(g.Discovery, c, name)
	if svc == nil {
		return Result{Deps: deps, Vary: seen}
	}
	deps = append(deps, model.MeshRetryKey)
	vs, deps, vary := g.virtualService(c, svc, deps)
	vary |= seen
	var routes []*route.Route
	if vs != nil {
		var v Vary
		routes, deps, v = g.vsRoutes(c, svc, port, vs, deps)
		vary |= v
	}
	if len(routes) == 0 {
		rule, ruleDeps, ruleVary := g.ruleFor(c, svc, deps)
		deps = ruleDeps
		hash, hashVary := hashPolicy(rule.HashFor(port, ""), c)
		vary |= ruleVary | hashVary
		a := &route.RouteAction{
			ClusterSpecifier: &route.RouteAction_Cluster{Cluster: name},
			RetryPolicy:      retryPolicy(g.MeshSettings().DefaultHTTPRetry),
			HashPolicy:       hash,
		}
		// No timeout, said explicitly: without one Envoy cuts every
		// request at 15 s, long-lived streams included. istiod sends the
		// same default route to gRPC clients (which read neither field).
		setTimeout(a, 0, false)
		routes = []*route.Route{{
			Match:  &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
			Action: &route.Route_Route{Route: a},
		}}
	}
	return Result{Deps: deps, Vary: vary, Resource: &route.RouteConfiguration{
		Name: name,
		VirtualHosts: []*route.VirtualHost{{
			Name:    string(svc.Hostname) + ":" + strconv.Itoa(int(port)),
			Domains: model.VirtualHostDomains(svc, g.suffix(), port),
			Routes:  routes,
		}},
		ValidateClusters: wrapperspb.Bool(false),
	}}
}

// servicePort finds the service port a route configuration's name
// designates, if the client may see the service (visibleService, whose
// Vary it returns). What is built from it depends on the service's
// definition.
func servicePort(d model.ServiceDiscovery, c *Client, name string) (*model.Service, int32, []model.ConfigKey, Vary) {
	host, port, ok := serviceCluster(name)
	if !ok {
		return nil, 0, nil, 0
	}
	// Room for two more keys (the route's model.MeshRetryKey and
	// model.DestinationRuleKey) in the same allocation.
	deps := append(make([]model.ConfigKey, 0, 3), model.ServiceKey(host))
	svc, vary := visibleService(d, c, host)
	if svc == nil {
		return nil, 0, deps, vary
	}
	if _, ok := svc.PortByNumber(port); !ok {
		return nil, 0, deps, vary
	}
	return svc, port, deps, vary
}

// clusterNames lists the cluster-style name of every service port, in
// order: what a wildcard CDS, RDS or (without DNS aliases, which have no
// endpoints) EDS subscription gets.
func clusterNames(d model.ServiceDiscovery, withoutDNSAliases bool) []string {
	var out []string
	for _, svc := range d.Services() {
		if len(svc.Others) > 0 {
			out = append(out, definitionsClusterNames(svc, withoutDNSAliases)...)
			continue
		}
		if withoutDNSAliases && svc.Resolution == model.DNSAlias {
			continue
		}
		for _, p := range svc.PortsByNumber() {
			out = append(out, model.ClusterName(p.Port, "", svc.Hostname))
		}
	}
	return out
}

// definitionsClusterNames lists the cluster names of every port of a
// host that several namespaces define: the list is the same for every
// client, and a name whose port the client's definition lacks is
// answered with nothing.
func definitionsClusterNames(svc *model.Service, withoutDNSAliases bool) []string {
	var ports []int32
	for _, def := range append([]*model.Service{svc}, svc.Others...) {
		if withoutDNSAliases && def.Resolution == model.DNSAlias {
			continue
		}
		for _, p := range def.PortsByNumber() {
			ports = append(ports, p.Port)
		}
	}
	slices.Sort(ports)
	out := make([]string, 0, len(ports))
	for _, p := range slices.Compact(ports) {
		out = append(out, model.ClusterName(p, "", svc.Hostname))
	}
	return out
}
