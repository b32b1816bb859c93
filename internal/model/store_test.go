package model

import (
	"slices"
	"strconv"
	"sync"
	"testing"
)

func svc(name string, ports ...Port) *Service {
	return &Service{Hostname: Hostname(name + ".ns.svc.cluster.local"), Name: name, Namespace: "ns", Ports: ports}
}

func ep(addr string, port uint32, portName string, h Health) *Endpoint {
	return &Endpoint{Address: addr, Port: port, ServicePortName: portName, Health: h, Labels: map[string]string{"app": "a"}}
}

func TestStoreReportsOnlyRealChanges(t *testing.T) {
	s := NewStore()
	var got []Event
	s.AppendEventHandler(func(e Event) { got = append(got, e) })
	grpc := Port{Name: "grpc", Port: 8080, Protocol: GRPC}
	host := Hostname("a.ns.svc.cluster.local")

	steps := []struct {
		name string
		do   func() bool
		want []EventKind
	}{
		{"add", func() bool { return s.Update(svc("a", grpc), []*Endpoint{ep("10.0.0.1", 9090, "grpc", Healthy)}) }, []EventKind{ServiceChanged}},
		{"same content again", func() bool { return s.Update(svc("a", grpc), []*Endpoint{ep("10.0.0.1", 9090, "grpc", Healthy)}) }, nil},
		{"endpoint order differs only", func() bool {
			return s.Update(svc("a", grpc), []*Endpoint{ep("10.0.0.2", 9090, "grpc", Healthy), ep("10.0.0.1", 9090, "grpc", Healthy)})
		}, []EventKind{EndpointsChanged}},
		{"same set, other order", func() bool {
			return s.Update(svc("a", grpc), []*Endpoint{ep("10.0.0.1", 9090, "grpc", Healthy), ep("10.0.0.2", 9090, "grpc", Healthy)})
		}, nil},
		{"health change", func() bool {
			return s.Update(svc("a", grpc), []*Endpoint{ep("10.0.0.1", 9090, "grpc", Draining), ep("10.0.0.2", 9090, "grpc", Healthy)})
		}, []EventKind{EndpointsChanged}},
		{"port change", func() bool {
			return s.Update(svc("a", Port{Name: "grpc", Port: 8081, Protocol: GRPC}), []*Endpoint{ep("10.0.0.1", 9090, "grpc", Draining)})
		}, []EventKind{ServiceChanged}},
		{"delete", func() bool { return s.Delete(host) }, []EventKind{ServiceDeleted}},
		{"delete again", func() bool { return s.Delete(host) }, nil},
	}
	for _, st := range steps {
		got = nil
		changed := st.do()
		var kinds []EventKind
		for _, e := range got {
			if e.Hostname != host || e.Namespace != "ns" {
				t.Errorf("%s: event %+v names the wrong service", st.name, e)
			}
			kinds = append(kinds, e.Kind)
		}
		if !slices.Equal(kinds, st.want) || changed != (len(st.want) > 0) {
			t.Errorf("%s: events %v changed=%v, want %v", st.name, kinds, changed, st.want)
		}
	}
}

