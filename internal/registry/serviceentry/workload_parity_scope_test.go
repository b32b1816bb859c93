package serviceentry

import (
	"fmt"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestKubernetesEndpointPorts: the port of a WorkloadEntry behind a
// Kubernetes Service, as istiod picks it (serviceInstanceFromWorkloadInstance).
func TestKubernetesEndpointPorts(t *testing.T) {
	numeric := model.Port{Name: "grpc", Port: 80, TargetPort: 8080}
	named := model.Port{Name: "grpc", Port: 80, TargetPortName: "serving"}
	for _, tc := range []struct {
		name  string
		ports map[string]uint32
		port  model.Port
		want  string // "" no endpoint
	}{
		{"numeric target, no ports: the target", nil, numeric, "8080"},
		{"numeric target, the port's name mapped", map[string]uint32{"grpc": 9000}, numeric, "9000"},
		{"numeric target, another name mapped: the target", map[string]uint32{"serving": 7000}, numeric, "8080"},
		{"named target, mapped", map[string]uint32{"serving": 7000}, named, "7000"},
		{"named target, the target's name before the port's", map[string]uint32{"grpc": 9000, "serving": 7000}, named, "7000"},
		{"named target, only the port's name: none", map[string]uint32{"grpc": 9000}, named, ""},
		{"named target, no ports: none", nil, named, ""},
	} {
		w := &workload{address: "10.0.0.1", ports: tc.ports}
		got := ""
		if ep := w.kubernetesEndpoint(tc.port); ep != nil {
			got = fmt.Sprint(ep.Port)
		}
		if got != tc.want {
			t.Errorf("%s: port %q, want %q", tc.name, got, tc.want)
		}
	}
}
