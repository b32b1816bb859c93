package model

import (
	"reflect"
	"testing"
)

func TestClusterLocal(t *testing.T) {
	settings := func(s ...ServiceSettings) *MeshSettings { return &MeshSettings{ServiceSettings: s} }
	local := func(hosts ...Hostname) ServiceSettings { return ServiceSettings{Hosts: hosts, ClusterLocal: true} }
	global := func(hosts ...Hostname) ServiceSettings { return ServiceSettings{Hosts: hosts} }
	for _, tc := range []struct {
		desc   string
		mesh   *MeshSettings
		suffix string
		host   Hostname
		want   bool
	}{
		{"default: kube-system services", settings(), "", "kube-dns.kube-system.svc.cluster.local", true},
		{"default: the API server's service", settings(), "", "kubernetes.default.svc.cluster.local", true},
		{"default: others are not", settings(), "", "reviews.default.svc.cluster.local", false},
		{"default under another suffix", settings(), "corp.example", "kube-dns.kube-system.svc.corp.example", true},
		{"defaults follow the suffix", settings(), "corp.example", "kube-dns.kube-system.svc.cluster.local", false},
		{"an exact host", settings(local("reviews.default.svc.cluster.local")), "", "reviews.default.svc.cluster.local", true},
		{"an exact host matches only itself", settings(local("reviews.default.svc.cluster.local")), "", "ratings.default.svc.cluster.local", false},
		{"a namespace wildcard", settings(local("*.shop.svc.cluster.local")), "", "cart.shop.svc.cluster.local", true},
		{"a namespace wildcard, other namespace", settings(local("*.shop.svc.cluster.local")), "", "cart.shop2.svc.cluster.local", false},
		{"*: every host", settings(local("*")), "", "api.example.com", true},
		{"the exact host wins over a wildcard", settings(local("*"), global("reviews.default.svc.cluster.local")), "", "reviews.default.svc.cluster.local", false},
		{"the longer wildcard wins", settings(global("*.svc.cluster.local"), local("*.shop.svc.cluster.local")), "", "cart.shop.svc.cluster.local", true},
		{"the longer wildcard wins, listed first", settings(local("*.shop.svc.cluster.local"), global("*.svc.cluster.local")), "", "cart.shop.svc.cluster.local", true},
		{"* global keeps the more specific defaults", settings(global("*")), "", "kube-dns.kube-system.svc.cluster.local", true},
		{"a later setting of a host replaces an earlier one", settings(local("a.ns.svc.cluster.local"), global("a.ns.svc.cluster.local")), "", "a.ns.svc.cluster.local", false},
		{"the default overridden for a host", settings(global("kubernetes.default.svc.cluster.local")), "", "kubernetes.default.svc.cluster.local", false},
		// Istio removes the wildcard default when any of its hosts is
		// set global.
		{"one kube-system service global: the default goes", settings(global("kube-dns.kube-system.svc.cluster.local")), "", "metrics.kube-system.svc.cluster.local", false},
		{"the kube-system wildcard global", settings(global("*.kube-system.svc.cluster.local")), "", "kube-dns.kube-system.svc.cluster.local", false},
		{"a wildcard host: an equal wildcard", settings(local("*.example.com")), "", "*.example.com", true},
		{"a wildcard host: a wider wildcard", settings(local("*.com")), "", "*.example.com", true},
		{"a wildcard host is not matched by an exact one", settings(local("a.example.com")), "", "*.example.com", false},
		{"a wildcard host: a narrower wildcard does not match", settings(local("*.a.example.com")), "", "*.example.com", false},
	} {
		if got := tc.mesh.ClusterLocal(tc.host, tc.suffix); got != tc.want {
			t.Errorf("%s: ClusterLocal(%s) = %v, want %v; table %+v", tc.desc, tc.host, got, tc.want, tc.mesh.ClusterLocalHosts(tc.suffix))
		}
	}
}

func TestClusterLocalHostsOrder(t *testing.T) {
	m := &MeshSettings{ServiceSettings: []ServiceSettings{
		{Hosts: []Hostname{"*", "*.shop.svc.cluster.local"}},
		{Hosts: []Hostname{"cart.shop.svc.cluster.local", "*.svc.cluster.local"}, ClusterLocal: true},
	}}
	want := ClusterLocalHosts{
		{Host: "kubernetes.default.svc.cluster.local", ClusterLocal: true, Default: true},
		{Host: "cart.shop.svc.cluster.local", ClusterLocal: true},
		{Host: "*.kube-system.svc.cluster.local", ClusterLocal: true, Default: true},
		{Host: "*.shop.svc.cluster.local"},
		{Host: "*.svc.cluster.local", ClusterLocal: true},
		{Host: "*"},
	}
	if got := m.ClusterLocalHosts(""); !reflect.DeepEqual(got, want) {
		t.Errorf("table\n%+v\nwant\n%+v", got, want)
	}
}
