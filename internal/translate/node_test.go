package translate

import (
	"reflect"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
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
		{"istio id", &core.Node{Id: "sidecar~10.0.0.1~pod-1.shop~shop.svc.cluster.local"}, Client{ID: "sidecar~10.0.0.1~pod-1.shop~shop.svc.cluster.local", Namespace: "shop", IPs: []string{"10.0.0.1"}}},
		{"metadata wins", &core.Node{Id: "sidecar~10.0.0.1~pod-1.shop~shop.svc.cluster.local", Metadata: md(map[string]any{"NAMESPACE": "other", "INSTANCE_IPS": "10.0.0.2, fd00::2,bad"})},
			Client{ID: "sidecar~10.0.0.1~pod-1.shop~shop.svc.cluster.local", Namespace: "other", IPs: []string{"10.0.0.2", "fd00::2"}}},
		{"id without an address", &core.Node{Id: "sidecar~pod~pod-1.shop~shop.svc.cluster.local"}, Client{ID: "sidecar~pod~pod-1.shop~shop.svc.cluster.local", Namespace: "shop"}},
		{"generator grpc", &core.Node{Id: "x", Metadata: md(map[string]any{"GENERATOR": "grpc"})}, Client{ID: "x", GRPC: true}},
		{"grpc user agent", &core.Node{Id: "y", UserAgentName: "gRPC Go"}, Client{ID: "y", GRPC: true}},
		{"grpc java", &core.Node{UserAgentName: "gRPC Java"}, Client{GRPC: true}},
		{"envoy", &core.Node{Id: "e", UserAgentName: "envoy"}, Client{ID: "e"}},
		{"malformed id", &core.Node{Id: "sidecar~10.0.0.1~pod"}, Client{ID: "sidecar~10.0.0.1~pod"}},
		{"pod.ns without domain", &core.Node{Id: "sidecar~10.0.0.1~pod-1.ns1~"}, Client{ID: "sidecar~10.0.0.1~pod-1.ns1~", Namespace: "ns1", IPs: []string{"10.0.0.1"}}},
		{"node and locality", &core.Node{Id: "n", Locality: &core.Locality{Region: "r", Zone: "z", SubZone: "s"},
			Metadata: md(map[string]any{"NODE_NAME": "node-a"})},
			Client{ID: "n", NodeName: "node-a", Locality: model.Locality{Region: "r", Zone: "z", Subzone: "s"}}},
		{"cluster", &core.Node{Id: "c", Metadata: md(map[string]any{"CLUSTER_ID": "cluster-b"})}, Client{ID: "c", ClusterID: "cluster-b"}},
		{"nil", nil, Client{}},
	}
	for _, tc := range cases {
		if got := ClientFromNode(tc.node); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestSubsetNamesDesignateNothing: a cluster name with a subset gets no
// resource, whatever its type, until subsets (DestinationRule) are served.
func TestSubsetNamesDesignateNothing(t *testing.T) {
	st := model.NewStore()
	svc := service("a", "b", 80)
	st.Update(svc, nil)
	g := generate(st)
	whole, subset := model.ClusterName(80, "", svc.Hostname), model.ClusterName(80, "v1", svc.Hostname)
	if h, p, ok := serviceCluster(whole); !ok || h != svc.Hostname || p != 80 {
		t.Fatalf("serviceCluster(%q) = %q, %d, %v", whole, h, p, ok)
	}
	if _, _, ok := serviceCluster(subset); ok {
		t.Errorf("serviceCluster(%q) accepted a subset", subset)
	}
	for _, typ := range []string{resource.ClusterType, resource.RouteType, resource.EndpointType} {
		if m := g.get(t, typ, Client{}, whole); m == nil {
			t.Errorf("%s %q: no resource", typ, whole)
		}
		if m := g.get(t, typ, Client{}, subset); m != nil {
			t.Errorf("%s %q: got %v, want none", typ, subset, m)
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
