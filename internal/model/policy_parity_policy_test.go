package model

import (
	"reflect"
	"testing"
)

// TestPolicyForMergesAsIstiod: the policy of a cluster is built as
// istiod's MergeSubsetTrafficPolicy builds it. A port's settings replace
// the policy they are in as a whole (what they leave out is the
// default, not the top level's); a subset's policy replaces the blocks
// it sets (loadBalancer, connectionPool, outlierDetection, tls), each
// whole; a subset's port settings replace everything.
func TestPolicyForMergesAsIstiod(t *testing.T) {
	pool := func(n int32) *ConnectionPool { return &ConnectionPool{MaxRequests: n} }
	hash := &ConsistentHash{HeaderName: "x-user"}
	mtls := &ClientTLS{Mode: TLSIstioMutual}
	eject := &OutlierDetection{MaxEjectionPercent: 10}
	local := &LocalityLB{Disabled: true}
	r := &DestinationRule{
		Policy: &TrafficPolicy{ConsistentHash: hash, ConnectionPool: pool(100), TLS: mtls, OutlierDetection: eject,
			PortLevel: map[int32]*TrafficPolicy{9080: {LoadBalancer: LBLeastRequest}}},
		Subsets: []Subset{
			{Name: "none"},
			{Name: "lb", Policy: &TrafficPolicy{LoadBalancer: LBRoundRobin}},
			{Name: "empty-lb", Policy: &TrafficPolicy{LoadBalancerSet: true}},
			{Name: "locality", Policy: &TrafficPolicy{LocalityLB: local}},
			{Name: "pool", Policy: &TrafficPolicy{ConnectionPool: &ConnectionPool{MaxConnections: 3}}},
			{Name: "ports", Policy: &TrafficPolicy{LoadBalancer: LBRandom, ConnectionPool: pool(7),
				PortLevel: map[int32]*TrafficPolicy{8080: {TLS: &ClientTLS{Mode: TLSSimple}}}}},
		},
	}
	top := TrafficPolicy{ConsistentHash: hash, ConnectionPool: pool(100), TLS: mtls, OutlierDetection: eject}
	for _, tc := range []struct {
		desc   string
		port   int32
		subset string
		want   TrafficPolicy
	}{
		{"a port without settings: the top level", 8080, "", top},
		{"a port's settings replace the top level whole: no limit, plaintext, no ejection", 9080, "", TrafficPolicy{LoadBalancer: LBLeastRequest}},
		{"a subset without a policy: the rule's for the port", 9080, "none", TrafficPolicy{LoadBalancer: LBLeastRequest}},
		{"a subset's loadBalancer replaces the hash", 8080, "lb",
			TrafficPolicy{LoadBalancer: LBRoundRobin, ConnectionPool: pool(100), TLS: mtls, OutlierDetection: eject}},
		{"an empty loadBalancer block still replaces the hash", 8080, "empty-lb",
			TrafficPolicy{LoadBalancerSet: true, ConnectionPool: pool(100), TLS: mtls, OutlierDetection: eject}},
		{"a subset's localityLbSetting alone replaces the whole loadBalancer", 8080, "locality",
			TrafficPolicy{LocalityLB: local, ConnectionPool: pool(100), TLS: mtls, OutlierDetection: eject}},
		{"a subset's connectionPool replaces the rule's whole", 8080, "pool",
			TrafficPolicy{ConsistentHash: hash, ConnectionPool: &ConnectionPool{MaxConnections: 3}, TLS: mtls, OutlierDetection: eject}},
		{"a subset's policy over the rule's port settings", 9080, "ports",
			TrafficPolicy{LoadBalancer: LBRandom, ConnectionPool: pool(7)}},
		{"a subset's port settings replace everything", 8080, "ports", TrafficPolicy{TLS: &ClientTLS{Mode: TLSSimple}}},
	} {
		got, ok := r.PolicyFor(tc.port, tc.subset)
		if !ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: PolicyFor(%d, %q) = %+v, %v; want %+v", tc.desc, tc.port, tc.subset, got, ok, tc.want)
		}
	}
	if _, ok := r.PolicyFor(8080, "v9"); ok {
		t.Error("a subset the rule does not define has a policy")
	}
	var none *DestinationRule
	if got, ok := none.PolicyFor(8080, ""); !ok || !reflect.DeepEqual(got, TrafficPolicy{}) {
		t.Errorf("no rule: %+v, %v", got, ok)
	}
}

// TestHashForAsIstiod: the hash policy of a route is looked up as
// istiod's HashForHTTPDestination does, not as clusters merge: the
// subset's port-level hash, the subset's, the rule's port-level hash,
// the rule's; port-level hashes only for a destination that names its
// port.
func TestHashForAsIstiod(t *testing.T) {
	h := func(name string) *ConsistentHash { return &ConsistentHash{HeaderName: name} }
	r := &DestinationRule{
		Policy: &TrafficPolicy{ConsistentHash: h("top"), PortLevel: map[int32]*TrafficPolicy{
			9080: {ConsistentHash: h("port")},
			7070: {LoadBalancer: LBLeastRequest},
		}},
		Subsets: []Subset{
			{Name: "plain"},
			{Name: "own", Policy: &TrafficPolicy{ConsistentHash: h("subset")}},
			{Name: "ports", Policy: &TrafficPolicy{PortLevel: map[int32]*TrafficPolicy{9080: {ConsistentHash: h("subset-port")}}}},
		},
	}
	for _, tc := range []struct {
		port   int32
		subset string
		want   string
	}{
		{0, "", "top"},
		{9080, "", "port"},
		{7070, "", "top"}, // a port-level setting without a hash keeps the rule's
		{0, "plain", "top"},
		{9080, "plain", "port"},
		{9080, "own", "subset"},
		{0, "ports", "top"},
		{9080, "ports", "subset-port"},
	} {
		got := r.HashFor(tc.port, tc.subset)
		if got == nil || got.HeaderName != tc.want {
			t.Errorf("HashFor(%d, %q) = %+v, want %s", tc.port, tc.subset, got, tc.want)
		}
	}
	if got := (&DestinationRule{}).HashFor(9080, ""); got != nil {
		t.Errorf("a rule without a hash: %+v", got)
	}
}
