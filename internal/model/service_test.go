package model

import (
	"encoding/json"
	"slices"
	"testing"
)

// kubeDNS has the ports of Kubernetes' own DNS service: one number, two
// protocols, UDP listed first.
var kubeDNS = []Port{
	{Name: "dns", Port: 53, TargetPort: 53, Protocol: UDP},
	{Name: "dns-tcp", Port: 53, TargetPort: 53, Protocol: TCP},
	{Name: "metrics", Port: 9153, TargetPort: 9153, Protocol: TCP},
}

func TestPortByNumber(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		ports    []Port
		number   int32
		wantName string
		wantOK   bool
	}{
		{"kube-dns: the TCP port, listed second", kubeDNS, 53, "dns-tcp", true},
		{"TCP listed first", []Port{kubeDNS[1], kubeDNS[0]}, 53, "dns-tcp", true},
		{"other number", kubeDNS, 9153, "metrics", true},
		{"a UDP port alone is no xDS port", []Port{kubeDNS[0]}, 53, "", false},
		{"a port named udp-* is UDP", []Port{{Name: "udp-stats", Port: 8125, Protocol: UDP}}, 8125, "", false},
		{"unknown number", kubeDNS, 54, "", false},
		{"no ports", nil, 53, "", false},
		{"HTTP port", []Port{{Name: "http", Port: 80, Protocol: HTTP}}, 80, "http", true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := &Service{Ports: tc.ports}
			p, ok := s.PortByNumber(tc.number)
			if ok != tc.wantOK || p.Name != tc.wantName {
				t.Errorf("PortByNumber(%d) = %q, %v; want %q, %v", tc.number, p.Name, ok, tc.wantName, tc.wantOK)
			}
		})
	}
}

func TestPortsByNumber(t *testing.T) {
	names := func(ps []Port) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	for _, tc := range []struct {
		desc  string
		ports []Port
		want  []string
	}{
		{"kube-dns", kubeDNS, []string{"dns-tcp", "metrics"}},
		{"UDP only", []Port{kubeDNS[0]}, nil},
		{"order of Ports kept", []Port{kubeDNS[2], kubeDNS[1], kubeDNS[0]}, []string{"metrics", "dns-tcp"}},
		{"no ports", nil, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := &Service{Ports: tc.ports}
			if got := names(s.PortsByNumber()); !slices.Equal(got, tc.want) {
				t.Errorf("PortsByNumber = %v, want %v", got, tc.want)
			}
			for _, p := range s.PortsByNumber() {
				if q, _ := s.PortByNumber(p.Port); q != p {
					t.Errorf("PortsByNumber lists %+v, PortByNumber(%d) says %+v", p, p.Port, q)
				}
			}
		})
	}
}

// TestServiceEqual: every field that changes what clients get makes two
// services differ, so that the store reports the change.
func TestServiceEqual(t *testing.T) {
	base := func() *Service {
		return &Service{Hostname: "a.ns.svc.cluster.local", Name: "a", Namespace: "ns",
			Ports: []Port{{Name: "grpc", Port: 80, Protocol: GRPC}}, ClusterIPs: []string{"10.0.0.1"}}
	}
	for _, tc := range []struct {
		desc   string
		change func(*Service)
	}{
		{"port", func(s *Service) { s.Ports[0].Port = 81 }},
		{"resolution", func(s *Service) { s.Resolution = Passthrough }},
		{"cluster IPs", func(s *Service) { s.ClusterIPs = nil }},
		{"external name", func(s *Service) { s.ExternalName = "x" }},
		{"labels", func(s *Service) { s.Labels = map[string]string{"a": "b"} }},
		{"internal traffic policy", func(s *Service) { s.InternalTrafficPolicy = InternalTrafficLocal }},
		{"traffic distribution", func(s *Service) { s.TrafficDistribution = PreferSameZone }},
	} {
		a, b := base(), base()
		if !a.Equal(b) {
			t.Fatal("equal services differ")
		}
		tc.change(b)
		if a.Equal(b) || b.Equal(a) {
			t.Errorf("%s: a changed service is still equal", tc.desc)
		}
	}
}

// TestEndpointEqual: every field that changes what clients get makes two
// endpoints differ, the cluster ID too (the same address in two clusters
// is two endpoints, and its cluster decides who gets it).
func TestEndpointEqual(t *testing.T) {
	base := func() *Endpoint {
		return &Endpoint{Address: "10.0.0.1", Port: 8080, ServicePortName: "grpc", Health: Healthy}
	}
	for _, tc := range []struct {
		desc   string
		change func(*Endpoint)
	}{
		{"address", func(e *Endpoint) { e.Address = "10.0.0.2" }},
		{"port", func(e *Endpoint) { e.Port = 8081 }},
		{"health", func(e *Endpoint) { e.Health = Unhealthy }},
		{"weight", func(e *Endpoint) { e.Weight = 2 }},
		{"network", func(e *Endpoint) { e.Network = "n2" }},
		{"cluster", func(e *Endpoint) { e.ClusterID = "cluster-b" }},
	} {
		a, b := base(), base()
		if !a.Equal(b) {
			t.Fatal("equal endpoints differ")
		}
		tc.change(b)
		if a.Equal(b) || b.Equal(a) {
			t.Errorf("%s: a changed endpoint is still equal", tc.desc)
		}
	}
}

// TestServiceJSONRoundTrip: debug pages carry services as JSON and
// `meshpilot status` reads them back, so every field, the client-dependent
// policies by name, must survive the trip.
func TestServiceJSONRoundTrip(t *testing.T) {
	for _, svc := range []*Service{
		{Hostname: "a.ns.svc.cluster.local", Name: "a", Namespace: "ns", Ports: []Port{{Name: "grpc", Port: 80, Protocol: GRPC}}},
		{Hostname: "b.ns.svc.cluster.local", Name: "b", Namespace: "ns", Resolution: Passthrough,
			InternalTrafficPolicy: InternalTrafficLocal, TrafficDistribution: PreferSameZone},
		{Hostname: "c.ns.svc.cluster.local", Name: "c", Namespace: "ns", TrafficDistribution: PreferSameNode},
	} {
		b, err := json.Marshal(svc)
		if err != nil {
			t.Fatal(err)
		}
		var got Service
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !got.Equal(svc) {
			t.Errorf("%s read back as %+v", b, got)
		}
	}
	for _, bad := range []string{`{"internalTrafficPolicy":"Nearby"}`, `{"trafficDistribution":"PreferClose"}`} {
		var s Service
		if err := json.Unmarshal([]byte(bad), &s); err == nil {
			t.Errorf("%s read as %+v", bad, s)
		}
	}
}
