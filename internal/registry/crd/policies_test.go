package crd

import (
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/model"
)

func TestRuleHost(t *testing.T) {
	for _, tc := range []struct {
		host, ns string
		want     model.Hostname
		ok       bool
	}{
		{"reviews", "bookinfo", "reviews.bookinfo.svc.cluster.local", true},
		{"reviews.bookinfo.svc.cluster.local", "other", "reviews.bookinfo.svc.cluster.local", true},
		// Istio expands only names without a dot.
		{"reviews.bookinfo", "other", "reviews.bookinfo", true},
		{"api.example.com", "ns", "api.example.com", true},
		{"*.bookinfo.svc.cluster.local", "ns", "", false},
		{"*", "ns", "", false},
		{"", "ns", "", false},
	} {
		got, ok := ruleHost(tc.host, tc.ns, "")
		if got != tc.want || ok != tc.ok {
			t.Errorf("ruleHost(%q, %q) = %q, %v; want %q, %v", tc.host, tc.ns, got, ok, tc.want, tc.ok)
		}
	}
}

func TestConvertDestinationRule(t *testing.T) {
	dr := &networkingv1.DestinationRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"},
		Spec: apinetworking.DestinationRule{
			Host:     "reviews",
			ExportTo: []string{"."},
			TrafficPolicy: &apinetworking.TrafficPolicy{
				LoadBalancer: &apinetworking.LoadBalancerSettings{LbPolicy: &apinetworking.LoadBalancerSettings_Simple{
					Simple: apinetworking.LoadBalancerSettings_LEAST_CONN}},
				ConnectionPool: &apinetworking.ConnectionPoolSettings{Http: &apinetworking.ConnectionPoolSettings_HTTPSettings{Http2MaxRequests: 100}},
				PortLevelSettings: []*apinetworking.TrafficPolicy_PortTrafficPolicy{{
					Port: &apinetworking.PortSelector{Number: 9080},
					LoadBalancer: &apinetworking.LoadBalancerSettings{LbPolicy: &apinetworking.LoadBalancerSettings_Simple{
						Simple: apinetworking.LoadBalancerSettings_RANDOM}},
				}},
			},
			Subsets: []*apinetworking.Subset{
				{Name: "v1", Labels: map[string]string{"version": "v1"}},
				{Name: "v2", Labels: map[string]string{"version": "v2"}, TrafficPolicy: &apinetworking.TrafficPolicy{
					ConnectionPool: &apinetworking.ConnectionPoolSettings{Http: &apinetworking.ConnectionPoolSettings_HTTPSettings{Http2MaxRequests: 7}},
				}},
			},
		},
	}
	got, status := ConvertDestinationRule(dr, "")
	if got == nil || !status.OK() {
		t.Fatalf("not converted: %+v", status)
	}
	want := &model.DestinationRule{
		Namespace: "ns", Name: "r", Host: "reviews.ns.svc.cluster.local", ExportTo: []string{"."},
		Policy: &model.TrafficPolicy{LoadBalancer: model.LBLeastRequest, LoadBalancerSet: true, ConnectionPool: &model.ConnectionPool{MaxRequests: 100},
			PortLevel: map[int32]*model.TrafficPolicy{9080: {LoadBalancer: model.LBRandom, LoadBalancerSet: true}}},
		Subsets: []model.Subset{
			{Name: "v1", Labels: model.Labels{"version": "v1"}},
			{Name: "v2", Labels: model.Labels{"version": "v2"}, Policy: &model.TrafficPolicy{ConnectionPool: &model.ConnectionPool{MaxRequests: 7}}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// The merge a cluster gets, as istiod's: the port's settings in place
	// of the rule's (the rule's connection pool does not carry over to
	// port 9080), the subset's blocks over that.
	for _, tc := range []struct {
		port   int32
		subset string
		want   model.TrafficPolicy
		ok     bool
	}{
		{8080, "", model.TrafficPolicy{LoadBalancer: model.LBLeastRequest, LoadBalancerSet: true, ConnectionPool: &model.ConnectionPool{MaxRequests: 100}}, true},
		{9080, "", model.TrafficPolicy{LoadBalancer: model.LBRandom, LoadBalancerSet: true}, true},
		{9080, "v1", model.TrafficPolicy{LoadBalancer: model.LBRandom, LoadBalancerSet: true}, true},
		{9080, "v2", model.TrafficPolicy{LoadBalancer: model.LBRandom, LoadBalancerSet: true, ConnectionPool: &model.ConnectionPool{MaxRequests: 7}}, true},
		{9080, "v3", model.TrafficPolicy{}, false},
	} {
		p, ok := got.PolicyFor(tc.port, tc.subset)
		if !reflect.DeepEqual(p, tc.want) || ok != tc.ok {
			t.Errorf("PolicyFor(%d, %q) = %+v, %v; want %+v, %v", tc.port, tc.subset, p, ok, tc.want, tc.ok)
		}
	}
}

// TestPoliciesSetReportsHosts: a rule's change touches the host it
// applied to and the one it applies to now, and the index follows: of
// rules of one age, the later ones by name merge into the first, and the
// next takes over when it goes.
func TestPoliciesSetReportsHosts(t *testing.T) {
	p := &Policies{opts: PolicyOptions{RootNamespace: "istio-system"}, root: "istio-system", rules: map[string]*model.DestinationRule{},
		naming: map[model.Hostname]map[string]*model.DestinationRule{}, index: model.RuleIndex{ByHost: map[model.Hostname]model.HostRules{}}}
	rule := func(name string, host model.Hostname) *model.DestinationRule {
		return &model.DestinationRule{Namespace: "ns", Name: name, Host: host}
	}
	const a, b = model.Hostname("a.ns.svc.cluster.local"), model.Hostname("b.ns.svc.cluster.local")
	chosen := func(h model.Hostname) string {
		r, _ := p.DestinationRuleFor(h, "ns", "other")
		if r == nil {
			return ""
		}
		return r.Name
	}
	for _, step := range []struct {
		desc      string
		key       string
		rule      *model.DestinationRule
		wantHosts []model.Hostname
		wantA     string
		wantB     string
	}{
		{"a rule for a", "ns/r2", rule("r2", a), []model.Hostname{a}, "r2", ""},
		{"an earlier name for a wins", "ns/r1", rule("r1", a), []model.Hostname{a}, "r1", ""},
		{"r1 moves to b: both hosts change", "ns/r1", rule("r1", b), []model.Hostname{a, b}, "r2", "r1"},
		{"r1 deleted", "ns/r1", nil, []model.Hostname{b}, "r2", ""},
		{"r2 deleted", "ns/r2", nil, []model.Hostname{a}, "", ""},
		{"deleting what is gone changes nothing", "ns/r2", nil, nil, "", ""},
	} {
		got := p.set(step.key, step.rule)
		if !slices.Equal(got, step.wantHosts) || chosen(a) != step.wantA || chosen(b) != step.wantB {
			t.Fatalf("%s: hosts %v, a %q, b %q; want %v, %q, %q", step.desc, got, chosen(a), chosen(b), step.wantHosts, step.wantA, step.wantB)
		}
	}
}
