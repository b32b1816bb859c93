package crd

import (
	"maps"
	"slices"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestVirtualServiceWeightsAreRelative: weights are shares relative to
// the route's other destinations, as Istio reads them (its validation
// refuses only several destinations whose weights are all 0): any total
// applies, a lone destination gets every request whatever its weight,
// and a 0 among others stays in the model for the route to leave out.
func TestVirtualServiceWeightsAreRelative(t *testing.T) {
	for _, tc := range []struct {
		name, route string
		refused     string  // field path; "" applied
		weights     []int32 // as converted
	}{
		{"70 and 20", "[{destination: {host: reviews, subset: v1}, weight: 70}, {destination: {host: reviews, subset: v2}, weight: 20}]", "", []int32{70, 20}},
		{"3 and 1", "[{destination: {host: reviews, subset: v1}, weight: 3}, {destination: {host: reviews, subset: v2}, weight: 1}]", "", []int32{3, 1}},
		{"beyond 100", "[{destination: {host: reviews, subset: v1}, weight: 150}, {destination: {host: reviews, subset: v2}, weight: 50}]", "", []int32{150, 50}},
		{"a lone destination of weight 50", "[{destination: {host: reviews}, weight: 50}]", "", []int32{100}},
		{"a lone destination of weight 0", "[{destination: {host: reviews}, weight: 0}]", "", []int32{100}},
		{"a 0 among others", "[{destination: {host: reviews, subset: v1}, weight: 0}, {destination: {host: reviews, subset: v2}, weight: 5}]", "", []int32{0, 5}},
		{"all 0", "[{destination: {host: reviews, subset: v1}, weight: 0}, {destination: {host: reviews, subset: v2}, weight: 0}]", "spec.http[0].route", nil},
		{"none given among several", "[{destination: {host: reviews, subset: v1}}, {destination: {host: reviews, subset: v2}}]", "spec.http[0].route", nil},
		{"beyond 2^32-1", "[{destination: {host: reviews, subset: v1}, weight: 2147483647}, {destination: {host: reviews, subset: v2}, weight: 2147483647}, {destination: {host: reviews}, weight: 2}]", "spec.http[0].route", nil},
		{"negative", "[{destination: {host: reviews, subset: v1}, weight: -1}, {destination: {host: reviews, subset: v2}, weight: 101}]", "spec.http[0].route[0].weight", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st := ConvertVirtualService(vsFromYAML(t, "vs", "  hosts: [reviews]\n  http:\n  - route: "+tc.route), ConvertOptions{SubsetDefined: definedSubsets})
			refused := ""
			if st.Refused != nil {
				refused = st.Refused.Path
			}
			if refused != tc.refused {
				t.Fatalf("refused %+v, want %q", st.Refused, tc.refused)
			}
			if tc.refused != "" {
				return
			}
			var weights []int32
			for _, d := range got.HTTP[0].Route {
				weights = append(weights, d.Weight)
			}
			if !slices.Equal(weights, tc.weights) {
				t.Errorf("weights %v, want %v", weights, tc.weights)
			}
		})
	}
}

// TestVirtualServiceSourceMatches: sourceLabels and sourceNamespace are
// kept on their match for the route generator to check against each
// client, for gRPC clients and Envoy alike; a match that names gateways
// does not check them, as in istiod, and says so.
func TestVirtualServiceSourceMatches(t *testing.T) {
	const to = "\n    route: [{destination: {host: reviews}}]"
	for _, tc := range []struct {
		name, match string
		labels      model.Labels
		namespace   string
		ignored     []string // paths, for both kinds of client
	}{
		{"sourceLabels", "{sourceLabels: {app: tester}}", model.Labels{"app": "tester"}, "", nil},
		{"sourceNamespace", "{sourceNamespace: qa}", nil, "qa", nil},
		{"both, with a header", "{sourceLabels: {app: tester}, sourceNamespace: qa, headers: {x: {exact: z}}}", model.Labels{"app": "tester"}, "qa", nil},
		{"with the mesh gateway", "{gateways: [mesh], sourceLabels: {app: tester}}", nil, "", []string{"spec.http[0].match[0].sourceLabels"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st := ConvertVirtualService(vsFromYAML(t, "vs", "  hosts: [reviews]\n  http:\n  - match: ["+tc.match+"]"+to), ConvertOptions{})
			if st.Refused != nil || got == nil || len(got.HTTP) != 1 || len(got.HTTP[0].Match) != 1 {
				t.Fatalf("converted %+v, status %+v: want one route with its match", got, st)
			}
			m := got.HTTP[0].Match[0]
			if !maps.Equal(m.SourceLabels, tc.labels) || m.SourceNamespace != tc.namespace {
				t.Errorf("source labels %v, namespace %q; want %v, %q", m.SourceLabels, m.SourceNamespace, tc.labels, tc.namespace)
			}
			var grpc, envoy []string
			for _, f := range st.IgnoredGRPC {
				grpc = append(grpc, f.Path)
			}
			for _, f := range st.IgnoredEnvoy {
				envoy = append(envoy, f.Path)
			}
			if !slices.Equal(grpc, tc.ignored) || !slices.Equal(envoy, tc.ignored) {
				t.Errorf("ignored for gRPC %v, for Envoy %v; want %v for both", grpc, envoy, tc.ignored)
			}
		})
	}
}
