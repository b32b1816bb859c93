package push

import (
	"slices"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/model"
)

func TestRequestKinds(t *testing.T) {
	at := time.Unix(1, 0)
	for _, tc := range []struct {
		name   string
		events []model.Event
		want   []model.KeyKind
	}{
		{"nothing", nil, nil},
		{"endpoints alone", []model.Event{
			{Kind: model.EndpointsChanged, Hostname: "a.ns.svc.cluster.local"},
			{Kind: model.EndpointsChanged, Hostname: "b.ns.svc.cluster.local"},
		}, []model.KeyKind{model.KindEndpoints}},
		{"a service change includes its endpoints", []model.Event{
			{Kind: model.EndpointsChanged, Hostname: "a.ns.svc.cluster.local"},
			{Kind: model.ServiceChanged, Hostname: "a.ns.svc.cluster.local", Namespace: "ns"},
		}, []model.KeyKind{model.KindService}},
		{"every kind once, in order", []model.Event{
			{Kind: model.ConfigChanged, Config: model.VirtualServiceKey("a.ns.svc.cluster.local")},
			{Kind: model.ConfigChanged, Config: model.VirtualServiceKey("b.ns.svc.cluster.local")},
			{Kind: model.ConfigChanged, Config: model.SecurityNamespaceKey("ns")},
			{Kind: model.ConfigChanged, Config: model.MeshRetryKey},
			{Kind: model.ConfigChanged, Config: model.DestinationRuleKey("a.ns.svc.cluster.local")},
			{Kind: model.ServiceDeleted, Hostname: "c.ns.svc.cluster.local", Namespace: "ns"},
			{Kind: model.EndpointsChanged, Hostname: "a.ns.svc.cluster.local"},
		}, []model.KeyKind{model.KindService, model.KindEndpoints, model.KindMeshConfig,
			model.KindDestinationRule, model.KindVirtualService, model.KindSecurity}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Request
			for _, ev := range tc.events {
				r.Add(ev, at)
			}
			if got := r.Kinds(); !slices.Equal(got, tc.want) {
				t.Fatalf("Kinds() = %v, want %v", got, tc.want)
			}
		})
	}
}
