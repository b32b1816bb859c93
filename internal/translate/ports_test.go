package translate

import (
	"slices"
	"strconv"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// TestOnePortNumberTwoProtocols: kube-dns serves "dns" 53/UDP and
// "dns-tcp" 53/TCP from different target ports. Every name with port 53
// means the TCP port: one cluster, whose endpoints are the TCP port's
// only; a port number used by UDP alone has no cluster.
func TestOnePortNumberTwoProtocols(t *testing.T) {
	st := model.NewStore()
	dns := &model.Service{
		Hostname: "kube-dns.kube-system.svc.cluster.local", Name: "kube-dns", Namespace: "kube-system",
		Ports: []model.Port{
			{Name: "dns", Port: 53, TargetPort: 5353, Protocol: model.UDP},
			{Name: "dns-tcp", Port: 53, TargetPort: 5354, Protocol: model.TCP},
			{Name: "statsd", Port: 8125, TargetPort: 8125, Protocol: model.UDP},
		},
	}
	var eps []*model.Endpoint
	for _, addr := range []string{"10.0.0.1", "10.0.0.2"} {
		eps = append(eps,
			&model.Endpoint{Address: addr, Port: 5353, ServicePortName: "dns"},
			&model.Endpoint{Address: addr, Port: 5354, ServicePortName: "dns-tcp"},
			&model.Endpoint{Address: addr, Port: 8125, ServicePortName: "statsd"})
	}
	st.Update(dns, eps)
	g := generate(st)
	name := model.ClusterName(53, "", dns.Hostname)

	for _, c := range []Client{{Namespace: "kube-system", GRPC: true}, {Namespace: "kube-system"}} {
		m := g.endpoints(t, c, name)
		if err := Validate(m); err != nil {
			t.Fatalf("grpc=%v: %v", c.GRPC, err)
		}
		var got []string
		for _, l := range m.GetEndpoints() {
			for _, e := range l.GetLbEndpoints() {
				a := e.GetEndpoint().GetAddress().GetSocketAddress()
				got = append(got, a.GetAddress()+":"+strconv.Itoa(int(a.GetPortValue())))
			}
		}
		if want := []string{"10.0.0.1:5354", "10.0.0.2:5354"}; !slices.Equal(got, want) {
			t.Errorf("grpc=%v: %s has endpoints %v, want the TCP port's %v", c.GRPC, name, got, want)
		}
	}

	if got := g.allNames(t, resource.ClusterType); !slices.Equal(got, []string{name}) {
		t.Errorf("ClusterNames = %v, want [%s]", got, name)
	}
	if got := g.allNames(t, resource.EndpointType); !slices.Equal(got, []string{name}) {
		t.Errorf("EndpointNames = %v, want [%s]", got, name)
	}
	if g.cluster(t, name) == nil || g.listener(t, Client{Namespace: "kube-system", GRPC: true}, "kube-dns:53") == nil {
		t.Errorf("no cluster or listener for port 53")
	}
	udpOnly := model.ClusterName(8125, "", dns.Hostname)
	if c := g.cluster(t, udpOnly); c != nil {
		t.Errorf("cluster for a UDP-only port: %v", c)
	}
	if l := g.listener(t, Client{Namespace: "kube-system", GRPC: true}, "kube-dns:8125"); l != nil {
		t.Errorf("listener for a UDP-only port: %v", l)
	}
}
