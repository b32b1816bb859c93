package model

import (
	"strings"
	"testing"
)

// TestPolicyForLoadBalancer: loadBalancer is one field in Istio's merge
// of port and subset settings: a simple algorithm replaces a consistent
// hash and a consistent hash a simple algorithm.
func TestPolicyForLoadBalancer(t *testing.T) {
	hash := &ConsistentHash{HeaderName: "x-user"}
	r := &DestinationRule{
		Policy: &TrafficPolicy{ConsistentHash: hash, MaxRequests: 5, PortLevel: map[int32]*TrafficPolicy{
			9090: {LoadBalancer: LBLeastRequest},
		}},
		Subsets: []Subset{{Name: "rr", Policy: &TrafficPolicy{LoadBalancer: LBRoundRobin}}, {Name: "same"}},
	}
	for _, tc := range []struct {
		port   int32
		subset string
		want   TrafficPolicy
	}{
		{8080, "", TrafficPolicy{ConsistentHash: hash, MaxRequests: 5}},
		{9090, "", TrafficPolicy{LoadBalancer: LBLeastRequest, MaxRequests: 5}},
		{8080, "rr", TrafficPolicy{LoadBalancer: LBRoundRobin, MaxRequests: 5}},
		{8080, "same", TrafficPolicy{ConsistentHash: hash, MaxRequests: 5}},
	} {
		got, _ := r.PolicyFor(tc.port, tc.subset)
		if got.LoadBalancer != tc.want.LoadBalancer || got.ConsistentHash != tc.want.ConsistentHash || got.MaxRequests != tc.want.MaxRequests {
			t.Errorf("PolicyFor(%d, %q) = %+v, want %+v", tc.port, tc.subset, got, tc.want)
		}
	}
}

func TestDestinationRuleKeys(t *testing.T) {
	for _, tc := range []struct {
		host Hostname
		want []string
	}{
		{"a.ns.svc.cluster.local", []string{"a.ns.svc.cluster.local", "*.ns.svc.cluster.local", "*.svc.cluster.local", "*.cluster.local", "*.local", "*"}},
		{"api.example.com", []string{"api.example.com", "*.example.com", "*.com", "*"}},
		{"*.example.com", []string{"*.example.com", "*.com", "*"}},
		{"localhost", []string{"localhost", "*"}},
	} {
		var got []string
		for _, k := range DestinationRuleKeys(tc.host) {
			if k.Kind != KindDestinationRule {
				t.Fatalf("%v: kind %v", k, k.Kind)
			}
			got = append(got, k.Name)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("DestinationRuleKeys(%s) = %v, want %v", tc.host, got, tc.want)
		}
	}
}
