package main

import (
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/debug"
	"github.com/meshpilot/meshpilot/internal/model"
)

// A host two namespaces define is a row per definition, each with its own
// endpoints' counts.
func TestStatusServicesShowsEachDefinition(t *testing.T) {
	def := func(ns string, ports int) *model.Service {
		s := &model.Service{Hostname: "api.example.com", Name: "api.example.com", Namespace: ns}
		for i := range ports {
			s.Ports = append(s.Ports, model.Port{Name: "p" + string(rune('0'+i)), Port: int32(443 + i), Protocol: model.GRPC})
		}
		return s
	}
	svc := model.WithDefinitions(def("a", 1), []model.Definition{{Service: def("b", 2)}})
	eps := []debug.ServiceEndpoints{
		{Hostname: "api.example.com", Namespace: "a", Ports: []debug.PortEndpoints{{Port: 443, Endpoints: []*model.Endpoint{{Address: "10.0.0.1"}}}}},
		{Hostname: "api.example.com", Namespace: "b", Ports: []debug.PortEndpoints{{Port: 443, Endpoints: []*model.Endpoint{
			{Address: "10.0.0.2"}, {Address: "10.0.0.3", Health: model.Unhealthy}}}}},
	}
	var out strings.Builder
	if err := printServices(&out, []model.Service{*svc}, eps); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and two rows:\n%s", out.String())
	}
	for i, want := range [][]string{{"api.example.com", "a", "443/GRPC", "1/1"}, {"api.example.com", "b", "443/GRPC,444/GRPC", "1/2"}} {
		if got := strings.Fields(lines[i+1]); got[0] != want[0] || got[1] != want[1] || got[3] != want[2] || got[4] != want[3] {
			t.Errorf("row %d %q, want %q", i, got, want)
		}
	}
}
