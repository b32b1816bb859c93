package bench

import (
	"slices"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	router "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func anyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// apiListener is a listener as meshpilot sends gRPC clients: an API
// listener whose HttpConnectionManager, with its router filter, names an
// RDS route configuration.
func apiListener(t *testing.T, name string, m proto.Message) *listener.Listener {
	return &listener.Listener{Name: name, ApiListener: &listener.ApiListener{ApiListener: anyOf(t, m)}}
}

func TestReadListener(t *testing.T) {
	rds := &hcm.HttpConnectionManager{
		RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{RouteConfigName: "outbound|7070||a.ns.svc.cluster.local",
			ConfigSource: &core.ConfigSource{ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}}}}},
		HttpFilters: []*hcm.HttpFilter{{Name: "router", ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &router.Router{})}}},
	}
	for _, tc := range []struct {
		name      string
		l         *listener.Listener
		wantRoute string
		err       string
	}{
		{"an API listener", apiListener(t, "a.ns.svc.cluster.local:7070", rds), "outbound|7070||a.ns.svc.cluster.local", ""},
		{"not an API listener", &listener.Listener{Name: "a:7070"}, "", "not an API listener"},
		{"not an HttpConnectionManager", apiListener(t, "a:7070", &router.Router{}), "", "not an HttpConnectionManager"},
		{"no RDS", apiListener(t, "a:7070", &hcm.HttpConnectionManager{}), "", "names no RDS route configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, rc, err := readListener(mustMarshal(t, tc.l))
			if name != tc.l.GetName() || rc != tc.wantRoute {
				t.Errorf("read %q -> %q, want %q -> %q", name, rc, tc.l.GetName(), tc.wantRoute)
			}
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}

func TestReadRouteConfig(t *testing.T) {
	to := func(c string) *route.Route {
		return &route.Route{Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
			Action: &route.Route_Route{Route: &route.RouteAction{ClusterSpecifier: &route.RouteAction_Cluster{Cluster: c}}}}
	}
	split := func(weights map[string]uint32, order ...string) *route.Route {
		wc := &route.WeightedCluster{}
		for _, c := range order {
			wc.Clusters = append(wc.Clusters, &route.WeightedCluster_ClusterWeight{Name: c, Weight: wrapperspb.UInt32(weights[c])})
		}
		return &route.Route{Action: &route.Route_Route{Route: &route.RouteAction{ClusterSpecifier: &route.RouteAction_WeightedClusters{WeightedClusters: wc}}}}
	}
	redirect := &route.Route{Action: &route.Route_Redirect{Redirect: &route.RedirectAction{}}}
	for _, tc := range []struct {
		name     string
		vhs      []*route.VirtualHost
		clusters []string
		split    string
	}{
		{"none", nil, nil, ""},
		{"one cluster", []*route.VirtualHost{{Name: "a", Domains: []string{"a"}, Routes: []*route.Route{to("c1")}}}, []string{"c1"}, ""},
		{"every virtual host's, sorted, once each", []*route.VirtualHost{
			{Routes: []*route.Route{to("c2"), redirect, to("c1")}},
			{Routes: []*route.Route{to("c2"), to("c0")}},
		}, []string{"c0", "c1", "c2"}, ""},
		{"a split: its clusters and weights", []*route.VirtualHost{{Routes: []*route.Route{
			split(map[string]uint32{"v1": 80, "v2": 20}, "v1", "v2"),
		}}}, []string{"v1", "v2"}, "rc#80,20"},
		{"the first split is the key, every cluster counts", []*route.VirtualHost{
			{Routes: []*route.Route{to("c"), split(map[string]uint32{"v2": 30, "v1": 70}, "v2", "v1")}},
			{Routes: []*route.Route{split(map[string]uint32{"x": 1, "y": 99}, "x", "y")}},
		}, []string{"c", "v1", "v2", "x", "y"}, "rc#30,70"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := readRouteConfig(mustMarshal(t, &route.RouteConfiguration{Name: "rc", VirtualHosts: tc.vhs}))
			if err != nil {
				t.Fatal(err)
			}
			if rc.name != "rc" || !slices.Equal(rc.clusters, tc.clusters) || rc.split != tc.split {
				t.Errorf("read %+v, want rc, clusters %v, split %q", rc, tc.clusters, tc.split)
			}
		})
	}
}

