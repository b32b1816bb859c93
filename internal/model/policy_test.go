package model

import (
	"strings"
	"testing"
)

func TestHostRulesChoose(t *testing.T) {
	rule := func(ns string) *DestinationRule { return &DestinationRule{Namespace: ns, Name: "r"} }
	const root = "istio-system"
	for _, tc := range []struct {
		name         string
		rules        []string // namespaces holding a rule for the host, "ns:exportTo"
		client       string
		want         string // namespace of the rule chosen; "" none
		wantByClient bool
	}{
		{"none", nil, "a", "", false},
		{"service's rule, any client", []string{"svc"}, "a", "svc", false},
		{"root's rule, any client", []string{root}, "a", root, false},
		{"client's rule first", []string{"a", "svc", root}, "a", "a", true},
		{"then the service's", []string{"b", "svc", root}, "a", "svc", true},
		{"then the root's", []string{"b", root}, "a", root, true},
		{"another namespace's rule does not apply", []string{"b"}, "a", "", true},
		{"and applies to its own clients", []string{"b"}, "b", "b", true},
		{"a root client looks at the service's first", []string{"svc", root}, root, "svc", true},
		{"a root client without the service's gets the root's", []string{root}, root, root, false},
		{"a client without namespace", []string{"svc"}, "", "svc", false},
		{"exported to its namespace only", []string{"svc:."}, "a", "", true},
		{"exported to its namespace only, for its clients", []string{"svc:."}, "svc", "svc", true},
		{"exported to the client's namespace by name", []string{"svc:a"}, "a", "svc", true},
		{"not exported: the root's next", []string{"svc:~", root}, "a", root, true},
		{"a client's own rule exported to nobody does not apply", []string{"a:~", "svc"}, "a", "svc", true},
		{"exported to all", []string{"svc:*"}, "a", "svc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			byNS := HostRules{}
			for _, spec := range tc.rules {
				// "namespace" or "namespace:exportTo"
				ns, export, _ := strings.Cut(spec, ":")
				r := rule(ns)
				if export != "" {
					r.ExportTo = []string{export}
				}
				byNS[ns] = r
			}
			got, byClient := byNS.Choose("svc", tc.client, root)
			gotNS := ""
			if got != nil {
				gotNS = got.Namespace
			}
			if gotNS != tc.want || byClient != tc.wantByClient {
				t.Errorf("chose %q (byClient %v), want %q (byClient %v)", gotNS, byClient, tc.want, tc.wantByClient)
			}
		})
	}
}

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
