package model

import (
	"slices"
	"testing"
)

func TestDomainSuffixOrDefault(t *testing.T) {
	for in, want := range map[string]string{"": "cluster.local", "corp.example": "corp.example", "cluster.local": "cluster.local"} {
		if got := DomainSuffixOrDefault(in); got != want {
			t.Errorf("DomainSuffixOrDefault(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestServiceHostname(t *testing.T) {
	tests := []struct {
		name, namespace, suffix string
		want                    Hostname
	}{
		{"reviews", "default", "cluster.local", "reviews.default.svc.cluster.local"},
		{"db", "prod", "corp.example", "db.prod.svc.corp.example"},
		{"db", "prod", "", "db.prod.svc.cluster.local"},
	}
	for _, tt := range tests {
		if got := ServiceHostname(tt.name, tt.namespace, tt.suffix); got != tt.want {
			t.Errorf("ServiceHostname(%q, %q, %q) = %q, want %q", tt.name, tt.namespace, tt.suffix, got, tt.want)
		}
	}
}

func TestClusterName(t *testing.T) {
	tests := []struct {
		key  ClusterKey
		want string
	}{
		{ClusterKey{Port: 80, Host: "a.b.svc.cluster.local"}, "outbound|80||a.b.svc.cluster.local"},
		{ClusterKey{Port: 9080, Subset: "v1", Host: "reviews.default.svc.cluster.local"}, "outbound|9080|v1|reviews.default.svc.cluster.local"},
		{ClusterKey{Port: 65535, Host: "x"}, "outbound|65535||x"},
	}
	for _, tt := range tests {
		name := ClusterName(tt.key.Port, tt.key.Subset, tt.key.Host)
		if name != tt.want {
			t.Errorf("ClusterName(%+v) = %q, want %q", tt.key, name, tt.want)
		}
		if got, ok := ParseClusterName(name); !ok || got != tt.key {
			t.Errorf("ParseClusterName(%q) = %+v, %v; want %+v", name, got, ok, tt.key)
		}
	}
}

func TestParseClusterNameRejectsMalformedNames(t *testing.T) {
	for _, bad := range []string{
		"",
		"outbound",
		"outbound|80",
		"outbound|80|",
		"outbound|80||",
		"outbound|80|v1|",
		"inbound|80||a",
		"Outbound|80||a",
		"outbound|x||a",
		"outbound|||a",
		"outbound|0||a",
		"outbound|-1||a",
		"outbound|65536||a",
		"outbound|99999999999||a",
		"a.b.svc.cluster.local:80",
	} {
		if k, ok := ParseClusterName(bad); ok {
			t.Errorf("ParseClusterName(%q) = %+v, want rejected", bad, k)
		}
	}
}

func TestSplitHostPort(t *testing.T) {
	tests := []struct {
		name string
		host string
		port int32
		ok   bool
	}{
		{"echo:7070", "echo", 7070, true},
		{"echo.ns.svc.cluster.local:80", "echo.ns.svc.cluster.local", 80, true},
		{"echo", "", 0, false},
		{":80", "", 0, false},
		{"echo:", "", 0, false},
		{"echo:0", "", 0, false},
		{"echo:65536", "", 0, false},
		{"echo:http", "", 0, false},
	}
	for _, tt := range tests {
		host, port, ok := SplitHostPort(tt.name)
		if host != tt.host || port != tt.port || ok != tt.ok {
			t.Errorf("SplitHostPort(%q) = %q, %d, %v; want %q, %d, %v", tt.name, host, port, ok, tt.host, tt.port, tt.ok)
		}
	}
}

func TestHostnameCandidates(t *testing.T) {
	tests := []struct {
		host, namespace, suffix string
		want                    []Hostname
	}{
		{"echo", "shop", "cluster.local", []Hostname{"echo", "echo.shop.svc.cluster.local"}},
		{"echo", "", "cluster.local", []Hostname{"echo"}},
		{"echo.prod", "shop", "cluster.local", []Hostname{"echo.prod", "echo.prod.svc.cluster.local"}},
		{"echo.prod.svc", "shop", "corp.example", []Hostname{"echo.prod.svc", "echo.prod.svc.corp.example"}},
		{"echo.prod.other", "shop", "cluster.local", []Hostname{"echo.prod.other"}},
		{"echo.prod.svc.cluster.local", "shop", "cluster.local", []Hostname{"echo.prod.svc.cluster.local"}},
		{"echo", "shop", "", []Hostname{"echo", "echo.shop.svc.cluster.local"}},
	}
	for _, tt := range tests {
		if got := HostnameCandidates(tt.host, tt.namespace, tt.suffix); !slices.Equal(got, tt.want) {
			t.Errorf("HostnameCandidates(%q, %q, %q) = %q, want %q", tt.host, tt.namespace, tt.suffix, got, tt.want)
		}
	}
}

func TestVirtualHostDomains(t *testing.T) {
	kube := &Service{Hostname: "echo.shop.svc.cluster.local", Name: "echo", Namespace: "shop"}
	other := &Service{Hostname: "api.example.com", Name: "api", Namespace: "shop"}
	tests := []struct {
		name   string
		svc    *Service
		suffix string
		want   []string
	}{
		{"kubernetes hostname", kube, "cluster.local", []string{
			"echo.shop.svc.cluster.local", "echo.shop.svc.cluster.local:7070",
			"echo", "echo:7070", "echo.shop", "echo.shop:7070", "echo.shop.svc", "echo.shop.svc:7070",
		}},
		{"default suffix", kube, "", []string{
			"echo.shop.svc.cluster.local", "echo.shop.svc.cluster.local:7070",
			"echo", "echo:7070", "echo.shop", "echo.shop:7070", "echo.shop.svc", "echo.shop.svc:7070",
		}},
		{"another suffix", kube, "corp.example", []string{"echo.shop.svc.cluster.local", "echo.shop.svc.cluster.local:7070"}},
		{"not a kubernetes hostname", other, "cluster.local", []string{"api.example.com", "api.example.com:7070"}},
	}
	for _, tt := range tests {
		if got := VirtualHostDomains(tt.svc, tt.suffix, 7070); !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestInboundListenerName(t *testing.T) {
	tests := []struct {
		hostPort string
		host     string
		port     int32
	}{
		{"10.0.0.7:8080", "10.0.0.7", 8080},
		{"0.0.0.0:50051", "0.0.0.0", 50051},
		{"[::]:8080", "::", 8080},
		{"[fd00::7]:443", "fd00::7", 443},
	}
	for _, tt := range tests {
		name := InboundListenerName(tt.hostPort)
		if want := "xds.istio.io/grpc/lds/inbound/" + tt.hostPort; name != want {
			t.Errorf("InboundListenerName(%q) = %q, want %q", tt.hostPort, name, want)
		}
		host, port, ok := ParseInboundListenerName(name)
		if !ok || host != tt.host || port != tt.port {
			t.Errorf("ParseInboundListenerName(%q) = %q, %d, %v; want %q, %d", name, host, port, ok, tt.host, tt.port)
		}
	}
	for _, bad := range []string{
		"",
		"10.0.0.7:8080",
		"xds.istio.io/grpc/lds/inbound/",
		"xds.istio.io/grpc/lds/inbound/10.0.0.7",
		"xds.istio.io/grpc/lds/inbound/10.0.0.7:0",
		"xds.istio.io/grpc/lds/inbound/10.0.0.7:70000",
		"xds.istio.io/grpc/lds/inbound/::1:8080",
		"xds.istio.io/grpc/lds/inbound/echo.shop:8080",
		"xds.istio.io/grpc/lds/inbound/:8080",
		"xds.istio.io/grpc/lds/outbound/10.0.0.7:8080",
	} {
		if host, port, ok := ParseInboundListenerName(bad); ok {
			t.Errorf("ParseInboundListenerName(%q) = %q, %d, want rejected", bad, host, port)
		}
	}
}
