package xds

import (
	"slices"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// TestHostDefinedByTwoNamespaces: a host two namespaces define, each for
// itself (ServiceEntries exported to "."), is for Envoy's wildcard
// subscriptions every port either defines, and each client is sent only
// its namespace's definition: its ports and its endpoints; a change of
// the second definition's endpoints reaches its namespace's clients.
func TestHostDefinedByTwoNamespaces(t *testing.T) {
	const host = "api.example.com"
	def := func(ns string, ports ...int32) *model.Service {
		s := &model.Service{Hostname: host, Name: host, Namespace: ns, ExportTo: []string{"."}}
		for _, p := range ports {
			s.Ports = append(s.Ports, model.Port{Name: "grpc-" + itoa(int(p)), Port: p, Protocol: model.GRPC})
		}
		return s
	}
	eps := func(addr string, ports ...int32) []*model.Endpoint {
		var out []*model.Endpoint
		for _, p := range ports {
			out = append(out, &model.Endpoint{Address: addr, Port: 8080, ServicePortName: "grpc-" + itoa(int(p)), Health: model.Healthy})
		}
		return out
	}
	st := model.NewStore()
	shop, web := def("shop", 80), def("web", 80, 443)
	st.Update(model.WithDefinitions(shop, []model.Definition{{Service: web, Endpoints: eps("10.0.0.2", 80, 443)}}), eps("10.0.0.1", 80))
	ts := startServer(t, st)
	cc := dial(t, ts.addr)
	c80, c443 := model.ClusterName(80, "", host), model.ClusterName(443, "", host)
	node := func(id, ns string) *core.Node { return xdstest.EnvoyNode(xdstest.NodeOptions{ID: id, Namespace: ns}) }

	clients := map[string]*xdstest.TestClient{}
	for _, c := range []struct {
		ns   string
		cds  []string
		eds  map[string][]string
		name string
	}{
		{"shop", []string{c80}, map[string][]string{c80: {"10.0.0.1"}}, "shop"},
		{"web", []string{c443, c80}, map[string][]string{c80: {"10.0.0.2"}, c443: {"10.0.0.2"}}, "web"},
		{"other", nil, map[string][]string{}, "other"},
	} {
		a := openADS(t, cc, node(c.name, c.ns))
		clients[c.ns] = a
		a.Subscribe(resource.ClusterType)
		r := a.Next()
		if got := sortedNames(r); !slices.Equal(got, c.cds) {
			t.Fatalf("client of %s: wildcard CDS %v, want %v", c.ns, got, c.cds)
		}
		a.ACK(r)
		a.Subscribe(resource.EndpointType, c80, c443)
		r = a.Next()
		got := claAddrs(t, r)
		if len(got) != len(c.eds) {
			t.Fatalf("client of %s: EDS %v, want %v", c.ns, got, c.eds)
		}
		for name, want := range c.eds {
			if !slices.Equal(got[name], want) {
				t.Fatalf("client of %s: EDS %s %v, want %v", c.ns, name, got[name], want)
			}
		}
		a.ACK(r)
	}

	st.Update(model.WithDefinitions(shop, []model.Definition{{Service: web, Endpoints: eps("10.0.0.3", 80, 443)}}), eps("10.0.0.1", 80))
	r := clients["web"].Next()
	if got := claAddrs(t, r); !slices.Equal(got[c80], []string{"10.0.0.3"}) {
		t.Fatalf("web's EDS after its definition's endpoints changed: %v", got)
	}
}