// TestStoreSaysWhenNoEndpointsAreLeft: an event says when the service is
// left without endpoints, whatever its kind, so that pushes can hold back
// removals.
func TestStoreSaysWhenNoEndpointsAreLeft(t *testing.T) {
	s := NewStore()
	var got []Event
	s.AppendEventHandler(func(e Event) { got = append(got, e) })
	grpc := Port{Name: "grpc", Port: 8080, Protocol: GRPC}
	one := []*Endpoint{ep("10.0.0.1", 9090, "grpc", Healthy)}
	two := []*Endpoint{ep("10.0.0.1", 9090, "grpc", Healthy), ep("10.0.0.2", 9090, "grpc", Healthy)}
	for _, st := range []struct {
		name string
		do   func() bool
		kind EventKind
		none bool
	}{
		{"created with endpoints", func() bool { return s.Update(svc("a", grpc), one) }, ServiceChanged, false},
		{"an endpoint added", func() bool { return s.Update(svc("a", grpc), two) }, EndpointsChanged, false},
		{"an endpoint removed, one left", func() bool { return s.Update(svc("a", grpc), one) }, EndpointsChanged, false},
		{"the last endpoint removed (slice deleted)", func() bool { return s.Update(svc("a", grpc), nil) }, EndpointsChanged, true},
		{"endpoints back", func() bool { return s.Update(svc("a", grpc), one) }, EndpointsChanged, false},
		{"deleted", func() bool { return s.Delete("a.ns.svc.cluster.local") }, ServiceDeleted, true},
		{"created again before its endpoints", func() bool { return s.Update(svc("a", grpc), nil) }, ServiceChanged, true},
		{"its endpoints arrive", func() bool { return s.Update(svc("a", grpc), one) }, EndpointsChanged, false},
		{"definition changed, endpoints kept", func() bool {
			return s.Update(svc("a", Port{Name: "grpc", Port: 8081, Protocol: GRPC}), one)
		}, ServiceChanged, false},
		{"another created without endpoints", func() bool { return s.Update(svc("b", grpc), nil) }, ServiceChanged, true},
	} {
		got = nil
		if !st.do() || len(got) != 1 {
			t.Fatalf("%s: events %+v, want one", st.name, got)
		}
		if e := got[0]; e.Kind != st.kind || e.NoEndpoints != st.none {
			t.Errorf("%s: %v with NoEndpoints %v, want %v with NoEndpoints %v", st.name, e.Kind, e.NoEndpoints, st.kind, st.none)
		}
	}
}

func TestStoreEndpointsByPortAndSelector(t *testing.T) {
	s := NewStore()
	host := Hostname("a.ns.svc.cluster.local")
	s.Update(svc("a", Port{Name: "grpc", Port: 8080}, Port{Name: "http", Port: 80}), []*Endpoint{
		ep("10.0.0.2", 9090, "grpc", Healthy), ep("10.0.0.1", 9090, "grpc", Healthy), ep("10.0.0.1", 8000, "http", Healthy),
		{Address: "10.0.0.3", Port: 9090, ServicePortName: "grpc", Labels: map[string]string{"app": "b"}},
	})
	addrs := func(eps []*Endpoint) []string {
		var out []string
		for _, e := range eps {
			out = append(out, e.Address)
		}
		return out
	}
	if got := addrs(s.Endpoints(host, 8080, nil)); !slices.Equal(got, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}) {
		t.Errorf("port 8080: %v", got)
	}
	if got := addrs(s.Endpoints(host, 8080, Labels{"app": "b"})); !slices.Equal(got, []string{"10.0.0.3"}) {
		t.Errorf("port 8080 app=b: %v", got)
	}
	if got := s.Endpoints(host, 80, nil); len(got) != 1 || got[0].Port != 8000 {
		t.Errorf("port 80: %+v", got)
	}
	if got := s.Endpoints(host, 1, nil); got != nil {
		t.Errorf("unknown port: %v", got)
	}
	if got := s.Endpoints("nope", 8080, nil); got != nil {
		t.Errorf("unknown service: %v", got)
	}
	if n, e := s.Len(); n != 1 || e != 4 {
		t.Errorf("Len = %d, %d", n, e)
	}
}

