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
