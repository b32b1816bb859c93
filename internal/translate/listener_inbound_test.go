package translate

import (
	"slices"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestInboundListener: a gRPC server gets its listener when a service of
// its namespace has an endpoint at one of its addresses on the port it
// listens on (the target port, not the service port), whatever address
// form its name holds; otherwise none, as istiod does.
func TestInboundListener(t *testing.T) {
	st := model.NewStore()
	// echo: port 9080 served on the workloads' port 8080.
	echo := &model.Service{Hostname: "echo.apps.svc.cluster.local", Name: "echo", Namespace: "apps",
		Ports: []model.Port{{Name: "grpc", Port: 9080, TargetPort: 8080, Protocol: model.GRPC}}}
	st.Update(echo, []*model.Endpoint{
		{Address: "10.0.0.7", Port: 8080, ServicePortName: "grpc"},
		{Address: "10.0.0.8", Port: 8080, ServicePortName: "grpc", Health: model.Unhealthy},
		{Address: "fd00::9", Port: 8080, ServicePortName: "grpc"},
	})
	// other: a service of another namespace whose endpoint is 10.0.0.7:7070.
	st.Update(service("other", "elsewhere", 7070), endpoints(7070, model.Healthy, "10.0.0.7"))
	g := &listenerGenerator{GeneratorOptions{Discovery: st}}
	pod7 := Client{Namespace: "apps", IPs: []string{"10.0.0.7"}}

	for _, tc := range []struct {
		desc    string
		client  Client
		name    string
		address string // of the listener; "" for none
	}{
		{"pod IP", pod7, model.InboundListenerPrefix + "10.0.0.7:8080", "10.0.0.7"},
		{"any IPv4 address", pod7, model.InboundListenerPrefix + "0.0.0.0:8080", "0.0.0.0"},
		{"any IPv6 address", pod7, model.InboundListenerPrefix + "[::]:8080", "::"},
		{"the name's address is not looked up", pod7, model.InboundListenerPrefix + "10.9.9.9:8080", "10.9.9.9"},
		{"a not ready endpoint serves", Client{Namespace: "apps", IPs: []string{"10.0.0.8"}}, model.InboundListenerPrefix + "[::]:8080", "::"},
		{"a second address", Client{Namespace: "apps", IPs: []string{"10.0.0.99", "fd00::9"}}, model.InboundListenerPrefix + "[::]:8080", "::"},
		{"the service port is not the server's", pod7, model.InboundListenerPrefix + "10.0.0.7:9080", ""},
		{"a port no service serves", pod7, model.InboundListenerPrefix + "10.0.0.7:8081", ""},
		{"a service of another namespace", pod7, model.InboundListenerPrefix + "10.0.0.7:7070", ""},
		{"a workload behind no service", Client{Namespace: "apps", IPs: []string{"10.0.0.50"}}, model.InboundListenerPrefix + "[::]:8080", ""},
		{"a client without addresses", Client{Namespace: "apps"}, model.InboundListenerPrefix + "[::]:8080", ""},
		{"a client without namespace", Client{IPs: []string{"10.0.0.7"}}, model.InboundListenerPrefix + "[::]:8080", ""},
		{"a name, not an address", pod7, model.InboundListenerPrefix + "echo:9080", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := g.Generate(&tc.client, tc.name)
			if tc.address == "" {
				if r.Resource != nil {
					t.Fatalf("got a listener, want none: %v", r.Resource)
				}
				return
			}
			l, ok := r.Resource.(*listener.Listener)
			if !ok {
				t.Fatalf("got %T, want a listener", r.Resource)
			}
			if err := Validate(l); err != nil {
				t.Fatalf("invalid: %v", err)
			}
			sa := l.GetAddress().GetSocketAddress()
			_, port, _ := model.ParseInboundListenerName(tc.name)
			if l.GetName() != tc.name || sa.GetAddress() != tc.address || sa.GetPortValue() != uint32(port) {
				t.Fatalf("listener %q on %s:%d, want %q on %s:%d", l.GetName(), sa.GetAddress(), sa.GetPortValue(), tc.name, tc.address, port)
			}
		})
	}

	t.Run("what the answer depends on", func(t *testing.T) {
		st.Update(service("idle", "apps", 1234), nil)
		for _, name := range []string{"0.0.0.0:8080", "0.0.0.0:8081"} { // served or not
			r := g.Generate(&pod7, model.InboundListenerPrefix+name)
			want := []model.ConfigKey{
				model.NamespaceKey("apps"), model.EndpointsKey(echo.Hostname), model.EndpointsKey("idle.apps.svc.cluster.local"),
			}
			if !slices.Equal(r.Deps, want) || r.Vary != VaryNamespace|VaryAddresses {
				t.Errorf("%s: deps %v, vary %b; want %v, namespace and addresses", name, r.Deps, r.Vary, want)
			}
		}
		// Without a namespace or an address, no model change could give
		// the client a listener.
		for _, c := range []Client{{Namespace: "apps"}, {IPs: []string{"10.0.0.7"}}} {
			if r := g.Generate(&c, model.InboundListenerPrefix+"0.0.0.0:8080"); r.Deps != nil {
				t.Errorf("%+v: deps %v", c, r.Deps)
			}
		}
	})
}

