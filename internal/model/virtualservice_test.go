package model

import (
	"strings"
	"testing"
	"time"
)

func TestHostVirtualServicesChoose(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		vss          []string // "ns/name[:exportTo,...][@age]": a larger age is older
		client       string
		want         string // ns/name chosen; "" none
		wantByClient bool
	}{
		{"none", nil, "a", "", false},
		{"one for all", []string{"svc/r"}, "a", "svc/r", false},
		{"public ones: the oldest", []string{"a/r", "b/r@2"}, "a", "b/r", false},
		{"equal age: by name, then namespace", []string{"b/x", "a/y", "c/x"}, "z", "b/x", false},
		{"private to the client's namespace first", []string{"b/r@9", "a/r:."}, "a", "a/r", true},
		{"private to another namespace is not seen", []string{"b/r:."}, "a", "", true},
		{"exported by name before public", []string{"c/r@9", "b/r:a"}, "a", "b/r", true},
		{"private before exported by name", []string{"b/r:a@9", "a/r:a"}, "a", "a/r", true},
		{"exported to none", []string{"a/r:~"}, "a", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h HostVirtualServices
			for _, s := range tc.vss {
				s, age, _ := strings.Cut(s, "@")
				s, export, _ := strings.Cut(s, ":")
				ns, name, _ := strings.Cut(s, "/")
				vs := &VirtualService{Namespace: ns, Name: name, Created: t0}
				if age != "" {
					vs.Created = t0.Add(-time.Duration(age[0]-'0') * time.Hour)
				}
				if export != "" {
					vs.ExportTo = strings.Split(export, ",")
				}
				if lost := h.Add(vs); lost != nil {
					t.Fatalf("%s lost", s)
				}
			}
			got, byClient := h.Choose(tc.client)
			gotName := ""
			if got != nil {
				gotName = got.Namespace + "/" + got.Name
			}
			if gotName != tc.want || byClient != tc.wantByClient {
				t.Errorf("Choose(%q) = %q, %v; want %q, %v", tc.client, gotName, byClient, tc.want, tc.wantByClient)
			}
		})
	}
}

// TestHostVirtualServicesAdd: of one namespace's VirtualServices for a
// host, the first by name stays, whatever the order they come in.
func TestHostVirtualServicesAdd(t *testing.T) {
	a, b, other := &VirtualService{Namespace: "ns", Name: "a"}, &VirtualService{Namespace: "ns", Name: "b"}, &VirtualService{Namespace: "x", Name: "z"}
	var h HostVirtualServices
	if lost := h.Add(b); lost != nil {
		t.Fatalf("first lost")
	}
	if lost := h.Add(other); lost != nil {
		t.Fatalf("another namespace's lost")
	}
	if lost := h.Add(a); lost != b {
		t.Fatalf("lost %v, want b", lost)
	}
	if lost := h.Add(b); lost != b || h.In("ns") != a || len(h) != 2 {
		t.Fatalf("b came back: lost %v, in force %v", lost, h.In("ns"))
	}
}
