package model

import (
	"strings"
	"testing"
)

func TestAppendRuleKeys(t *testing.T) {
	wildcards := []Hostname{"*.ns.svc.cluster.local", "*.example.com", "*.cluster.local", "*"}
	SortWildcards(wildcards)
	for _, tc := range []struct {
		host Hostname
		want []string
	}{
		{"a.ns.svc.cluster.local", []string{"a.ns.svc.cluster.local", "*.ns.svc.cluster.local", "*.cluster.local", "*"}},
		{"b.other.svc.cluster.local", []string{"b.other.svc.cluster.local", "*.cluster.local", "*"}},
		{"api.example.com", []string{"api.example.com", "*.example.com", "*"}},
		{"*.example.com", []string{"*.example.com", "*"}},
		{"localhost", []string{"localhost", "*"}},
		{"*", []string{"*"}},
	} {
		var got []string
		for _, k := range AppendRuleKeys(nil, tc.host, wildcards) {
			if k.Kind != KindDestinationRule {
				t.Fatalf("%v: kind %v", k, k.Kind)
			}
			got = append(got, k.Name)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("AppendRuleKeys(%s) = %v, want %v", tc.host, got, tc.want)
		}
	}
}
