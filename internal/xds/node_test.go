package xds

import (
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestClientFromNode(t *testing.T) {
	md := func(kv map[string]any) *structpb.Struct {
		s, err := structpb.NewStruct(kv)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := []struct {
		name string
		node *core.Node
		want Client
	}{
		{"istio id", &core.Node{Id: "sidecar~10.0.0.1~pod-1.shop~shop.svc.cluster.local"}, Client{ID: "sidecar~10.0.0.1~pod-1.shop~shop.svc.cluster.local", Namespace: "shop"}},
		{"metadata wins", &core.Node{Id: "sidecar~10.0.0.1~pod-1.shop~shop.svc.cluster.local", Metadata: md(map[string]any{"NAMESPACE": "other"})}, Client{ID: "sidecar~10.0.0.1~pod-1.shop~shop.svc.cluster.local", Namespace: "other"}},
		{"generator grpc", &core.Node{Id: "x", Metadata: md(map[string]any{"GENERATOR": "grpc"})}, Client{ID: "x", GRPC: true}},
		{"grpc user agent", &core.Node{Id: "y", UserAgentName: "gRPC Go"}, Client{ID: "y", GRPC: true}},
		{"grpc java", &core.Node{UserAgentName: "gRPC Java"}, Client{GRPC: true}},
		{"envoy", &core.Node{Id: "e", UserAgentName: "envoy"}, Client{ID: "e"}},
		{"malformed id", &core.Node{Id: "sidecar~10.0.0.1~pod"}, Client{ID: "sidecar~10.0.0.1~pod"}},
		{"pod.ns without domain", &core.Node{Id: "sidecar~10.0.0.1~pod-1.ns1~"}, Client{ID: "sidecar~10.0.0.1~pod-1.ns1~", Namespace: "ns1"}},
		{"nil", nil, Client{}},
	}
	for _, tc := range cases {
		if got := ClientFromNode(tc.node); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParseClusterName(t *testing.T) {
	h, p, ok := ParseClusterName(ClusterName("a.b.svc.cluster.local", 80))
	if !ok || h != "a.b.svc.cluster.local" || p != 80 {
		t.Fatalf("round trip: %v %v %v", h, p, ok)
	}
	for _, bad := range []string{"", "outbound|80|sub|a", "inbound|80||a", "outbound|x||a", "outbound|0||a", "outbound|80||", "outbound|80"} {
		if _, _, ok := ParseClusterName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestValidateLooksInsideTheListener: the nested HttpConnectionManager is
// checked, as grpc-go checks it.
func TestValidateLooksInsideTheListener(t *testing.T) {
	good := buildListener("a:80", "a.ns.svc.cluster.local", 80)
	if err := Validate(good); err != nil {
		t.Fatalf("generated listener: %v", err)
	}
	for name, m := range map[string]*hcm.HttpConnectionManager{
		"no filters":     {StatPrefix: "x", RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{ConfigSource: adsSource, RouteConfigName: "r"}}},
		"no stat prefix": {HttpFilters: []*hcm.HttpFilter{routerFilter}, RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{ConfigSource: adsSource, RouteConfigName: "r"}}},
		"router not last": {StatPrefix: "x", HttpFilters: []*hcm.HttpFilter{routerFilter, {Name: "other", ConfigType: routerFilter.ConfigType}},
			RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{ConfigSource: adsSource, RouteConfigName: "r"}}},
	} {
		a, err := anypb.New(m)
		if err != nil {
			t.Fatal(err)
		}
		l := &listener.Listener{Name: "a:80", ApiListener: &listener.ApiListener{ApiListener: a}}
		if err := Validate(l); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