func TestReadCluster(t *testing.T) {
	ads := &core.ConfigSource{ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}}}
	for _, tc := range []struct {
		name string
		c    *cluster.Cluster
		eds  string
	}{
		{"its own name", &cluster.Cluster{Name: "outbound|7070||a", ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
			EdsClusterConfig: &cluster.Cluster_EdsClusterConfig{EdsConfig: ads}}, "outbound|7070||a"},
		{"a service name", &cluster.Cluster{Name: "outbound|7070|v1|a", EdsClusterConfig: &cluster.Cluster_EdsClusterConfig{EdsConfig: ads, ServiceName: "eds-v1"},
			ConnectTimeout: nil, LbPolicy: cluster.Cluster_ROUND_ROBIN}, "eds-v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, eds, err := readCluster(mustMarshal(t, tc.c))
			if err != nil || name != tc.c.GetName() || eds != tc.eds {
				t.Errorf("read %q -> %q, %v; want %q -> %q", name, eds, err, tc.c.GetName(), tc.eds)
			}
		})
	}
}

// The reader sees every endpoint of every locality, in order, with its
// health, as the decoded message lists them.
func TestReadLoadAssignment(t *testing.T) {
	lb := func(addr string, h core.HealthStatus) *endpoint.LbEndpoint {
		return &endpoint.LbEndpoint{HealthStatus: h, HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
			Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
				Address: addr, PortSpecifier: &core.SocketAddress_PortValue{PortValue: 7070}}}}}},
			LoadBalancingWeight: wrapperspb.UInt32(1)}
	}
	pipe := &endpoint.LbEndpoint{HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
		Address: &core.Address{Address: &core.Address_Pipe{Pipe: &core.Pipe{Path: "/sock"}}}}}}
	cla := &endpoint.ClusterLoadAssignment{ClusterName: "outbound|7070||a", Endpoints: []*endpoint.LocalityLbEndpoints{
		{Locality: &core.Locality{Region: "r", Zone: "z1"}, LoadBalancingWeight: wrapperspb.UInt32(2), LbEndpoints: []*endpoint.LbEndpoint{
			lb("10.128.0.1", core.HealthStatus_HEALTHY), lb("10.128.0.2", core.HealthStatus_UNHEALTHY)}},
		{Locality: &core.Locality{Region: "r", Zone: "z2"}, LbEndpoints: []*endpoint.LbEndpoint{
			lb("10.128.0.3", core.HealthStatus_UNKNOWN), pipe, lb("10.128.0.4", core.HealthStatus_DRAINING)}},
	}}
	type ep struct {
		addr   string
		health core.HealthStatus
	}
	var want []ep
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			want = append(want, ep{e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress(), e.GetHealthStatus()})
		}
	}
	var got []ep
	name, err := readLoadAssignment(mustMarshal(t, cla), func(addr []byte, h int32) { got = append(got, ep{string(addr), core.HealthStatus(h)}) })
	if err != nil || name != cla.GetClusterName() || !slices.Equal(got, want) {
		t.Fatalf("read %q, %v, %v; want %q, %v", name, got, err, cla.GetClusterName(), want)
	}
}

// unwrap takes a resource out of its discovery.Resource wrapper, and
// refuses one of another type than the response's, wrapped or not.
func TestUnwrap(t *testing.T) {
	c := &cluster.Cluster{Name: "c"}
	ca := anyOf(t, c)
	for _, tc := range []struct {
		name string
		a    *anypb.Any
		err  string
	}{
		{"plain", ca, ""},
		{"wrapped", anyOf(t, &discovery.Resource{Name: "c", Version: "1", Resource: ca}), ""},
		{"another type", anyOf(t, &endpoint.ClusterLoadAssignment{}), "holds a " + resourcev3.EndpointType},
		{"another type wrapped", anyOf(t, &discovery.Resource{Resource: anyOf(t, &endpoint.ClusterLoadAssignment{})}), "wraps a"},
		{"bad bytes", &anypb.Any{TypeUrl: resourceWrapperType, Value: []byte{0x12, 0x05}}, "Resource wrapper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := unwrap(resourcev3.ClusterType, tc.a)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || !proto.Equal(mustCluster(t, b), c) {
				t.Fatalf("unwrapped %x, %v; want the cluster", b, err)
			}
		})
	}
}

func mustCluster(t *testing.T, b []byte) *cluster.Cluster {
	t.Helper()
	var c cluster.Cluster
	if err := proto.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// A truncated resource is an error, never a partial read taken as whole.
func TestReadTruncated(t *testing.T) {
	b := mustMarshal(t, &endpoint.ClusterLoadAssignment{ClusterName: "outbound|7070||a", Endpoints: []*endpoint.LocalityLbEndpoints{{}}})
	if _, err := readLoadAssignment(b[:len(b)-3], func([]byte, int32) {}); err == nil {
		t.Fatal("a truncated ClusterLoadAssignment read without error")
	}
}
