package audit

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

func objMeta(ns, name, uid, rv string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + uid), ResourceVersion: rv}
}

func TestCompareObjects(t *testing.T) {
	slice := func(name, uid, rv string) any {
		return &discoveryv1.EndpointSlice{ObjectMeta: objMeta("ns", name, uid, rv)}
	}
	pod := func(rv string, labels map[string]string, ready bool) any {
		m := objMeta("ns", "p", "1", rv)
		m.Labels = labels
		return &kubeconv.PodInfo{ObjectMeta: m, IPs: []string{"192.0.2.1"}, Ready: ready}
	}
	node := func(rv, zone string) any {
		m := objMeta("", "n1", "1", rv)
		m.Labels = map[string]string{corev1.LabelTopologyZone: zone}
		return &corev1.Node{ObjectMeta: m}
	}
	for _, tc := range []struct {
		name           string
		kind           string
		cached, listed []any
		want           []Difference
	}{
		{name: "equal", kind: "EndpointSlice",
			cached: []any{slice("a", "1", "10"), slice("b", "2", "11")},
			listed: []any{slice("b", "2", "11"), slice("a", "1", "10")}},
		{name: "lost update", kind: "EndpointSlice",
			cached: []any{slice("a", "1", "10")}, listed: []any{slice("a", "1", "12")},
			want: []Difference{{Kind: "EndpointSlice", Object: "ns/a", Field: "metadata.resourceVersion", Cache: "10", List: "12"}}},
		{name: "lost add and delete", kind: "EndpointSlice",
			cached: []any{slice("gone", "1", "10")}, listed: []any{slice("new", "2", "12")},
			want: []Difference{
				{Kind: "EndpointSlice", Object: "ns/gone", Cache: "resourceVersion 10", List: absent},
				{Kind: "EndpointSlice", Object: "ns/new", Cache: absent, List: "resourceVersion 12"},
			}},
		{name: "recreated under the same name", kind: "EndpointSlice",
			cached: []any{slice("a", "1", "10")}, listed: []any{slice("a", "2", "12")},
			want: []Difference{
				{Kind: "EndpointSlice", Object: "ns/a", Field: "metadata.uid", Cache: "uid-1", List: "uid-2"},
				{Kind: "EndpointSlice", Object: "ns/a", Field: "metadata.resourceVersion", Cache: "10", List: "12"},
			}},
		{name: "pod: what the transform keeps", kind: "Pod",
			cached: []any{pod("5", map[string]string{"v": "1"}, true)},
			listed: []any{pod("7", map[string]string{"v": "2"}, false)},
			want: []Difference{
				{Kind: "Pod", Object: "ns/p", Field: "metadata.resourceVersion", Cache: "5", List: "7"},
				{Kind: "Pod", Object: "ns/p", Field: "metadata.labels", Cache: `{"v":"1"}`, List: `{"v":"2"}`},
				{Kind: "Pod", Object: "ns/p", Field: "status.conditions[Ready]", Cache: "true", List: "false"},
			}},
		{name: "pod: same resourceVersion, other content", kind: "Pod",
			cached: []any{pod("5", nil, true)}, listed: []any{pod("5", map[string]string{"a": "b"}, true)},
			want: []Difference{{Kind: "Pod", Object: "ns/p", Field: "metadata.labels", Cache: "null", List: `{"a":"b"}`}}},
		{name: "node labels, cluster scoped", kind: "Node",
			cached: []any{node("3", "z1")}, listed: []any{node("4", "z2")},
			want: []Difference{
				{Kind: "Node", Object: "n1", Field: "metadata.resourceVersion", Cache: "3", List: "4"},
				{Kind: "Node", Object: "n1", Field: "metadata.labels", Cache: `{"topology.kubernetes.io/zone":"z1"}`, List: `{"topology.kubernetes.io/zone":"z2"}`},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertDifferences(t, compareObjects(tc.kind, tc.cached, tc.listed), tc.want)
		})
	}
}

