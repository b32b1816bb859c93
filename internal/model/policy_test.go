package model

import "testing"

func TestHostRulesChoose(t *testing.T) {
	rule := func(ns string) *DestinationRule { return &DestinationRule{Namespace: ns, Name: "r"} }
	const root = "istio-system"
	for _, tc := range []struct {
		name         string
		rules        []string // namespaces holding a rule for the host
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			byNS := HostRules{}
			for _, ns := range tc.rules {
				byNS[ns] = rule(ns)
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
