package model

import (
	"testing"
	"time"
)

// TestMTLSFor: a workload's mode on a port, resolved as Istio's
// ComposePeerAuthentication resolves it.
func TestMTLSFor(t *testing.T) {
	const root = "istio-system"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pa := func(ns, name string, age int, selector Labels, mode MTLSMode, ports map[uint32]MTLSMode) *PeerAuthentication {
		// age: how many hours before t0 it was created (older first).
		return &PeerAuthentication{Namespace: ns, Name: name, Created: t0.Add(-time.Duration(age) * time.Hour),
			Selector: selector, Mode: mode, PortModes: ports}
	}
	app := map[string]string{"app": "a"}
	for _, tc := range []struct {
		desc   string
		peer   []*PeerAuthentication
		ns     string
		labels map[string]string
		port   uint32
		want   MTLSMode
		found  bool
	}{
		{desc: "no policy: PERMISSIVE, not found", ns: "apps", labels: app, port: 8080, want: MTLSPermissive},
		{desc: "the mesh's",
			peer: []*PeerAuthentication{pa(root, "default", 1, nil, MTLSStrict, nil)},
			ns:   "apps", labels: app, port: 8080, want: MTLSStrict, found: true},
		{desc: "the mesh's UNSET is Istio's default",
			peer: []*PeerAuthentication{pa(root, "default", 1, nil, MTLSUnset, nil)},
			ns:   "apps", labels: app, port: 8080, want: MTLSPermissive, found: true},
		{desc: "the namespace's replaces the mesh's",
			peer: []*PeerAuthentication{pa(root, "default", 1, nil, MTLSStrict, nil), pa("apps", "default", 1, nil, MTLSDisable, nil)},
			ns:   "apps", labels: app, port: 8080, want: MTLSDisable, found: true},
		{desc: "the namespace's UNSET inherits the mesh's",
			peer: []*PeerAuthentication{pa(root, "default", 1, nil, MTLSStrict, nil), pa("apps", "default", 1, nil, MTLSUnset, nil)},
			ns:   "apps", labels: app, port: 8080, want: MTLSStrict, found: true},
		{desc: "another namespace's does not apply",
			peer: []*PeerAuthentication{pa("other", "default", 1, nil, MTLSStrict, nil)},
			ns:   "apps", labels: app, port: 8080, want: MTLSPermissive},
		{desc: "the workload's replaces the namespace's",
			peer: []*PeerAuthentication{pa("apps", "default", 1, nil, MTLSStrict, nil), pa("apps", "a", 1, Labels{"app": "a"}, MTLSPermissive, nil)},
			ns:   "apps", labels: app, port: 8080, want: MTLSPermissive, found: true},
		{desc: "a selector that does not match",
			peer: []*PeerAuthentication{pa("apps", "b", 1, Labels{"app": "b"}, MTLSStrict, nil)},
			ns:   "apps", labels: app, port: 8080, want: MTLSPermissive},
		{desc: "a selector in the root namespace is ignored",
			peer: []*PeerAuthentication{pa(root, "a", 1, Labels{"app": "a"}, MTLSStrict, nil)},
			ns:   "apps", labels: app, port: 8080, want: MTLSPermissive},
		{desc: "the oldest namespace policy wins",
			peer: []*PeerAuthentication{pa("apps", "new", 1, nil, MTLSDisable, nil), pa("apps", "old", 2, nil, MTLSStrict, nil)},
			ns:   "apps", labels: app, port: 8080, want: MTLSStrict, found: true},
		{desc: "the oldest workload policy wins, even UNSET",
			peer: []*PeerAuthentication{pa(root, "default", 3, nil, MTLSStrict, nil),
				pa("apps", "new", 1, Labels{"app": "a"}, MTLSDisable, nil), pa("apps", "old", 2, Labels{"app": "a"}, MTLSUnset, nil)},
			ns: "apps", labels: app, port: 8080, want: MTLSStrict, found: true},
		{desc: "portLevelMtls for the port",
			peer: []*PeerAuthentication{pa("apps", "a", 1, Labels{"app": "a"}, MTLSStrict, map[uint32]MTLSMode{8080: MTLSDisable})},
			ns:   "apps", labels: app, port: 8080, want: MTLSDisable, found: true},
		{desc: "portLevelMtls of another port",
			peer: []*PeerAuthentication{pa("apps", "a", 1, Labels{"app": "a"}, MTLSStrict, map[uint32]MTLSMode{9090: MTLSDisable})},
			ns:   "apps", labels: app, port: 8080, want: MTLSStrict, found: true},
		{desc: "portLevelMtls UNSET inherits the workload's",
			peer: []*PeerAuthentication{pa("apps", "a", 1, Labels{"app": "a"}, MTLSDisable, map[uint32]MTLSMode{8080: MTLSUnset})},
			ns:   "apps", labels: app, port: 8080, want: MTLSDisable, found: true},
		{desc: "portLevelMtls over a namespace's mode through an UNSET workload policy",
			peer: []*PeerAuthentication{pa("apps", "default", 2, nil, MTLSStrict, nil),
				pa("apps", "a", 1, Labels{"app": "a"}, MTLSUnset, map[uint32]MTLSMode{8080: MTLSPermissive})},
			ns: "apps", labels: app, port: 8080, want: MTLSPermissive, found: true},
		{desc: "a workload of the root namespace: its policy without selector is the mesh's",
			peer: []*PeerAuthentication{pa(root, "default", 1, nil, MTLSDisable, nil)},
			ns:   root, labels: app, port: 8080, want: MTLSDisable, found: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, found := MTLSFor(SecurityPolicies{RootNamespace: root, Peer: tc.peer}, tc.ns, tc.labels, tc.port)
			if got != tc.want || found != tc.found {
				t.Fatalf("MTLSFor: %v (found %v), want %v (found %v)", got, found, tc.want, tc.found)
			}
		})
	}
}
