package model

import (
	"testing"
	"time"
)

// TestHostVirtualServicesChooseGateway: Gateway API routes (GAMMA) beside
// VirtualServices, as istiod picks among them for a client.
func TestHostVirtualServicesChooseGateway(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	older := t0.Add(-time.Hour)
	// svc.shop is the host's Service; the routes below name it.
	producer := &VirtualService{Namespace: "shop", Name: "gw", Gateway: true, Producer: true, Created: t0}
	consumer := &VirtualService{Namespace: "web", Name: "gw", Gateway: true, Created: t0}
	publicVS := &VirtualService{Namespace: "ops", Name: "vs", Created: older}
	shopVS := &VirtualService{Namespace: "shop", Name: "vs", Created: older}
	privateVS := &VirtualService{Namespace: "web", Name: "vs", ExportTo: []string{"."}, Created: t0}
	for _, tc := range []struct {
		name         string
		vss          []*VirtualService
		client       string
		want         *VirtualService
		wantByClient bool
	}{
		{"a producer route alone: every client", []*VirtualService{producer}, "web", producer, false},
		{"a consumer route: its namespace", []*VirtualService{producer, consumer}, "web", consumer, true},
		{"a consumer route: not another namespace's clients", []*VirtualService{producer, consumer}, "other", producer, true},
		{"a consumer route alone: nothing elsewhere", []*VirtualService{consumer}, "other", nil, true},
		{"an older public VirtualService beats a producer route elsewhere", []*VirtualService{producer, publicVS}, "other", publicVS, true},
		{"a producer route wins in its own namespace", []*VirtualService{producer, publicVS}, "shop", producer, true},
		{"a consumer route wins over a public VirtualService", []*VirtualService{consumer, publicVS}, "web", consumer, true},
		{"a private VirtualService beats the consumer route", []*VirtualService{consumer, privateVS}, "web", privateVS, true},
		{"routes and a VirtualService of one namespace both stand", []*VirtualService{producer, shopVS}, "other", shopVS, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h HostVirtualServices
			for _, vs := range tc.vss {
				if lost := h.Add(vs); lost != nil {
					t.Fatalf("%s/%s lost", lost.Namespace, lost.Name)
				}
			}
			got, byClient := h.Choose(tc.client)
			if got != tc.want || byClient != tc.wantByClient {
				t.Errorf("Choose(%q) = %v, %v; want %v, %v", tc.client, got, byClient, tc.want, tc.wantByClient)
			}
		})
	}
}

// TestHostVirtualServicesInSkipsGateway: a namespace's routes are not its
// VirtualService for the host-claim check.
func TestHostVirtualServicesInSkipsGateway(t *testing.T) {
	gw := &VirtualService{Namespace: "ns", Name: "gw", Gateway: true}
	var h HostVirtualServices
	h.Add(gw)
	if got := h.In("ns"); got != nil {
		t.Fatalf("In = %v, want nil", got)
	}
	vs := &VirtualService{Namespace: "ns", Name: "vs"}
	h.Add(vs)
	if got := h.In("ns"); got != vs {
		t.Fatalf("In = %v, want the VirtualService", got)
	}
}
