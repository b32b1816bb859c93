package model

import "testing"

// TestServiceVisibleTo checks exportTo as Istio reads it, for a service of
// namespace "shop": "*" or nothing every namespace, "." its own, "~"
// none, other entries namespace names; and that only a list without "*"
// makes visibility depend on the client (ExportedToAll).
func TestServiceVisibleTo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		exportTo []string
		visible  map[string]bool // client namespace: sees it
		toAll    bool
	}{
		{"unset", nil, map[string]bool{"shop": true, "web": true}, true},
		{"empty", []string{}, map[string]bool{"shop": true, "web": true}, true},
		{"star", []string{"*"}, map[string]bool{"shop": true, "web": true}, true},
		{"dot", []string{"."}, map[string]bool{"shop": true, "web": false}, false},
		{"tilde hides it from its own namespace too", []string{"~"}, map[string]bool{"shop": false, "web": false}, false},
		{"a name", []string{"web"}, map[string]bool{"shop": false, "web": true, "other": false}, false},
		{"dot and a name", []string{".", "web"}, map[string]bool{"shop": true, "web": true, "other": false}, false},
		{"star among names", []string{"web", "*"}, map[string]bool{"shop": true, "web": true, "other": true}, true},
		{"own namespace by name", []string{"shop"}, map[string]bool{"shop": true, "web": false}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &Service{Hostname: "cart.shop.svc.cluster.local", Name: "cart", Namespace: "shop", ExportTo: tc.exportTo}
			for ns, want := range tc.visible {
				if got := svc.VisibleTo(ns); got != want {
					t.Errorf("exportTo %q: VisibleTo(%q) = %v, want %v", tc.exportTo, ns, got, want)
				}
			}
			if got := svc.ExportedToAll(); got != tc.toAll {
				t.Errorf("exportTo %q: ExportedToAll = %v, want %v", tc.exportTo, got, tc.toAll)
			}
		})
	}
}
