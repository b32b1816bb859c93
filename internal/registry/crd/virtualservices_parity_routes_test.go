package crd

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// TestRoutesKeepTheOlderVirtualService: of two VirtualServices of one
// namespace for one host, the older by creationTimestamp routes it, as
// istiod keeps it, whichever comes first by name or arrives first; equal
// timestamps (whole seconds) fall back to the name.
func TestRoutesKeepTheOlderVirtualService(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const reviews = model.Hostname("reviews.ns.svc.cluster.local")
	for _, tc := range []struct {
		desc       string
		aAge, bAge time.Duration // before base
		order      string        // the order the objects arrive in
		want       string
	}{
		{"b older, a first by name: b", 0, time.Hour, "ab", "b"},
		{"b older, arriving last: b", 0, time.Hour, "ba", "b"},
		{"a older: a", time.Hour, 0, "ba", "a"},
		{"the same second: a, first by name", 0, 0, "ba", "a"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			store := newMemStore()
			reporter := configstatus.NewReporter()
			routes := NewRoutes(store, RouteOptions{Status: reporter})
			ages := map[string]time.Duration{"a": tc.aAge, "b": tc.bAge}
			for _, name := range strings.Split(tc.order, "") {
				vs := vsFromYAML(t, name, "  hosts: [reviews]\n  http:\n  - route: [{destination: {host: reviews}}]")
				vs.CreationTimestamp = metav1.NewTime(base.Add(-ages[name]))
				store.applyVS(vs)
			}
			got, _ := routes.VirtualServiceFor(reviews, "ns")
			if got == nil || got.Name != tc.want {
				t.Fatalf("routed by %v, want %s", got, tc.want)
			}
			loser := map[string]string{"a": "b", "b": "a"}[tc.want]
			st, _ := reporter.Get(configstatus.Ref{Kind: "VirtualService", Namespace: "ns", Name: loser})
			if st.Refused == nil || !strings.Contains(st.Refused.Why, "VirtualService ns/"+tc.want+", older") {
				t.Errorf("%s's status %+v, want refused for the older %s", loser, st, tc.want)
			}
			if st, _ := reporter.Get(configstatus.Ref{Kind: "VirtualService", Namespace: "ns", Name: tc.want}); st.Refused != nil {
				t.Errorf("%s refused: %+v", tc.want, st.Refused)
			}
		})
	}
}