// TestStoreEndpointsOfOneNumberTwoProtocols: kube-dns serves 53/UDP
// ("dns") and 53/TCP ("dns-tcp") from different target ports; port 53
// means the TCP port, and each port keeps its own endpoints.
func TestStoreEndpointsOfOneNumberTwoProtocols(t *testing.T) {
	s := NewStore()
	host := Hostname("kube-dns.ns.svc.cluster.local")
	s.Update(svc("kube-dns", kubeDNS...), []*Endpoint{
		ep("10.0.0.1", 5353, "dns", Healthy), ep("10.0.0.1", 5354, "dns-tcp", Healthy),
		ep("10.0.0.2", 5353, "dns", Healthy), ep("10.0.0.2", 5354, "dns-tcp", Healthy),
		ep("10.0.0.1", 9153, "metrics", Healthy),
	})
	ports := func(eps []*Endpoint) []string {
		var out []string
		for _, e := range eps {
			out = append(out, e.Address+":"+itoa(e.Port))
		}
		return out
	}
	for _, tc := range []struct {
		desc string
		got  []*Endpoint
		want []string
	}{
		{"port 53", s.Endpoints(host, 53, nil), []string{"10.0.0.1:5354", "10.0.0.2:5354"}},
		{"port 53, selected", s.Endpoints(host, 53, Labels{"app": "a"}), []string{"10.0.0.1:5354", "10.0.0.2:5354"}},
		{"port name dns", s.EndpointsByPortName(host, "dns", nil), []string{"10.0.0.1:5353", "10.0.0.2:5353"}},
		{"port name dns-tcp", s.EndpointsByPortName(host, "dns-tcp", nil), []string{"10.0.0.1:5354", "10.0.0.2:5354"}},
		{"port 9153", s.Endpoints(host, 9153, nil), []string{"10.0.0.1:9153"}},
		{"unknown port name", s.EndpointsByPortName(host, "nope", nil), nil},
	} {
		if !slices.Equal(ports(tc.got), tc.want) {
			t.Errorf("%s: %v, want %v", tc.desc, ports(tc.got), tc.want)
		}
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

func TestStoreConcurrentReadersAndWriters(t *testing.T) {
	s := NewStore()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				name := string(rune('a' + w))
				s.Update(svc(name, Port{Name: "grpc", Port: 8080}), []*Endpoint{ep("10.0.0.1", uint32(9000+i), "grpc", Healthy)})
				_ = s.Services()
				_ = s.Endpoints(Hostname(name+".ns.svc.cluster.local"), 8080, nil)
			}
		})
	}
	wg.Wait()
	if n, _ := s.Len(); n != 4 {
		t.Fatalf("services = %d, want 4", n)
	}
}

