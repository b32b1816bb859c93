package translate

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestEndpointsPerClient: internalTrafficPolicy and trafficDistribution
// make a ClusterLoadAssignment depend on where the client runs.
func TestEndpointsPerClient(t *testing.T) {
	// Two zones, two nodes in zone a: a1 (10.0.0.1, 10.0.0.2), a2
	// (10.0.0.3); node b1 (10.0.1.1) in zone b, whose endpoint is
	// draining in some cases.
	type ep struct {
		addr, node, zone string
		health           model.Health
	}
	all := []ep{
		{"10.0.0.1", "a1", "a", model.Healthy},
		{"10.0.0.2", "a1", "a", model.Healthy},
		{"10.0.0.3", "a2", "a", model.Healthy},
		{"10.0.1.1", "b1", "b", model.Healthy},
	}
	client := func(node, zone string) Client {
		c := Client{Namespace: "default", GRPC: true, NodeName: node}
		if zone != "" {
			c.Locality = model.Locality{Region: "r", Zone: zone}
		}
		return c
	}
	for _, tc := range []struct {
		desc   string
		policy model.InternalTrafficPolicy
		dist   model.TrafficDistribution
		eps    []ep
		client Client
		want   string // "priority:zone:addr,addr;..." in order
	}{
		{"no preference", 0, 0, all, client("a1", "a"),
			"0:a:10.0.0.1,10.0.0.2,10.0.0.3;0:b:10.0.1.1"},
		{"Local: the client's node only", model.InternalTrafficLocal, 0, all, client("a1", "a"),
			"0:a:10.0.0.1,10.0.0.2"},
		{"Local: a node without endpoints gets none", model.InternalTrafficLocal, 0, all, client("c9", "a"), ""},
		{"Local: an unknown node gets none", model.InternalTrafficLocal, 0, all, client("", "a"), ""},
		{"PreferSameZone: own zone first", 0, model.PreferSameZone, all, client("b1", "b"),
			"0:b:10.0.1.1;1:a:10.0.0.1,10.0.0.2,10.0.0.3"},
		{"PreferSameZone: no endpoint in the zone", 0, model.PreferSameZone, all[:3], client("b1", "b"),
			"0:a:10.0.0.1,10.0.0.2,10.0.0.3"},
		{"PreferSameZone: unknown zone", 0, model.PreferSameZone, all, client("", ""),
			"0:a:10.0.0.1,10.0.0.2,10.0.0.3;0:b:10.0.1.1"},
		{"PreferSameZone: the zone's only endpoint draining", 0, model.PreferSameZone,
			append(slices.Clone(all[:3]), ep{"10.0.1.1", "b1", "b", model.Draining}), client("b1", "b"),
			"0:a:10.0.0.1,10.0.0.2,10.0.0.3"},
		{"PreferSameNode", 0, model.PreferSameNode, all, client("a2", "a"),
			"0:a:10.0.0.3;1:a:10.0.0.1,10.0.0.2;1:b:10.0.1.1"},
		{"Local and PreferSameZone", model.InternalTrafficLocal, model.PreferSameZone, all, client("a1", "a"),
			"0:a:10.0.0.1,10.0.0.2"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			st := model.NewStore()
			svc := service("svc", "default", 80)
			svc.InternalTrafficPolicy, svc.TrafficDistribution = tc.policy, tc.dist
			var eps []*model.Endpoint
			for _, e := range tc.eps {
				eps = append(eps, &model.Endpoint{Address: e.addr, Port: 80, ServicePortName: "grpc", NodeName: e.node,
					Health: e.health, Locality: model.Locality{Region: "r", Zone: e.zone}})
			}
			st.Update(svc, eps)
			cla := generate(st).endpoints(t, tc.client, model.ClusterName(80, "", svc.Hostname))
			if err := Validate(cla); err != nil {
				t.Fatal(err)
			}
			s := describeLocalities(cla, func(l *endpoint.LocalityLbEndpoints, addrs string) string {
				return fmt.Sprintf("%d:%s:%s", l.GetPriority(), l.GetLocality().GetZone(), addrs)
			})
			if s != tc.want {
				t.Errorf("got  %s\nwant %s", s, tc.want)
			}
		})
	}
}

// describeLocalities writes each locality entry of cla with line, given
// the entry and its addresses joined by commas, and joins them with ";".
func describeLocalities(cla *endpoint.ClusterLoadAssignment, line func(l *endpoint.LocalityLbEndpoints, addrs string) string) string {
	var out []string
	for _, l := range cla.GetEndpoints() {
		var addrs []string
		for _, e := range l.GetLbEndpoints() {
			addrs = append(addrs, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
		}
		out = append(out, line(l, strings.Join(addrs, ",")))
	}
	return strings.Join(out, ";")
}
