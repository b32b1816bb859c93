package model

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// FuzzClusterName holds the cluster naming contract,
// "outbound|<port>|<subset>|<FQDN>", in both directions. Any name:
// ParseClusterName does not panic, and what it reads is a port in range
// and a host, which ClusterName writes back as the same name but for the
// spelling of the port ("080" is read as 80). Any parts a cluster can
// have (a port in range, a host, a subset without "|"): ClusterName then
// ParseClusterName gives them back.
func FuzzClusterName(f *testing.F) {
	for _, s := range []struct {
		name   string
		port   int32
		subset string
		host   string
	}{
		{"outbound|80||a.b.svc.cluster.local", 80, "", "a.b.svc.cluster.local"},
		{"outbound|9080|v1|reviews.default.svc.cluster.local", 9080, "v1", "reviews.default.svc.cluster.local"},
		{"outbound|65535||x", 65535, "", "x"},
		{"outbound|443|tls-v2|payments.example.com", 443, "tls-v2", "payments.example.com"},
		{"outbound|080||a", 1, "", "*.example.com"},
		{"outbound|0||a", 0, "", "a"},
		{"outbound|80|v1|", 65536, "v1", ""},
		{"inbound|80||a", -1, "a|b", "a|b"},
		{"outbound|+80|||", 80, "|", "|"},
		{"outbound|80|v1|a|b", 80, "v1", "a|b"},
		{"", 0, "", ""},
	} {
		f.Add(s.name, s.port, s.subset, s.host)
	}
	f.Fuzz(func(t *testing.T, name string, port int32, subset, host string) {
		if k, ok := ParseClusterName(name); ok {
			if k.Port < 1 || k.Port > 65535 || k.Host == "" {
				t.Fatalf("ParseClusterName(%q) = %+v", name, k)
			}
			canonical := ClusterName(k.Port, k.Subset, k.Host)
			if back, ok := ParseClusterName(canonical); !ok || back != k {
				t.Fatalf("ParseClusterName(%q) = %+v, written back as %q, read again as %+v, %v", name, k, canonical, back, ok)
			}
			portText := strings.Split(name, "|")[1]
			if n, err := strconv.Atoi(portText); err != nil || int32(n) != k.Port ||
				strings.Replace(name, "|"+portText+"|", "|"+strconv.Itoa(int(k.Port))+"|", 1) != canonical {
				t.Fatalf("ParseClusterName(%q) = %+v, which is %q", name, k, canonical)
			}
		}

		if port < 1 || port > 65535 || host == "" || strings.Contains(subset, "|") {
			return // no cluster has such parts
		}
		want := ClusterKey{Port: port, Subset: subset, Host: Hostname(host)}
		name = ClusterName(port, subset, Hostname(host))
		if got, ok := ParseClusterName(name); !ok || got != want {
			t.Fatalf("ClusterName(%+v) = %q, read as %+v, %v", want, name, got, ok)
		}
	})
}

// FuzzListenerName holds the two listener name forms gRPC clients and
// servers ask for: "<host>:<port>" (SplitHostPort, then the hostnames
// the host may designate) and "xds.istio.io/grpc/lds/inbound/<ip>:<port>"
// (ParseInboundListenerName). Any name: no panic, and what is read is a
// port in range and a non-empty host, the first candidate hostname being
// the host itself. Any host and port: the client name of them reads back
// as them; any IP address (the fuzzer's bytes, 4 or 16) and port: the
// inbound name reads back as the address, written as Go writes it.
func FuzzListenerName(f *testing.F) {
	for _, s := range []struct {
		name      string
		host      string
		port      int32
		namespace string
		ip        []byte
	}{
		{"greeter:7070", "greeter", 7070, "demo", []byte{10, 0, 0, 7}},
		{"greeter.demo:7070", "greeter.demo", 7070, "", []byte{127, 0, 0, 1}},
		{"greeter.demo.svc:7070", "greeter.demo.svc", 7070, "demo", net.IPv6loopback},
		{"greeter.demo.svc.cluster.local:7070", "greeter.demo.svc.cluster.local", 1, "demo", net.IPv6unspecified},
		{"xds.istio.io/grpc/lds/inbound/10.0.0.7:8080", "[::1]", 8080, "demo", []byte{0, 0, 0, 0}},
		{"xds.istio.io/grpc/lds/inbound/[::]:8080", "a:b", 65535, "x", net.ParseIP("2001:db8::1")},
		{"xds.istio.io/grpc/lds/inbound/0.0.0.0:8080", "", 0, "", nil},
		{"xds.istio.io/grpc/lds/inbound/[fe80::1%eth0]:8080", ":", 65536, "", []byte{1, 2, 3}},
		{":80", "x", -1, "", nil},
		{"a:080", "a", 80, "", nil},
		{"a:", "a.b.c.d", 80, "", nil},
		{"", ".", 80, ".", nil},
	} {
		f.Add(s.name, s.host, s.port, s.namespace, s.ip)
	}
	f.Fuzz(func(t *testing.T, name, host string, port int32, namespace string, ip []byte) {
		if h, p, ok := SplitHostPort(name); ok {
			if h == "" || p < 1 || p > 65535 {
				t.Fatalf("SplitHostPort(%q) = %q, %d", name, h, p)
			}
			candidates := HostnameCandidates(h, namespace, "")
			if len(candidates) == 0 || candidates[0] != Hostname(h) {
				t.Fatalf("HostnameCandidates(%q, %q) = %q", h, namespace, candidates)
			}
			for _, c := range candidates[1:] {
				if !strings.HasSuffix(string(c), ".svc."+DefaultDomainSuffix) {
					t.Fatalf("HostnameCandidates(%q, %q) = %q", h, namespace, candidates)
				}
			}
		}
		if h, p, ok := ParseInboundListenerName(name); ok {
			if _, err := netip.ParseAddr(h); err != nil || p < 1 || p > 65535 {
				t.Fatalf("ParseInboundListenerName(%q) = %q, %d", name, h, p)
			}
		}

		if port < 1 || port > 65535 {
			return
		}
		portText := strconv.Itoa(int(port))
		if host != "" {
			if h, p, ok := SplitHostPort(host + ":" + portText); !ok || h != host || p != port {
				t.Fatalf("SplitHostPort(%q) = %q, %d, %v", host+":"+portText, h, p, ok)
			}
		}
		addr, ok := netip.AddrFromSlice(ip)
		if !ok {
			return
		}
		name = InboundListenerName(net.JoinHostPort(addr.String(), portText))
		if h, p, ok := ParseInboundListenerName(name); !ok || h != addr.String() || p != port {
			t.Fatalf("ParseInboundListenerName(%q) = %q, %d, %v", name, h, p, ok)
		}
	})
}
