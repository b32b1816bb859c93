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

// TestAppendRuleKeysWithSelectors: the wildcard hosts of rules with a
// workloadSelector are named as those of plain rules are, once each.
func TestAppendRuleKeysWithSelectors(t *testing.T) {
	var sel SelectorRules
	sel.Add(&DestinationRule{Namespace: "ns", Name: "a", Host: "*.ns.svc.cluster.local", Selector: &Labels{"app": "a"}})
	sel.Add(&DestinationRule{Namespace: "ns", Name: "b", Host: "*.example.com", Selector: &Labels{"app": "b"}})
	plain := []Hostname{"*.ns.svc.cluster.local"}
	var got []string
	for _, k := range AppendRuleKeysWithSelectors(nil, "a.ns.svc.cluster.local", plain, &sel) {
		got = append(got, k.Name)
	}
	if want := "a.ns.svc.cluster.local *.ns.svc.cluster.local *"; strings.Join(got, " ") != want {
		t.Errorf("keys %v, want %s", got, want)
	}
	got = nil
	for _, k := range AppendRuleKeysWithSelectors(nil, "api.example.com", plain, &sel) {
		got = append(got, k.Name)
	}
	if want := "api.example.com *.example.com *"; strings.Join(got, " ") != want {
		t.Errorf("keys %v, want %s", got, want)
	}
}