func TestParseLocality(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Locality
	}{
		{"", Locality{}},
		{"us", Locality{Region: "us"}},
		{"us/us-east1", Locality{Region: "us", Zone: "us-east1"}},
		{"us/us-east1/rack1", Locality{"us", "us-east1", "rack1"}},
		{"us.us-east1.rack1", Locality{"us", "us-east1", "rack1"}},
		// Istio's SplitLocalityLabel ignores parts past the third.
		{"us/us-east1/rack1/row2", Locality{"us", "us-east1", "rack1"}},
		{"us.us-east1.rack1.row2", Locality{"us", "us-east1", "rack1"}},
		// A slash anywhere means the slash form: dots stay in names.
		{"us/us-east1.a", Locality{Region: "us", Zone: "us-east1.a"}},
		{"us//rack1", Locality{Region: "us", Subzone: "rack1"}},
	} {
		if got := ParseLocality(tc.in); got != tc.want {
			t.Errorf("ParseLocality(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	if s := (Locality{"us", "z", ""}).String(); s != "us/z/" {
		t.Errorf("String = %q", s)
	}
}

// TestStoreViewReadsOnly: a registry embeds a StoreView so that its
// holders read its model and cannot write it.
func TestStoreViewReadsOnly(t *testing.T) {
	st := NewStore()
	var v any = st.View()
	if _, ok := v.(ServiceDiscovery); !ok {
		t.Fatal("a StoreView is not a ServiceDiscovery")
	}
	if _, ok := v.(interface {
		Update(*Service, []*Endpoint) bool
	}); ok {
		t.Fatal("a StoreView can Update")
	}
	if _, ok := v.(interface{ Delete(Hostname) bool }); ok {
		t.Fatal("a StoreView can Delete")
	}
	svc := &Service{Hostname: "a.ns.svc.cluster.local", Name: "a", Namespace: "ns", Ports: []Port{{Name: "grpc", Port: 80, Protocol: GRPC}}}
	st.Update(svc, []*Endpoint{{Address: "10.0.0.1", Port: 80, ServicePortName: "grpc"}})
	view := st.View()
	if got := view.GetService(svc.Hostname); got != svc || len(view.Services()) != 1 || len(view.Endpoints(svc.Hostname, 80, nil)) != 1 {
		t.Fatalf("the view does not read the store: %v %v %v", got, view.Services(), view.Endpoints(svc.Hostname, 80, nil))
	}
	if s, e := view.Len(); s != 1 || e != 1 {
		t.Fatalf("Len %d %d", s, e)
	}
}

// TestStoreSaysWhenIdentitiesStayTheSame: an event says whether the
// identities (namespace, service account) of the service's endpoints are
// what they were, so that what verifies them is regenerated only when
// they change; a new service claims nothing.
func TestStoreSaysWhenIdentitiesStayTheSame(t *testing.T) {
	s := NewStore()
	var got []Event
	s.AppendEventHandler(func(e Event) { got = append(got, e) })
	grpc := Port{Name: "grpc", Port: 8080, Protocol: GRPC}
	as := func(addr, ns, sa string) *Endpoint {
		e := ep(addr, 9090, "grpc", Healthy)
		e.Namespace, e.ServiceAccount = ns, sa
		return e
	}
	for _, st := range []struct {
		name string
		eps  []*Endpoint
		kind EventKind
		same bool
	}{
		{"created", []*Endpoint{as("10.0.0.1", "ns", "reviews")}, ServiceChanged, false},
		{"an endpoint of the same account added", []*Endpoint{as("10.0.0.1", "ns", "reviews"), as("10.0.0.2", "ns", "reviews")}, EndpointsChanged, true},
		{"health changes", []*Endpoint{as("10.0.0.1", "ns", "reviews"), func() *Endpoint { e := as("10.0.0.2", "ns", "reviews"); e.Health = Draining; return e }()}, EndpointsChanged, true},
		{"an endpoint without account added", []*Endpoint{as("10.0.0.1", "ns", "reviews"), as("10.0.0.3", "", "")}, EndpointsChanged, true},
		{"a new account", []*Endpoint{as("10.0.0.1", "ns", "reviews"), as("10.0.0.3", "ns", "reviews-v2")}, EndpointsChanged, false},
		{"the same accounts, reordered", []*Endpoint{as("10.0.0.4", "ns", "reviews-v2"), as("10.0.0.5", "ns", "reviews")}, EndpointsChanged, true},
		{"an account in another namespace", []*Endpoint{as("10.0.0.4", "ns", "reviews-v2"), as("10.0.0.5", "other", "reviews")}, EndpointsChanged, false},
		{"an account goes", []*Endpoint{as("10.0.0.4", "ns", "reviews-v2")}, EndpointsChanged, false},
		{"every endpoint goes", nil, EndpointsChanged, false},
		{"endpoints without accounts", []*Endpoint{as("10.0.0.6", "", "")}, EndpointsChanged, true},
	} {
		got = nil
		if !s.Update(svc("a", grpc), st.eps) || len(got) != 1 {
			t.Fatalf("%s: events %+v, want one", st.name, got)
		}
		if e := got[0]; e.Kind != st.kind || e.SameServiceAccounts != st.same {
			t.Errorf("%s: %v with SameServiceAccounts %v, want %v with %v", st.name, e.Kind, e.SameServiceAccounts, st.kind, st.same)
		}
	}
	// A deletion leaves the identities as they were only when there
	// were none: the aggregate serves it as a change of endpoints when
	// another source defines the service.
	got = nil
	s.Delete("a.ns.svc.cluster.local")
	s.Update(svc("b", grpc), []*Endpoint{as("10.0.0.7", "ns", "b")})
	s.Delete("b.ns.svc.cluster.local")
	if len(got) != 3 || !got[0].SameServiceAccounts || got[2].SameServiceAccounts {
		t.Errorf("deletions: %+v, want the first (no accounts) to keep them, the last (one account) not", got)
	}
}