// TestInboundListenerShape: what grpc-go needs to serve, as istiod builds
// it: one filter chain without match criteria, holding an
// HttpConnectionManager whose inline route configuration sends every RPC
// to the server itself (non_forwarding_action), the router last.
func TestInboundListenerShape(t *testing.T) {
	l := buildInboundListener(model.InboundListenerPrefix+"0.0.0.0:8080", "0.0.0.0", 8080, inboundSecurity{})
	if l.GetApiListener() != nil || len(l.GetListenerFilters()) > 0 || l.GetUseOriginalDst() != nil || l.GetDefaultFilterChain() != nil {
		t.Fatalf("fields a gRPC server refuses or meshpilot does not set: %v", l)
	}
	if len(l.GetFilterChains()) != 1 {
		t.Fatalf("%d filter chains, want 1", len(l.GetFilterChains()))
	}
	fc := l.GetFilterChains()[0]
	if fc.GetName() != "inbound-plaintext" || fc.GetFilterChainMatch() != nil || fc.GetTransportSocket() != nil || len(fc.GetFilters()) != 1 {
		t.Fatalf("filter chain: %v", fc)
	}
	var m hcm.HttpConnectionManager
	if err := fc.GetFilters()[0].GetTypedConfig().UnmarshalTo(&m); err != nil {
		t.Fatal(err)
	}
	rc := m.GetRouteConfig()
	if rc == nil || len(rc.GetVirtualHosts()) != 1 {
		t.Fatalf("route configuration: %v", m.GetRouteSpecifier())
	}
	vh := rc.GetVirtualHosts()[0]
	if !slices.Equal(vh.GetDomains(), []string{"*"}) || len(vh.GetRoutes()) != 1 {
		t.Fatalf("virtual host: %v", vh)
	}
	r := vh.GetRoutes()[0]
	if r.GetMatch().GetPrefix() != "/" || r.GetNonForwardingAction() == nil {
		t.Fatalf("route: %v", r)
	}
	fs := m.GetHttpFilters()
	if len(fs) != 1 || fs[0].GetName() != routerFilter.GetName() {
		t.Fatalf("http filters: %v", fs)
	}
}

// TestValidateServerListener: Validate holds a server listener to what
// grpc-go checks before it ACKs one (and to what makes its RPCs fail).
func TestValidateServerListener(t *testing.T) {
	good := buildInboundListener(model.InboundListenerPrefix+"10.0.0.7:8080", "10.0.0.7", 8080, inboundSecurity{})
	if err := Validate(good); err != nil {
		t.Fatalf("generated listener: %v", err)
	}
	// withHCM replaces the chain's HttpConnectionManager by a changed copy.
	withHCM := func(change func(*hcm.HttpConnectionManager)) func(*listener.Listener) {
		return func(l *listener.Listener) {
			f := l.GetFilterChains()[0].GetFilters()[0]
			m := &hcm.HttpConnectionManager{}
			if err := f.GetTypedConfig().UnmarshalTo(m); err != nil {
				t.Fatal(err)
			}
			change(m)
			a, err := anypb.New(m)
			if err != nil {
				t.Fatal(err)
			}
			f.ConfigType = &listener.Filter_TypedConfig{TypedConfig: a}
		}
	}
	for desc, change := range map[string]func(*listener.Listener){
		"no address": func(l *listener.Listener) { l.Address = nil },
		"a pipe address": func(l *listener.Listener) {
			l.Address = &core.Address{Address: &core.Address_Pipe{Pipe: &core.Pipe{Path: "/p"}}}
		},
		"no filter chain":   func(l *listener.Listener) { l.FilterChains = nil },
		"listener filters":  func(l *listener.Listener) { l.ListenerFilters = []*listener.ListenerFilter{{Name: "tls_inspector"}} },
		"use_original_dst":  func(l *listener.Listener) { l.UseOriginalDst = wrapperspb.Bool(true) },
		"no network filter": func(l *listener.Listener) { l.FilterChains[0].Filters = nil },
		"unnamed filter":    func(l *listener.Listener) { l.FilterChains[0].Filters[0].Name = "" },
		"two filters one name": func(l *listener.Listener) {
			l.FilterChains[0].Filters = append(l.FilterChains[0].Filters, proto.Clone(l.FilterChains[0].Filters[0]).(*listener.Filter))
		},
		"not an HttpConnectionManager": func(l *listener.Listener) {
			a, _ := anypb.New(&route.RouteConfiguration{})
			l.FilterChains[0].Filters[0].ConfigType = &listener.Filter_TypedConfig{TypedConfig: a}
		},
		"an unknown transport socket": func(l *listener.Listener) {
			l.FilterChains[0].TransportSocket = &core.TransportSocket{Name: "envoy.transport_sockets.alts"}
		},
		"a bad default chain": func(l *listener.Listener) { l.DefaultFilterChain = &listener.FilterChain{Name: "empty"} },
		"no router":           withHCM(func(m *hcm.HttpConnectionManager) { m.HttpFilters = nil }),
		"a forwarding route": withHCM(func(m *hcm.HttpConnectionManager) {
			m.GetRouteConfig().VirtualHosts[0].Routes[0].Action = &route.Route_Route{Route: &route.RouteAction{
				ClusterSpecifier: &route.RouteAction_Cluster{Cluster: "c"}}}
		}),
	} {
		l := proto.Clone(good).(*listener.Listener)
		change(l)
		if err := Validate(l); err == nil {
			t.Errorf("%s: accepted", desc)
		}
	}
}