func TestCompareModels(t *testing.T) {
	svc := func(name string, ports ...model.Port) *model.Service {
		return &model.Service{Hostname: model.ServiceHostname(name, "ns", ""), Name: name, Namespace: "ns", Ports: ports}
	}
	http := model.Port{Name: "http", Port: 80, TargetPort: 8080, Protocol: model.HTTP}
	grpc := model.Port{Name: "grpc", Port: 90, TargetPort: 9090, Protocol: model.GRPC}
	ep := func(addr string, h model.Health, zone string) *model.Endpoint {
		return &model.Endpoint{Address: addr, Port: 8080, ServicePortName: "http", Health: h, Namespace: "ns", Locality: model.Locality{Region: "r", Zone: zone}}
	}
	store := func(fill func(s *model.Store)) *model.Store {
		s := model.NewStore()
		fill(s)
		return s
	}
	ref := serviceRef{"ns", "a"}
	for _, tc := range []struct {
		name          string
		live, rebuilt *model.Store
		want          []Difference
	}{
		{name: "equal",
			live:    store(func(s *model.Store) { s.Update(svc("a", http), []*model.Endpoint{ep("192.0.2.1", model.Healthy, "z")}) }),
			rebuilt: store(func(s *model.Store) { s.Update(svc("a", http), []*model.Endpoint{ep("192.0.2.1", model.Healthy, "z")}) })},
		{name: "endpoint fields and presence",
			live: store(func(s *model.Store) {
				s.Update(svc("a", http), []*model.Endpoint{ep("192.0.2.1", model.Healthy, "z1"), ep("192.0.2.2", model.Healthy, "z")})
			}),
			rebuilt: store(func(s *model.Store) {
				s.Update(svc("a", http), []*model.Endpoint{ep("192.0.2.1", model.Unhealthy, "z2"), ep("192.0.2.3", model.Healthy, "z")})
			}),
			want: []Difference{
				{Kind: KindModelEndpoint, Object: "a.ns.svc.cluster.local:80", Field: "endpoint 192.0.2.1 health", Cache: "HEALTHY", List: "UNHEALTHY", service: ref},
				{Kind: KindModelEndpoint, Object: "a.ns.svc.cluster.local:80", Field: "endpoint 192.0.2.1 locality", Cache: "r/z1/", List: "r/z2/", service: ref},
				{Kind: KindModelEndpoint, Object: "a.ns.svc.cluster.local:80", Field: "endpoint 192.0.2.2", Cache: "present", List: absent, service: ref},
				{Kind: KindModelEndpoint, Object: "a.ns.svc.cluster.local:80", Field: "endpoint 192.0.2.3", Cache: absent, List: "present", service: ref},
			}},
		{name: "service fields and presence",
			live: store(func(s *model.Store) {
				s.Update(svc("a", http), nil)
				s.Update(svc("gone"), nil)
			}),
			rebuilt: store(func(s *model.Store) {
				s.Update(svc("a", http, grpc), nil)
				s.Update(svc("new"), nil)
			}),
			want: []Difference{
				{Kind: KindModelService, Object: "a.ns.svc.cluster.local", Field: "ports",
					Cache: `[{"name":"http","port":80,"targetPort":8080,"protocol":"HTTP"}]`,
					List:  `[{"name":"http","port":80,"targetPort":8080,"protocol":"HTTP"},{"name":"grpc","port":90,"targetPort":9090,"protocol":"GRPC"}]`, service: ref},
				{Kind: KindModelService, Object: "gone.ns.svc.cluster.local", Cache: "present", List: absent, service: serviceRef{"ns", "gone"}},
				{Kind: KindModelService, Object: "new.ns.svc.cluster.local", Cache: absent, List: "present", service: serviceRef{"ns", "new"}},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertDifferences(t, compareModels(tc.live.View(), tc.rebuilt.View()), tc.want)
		})
	}
}

// TestTrackCountsAuditsInARow: a difference keeps the time an audit first
// found it while audits keep finding it, and starts again after an audit
// that did not.
func TestTrackCountsAuditsInARow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := func() []Difference {
		return []Difference{{Kind: "Pod", Object: "ns/p", Field: "metadata.labels", Cache: "x"}}
	}
	seen := map[diffKey]tracked{}
	for i, tc := range []struct {
		diffs      []Difference
		since      time.Time
		audits     int
		remembered int
	}{
		{d(), t0, 1, 1},
		{d(), t0, 2, 1},
		{nil, time.Time{}, 0, 0},
		{d(), t0.Add(3 * time.Minute), 1, 1},
	} {
		now := t0.Add(time.Duration(i) * time.Minute)
		seen = track(seen, tc.diffs, now)
		if len(seen) != tc.remembered {
			t.Fatalf("audit %d: %d remembered, want %d", i, len(seen), tc.remembered)
		}
		if len(tc.diffs) > 0 && (tc.diffs[0].Audits != tc.audits || !tc.diffs[0].Since.Equal(tc.since)) {
			t.Fatalf("audit %d: %+v, want %d audits since %v", i, tc.diffs[0], tc.audits, tc.since)
		}
	}
}

func assertDifferences(t *testing.T, got, want []Difference) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("difference %d = %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// TestBothReads: only what the reads before and after the LIST both find
// is a difference, with the later read's values.
func TestBothReads(t *testing.T) {
	lag := Difference{Kind: "Pod", Object: "ns/a", Field: "metadata.resourceVersion", Cache: "4", List: "5"}
	lost := Difference{Kind: "Pod", Object: "ns/b", Field: "metadata.resourceVersion", Cache: "1", List: "3"}
	ahead := Difference{Kind: "Pod", Object: "ns/c", Field: "metadata.resourceVersion", Cache: "9", List: "8"}
	lostLater := lost
	lostLater.Cache = "2"
	assertDifferences(t, both([]Difference{lag, lost}, []Difference{lostLater, ahead}), []Difference{lostLater})
}
