package kube

import (
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

func ipPod(name string, ips ...string) *kubeconv.PodInfo {
	return &kubeconv.PodInfo{Namespace: "ns", Name: name, IPs: ips}
}

func ipSlice(name string, ips ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
	return s
}

// ipEvent is one informer event: add (old nil), delete (new nil) or
// update.
type ipEvent struct{ old, new any }

func TestIPKeys(t *testing.T) {
	tests := []struct {
		name   string
		ips    func(any) []string
		events []ipEvent
		// want maps each IP looked up to the keys expected, in any order.
		want map[string][]string
	}{{
		name:   "add",
		ips:    podIPs,
		events: []ipEvent{{nil, ipPod("a", "10.0.0.1", "fd00::1")}},
		want:   map[string][]string{"10.0.0.1": {"ns/a"}, "fd00::1": {"ns/a"}, "10.0.0.2": nil},
	}, {
		name: "update changing the IP",
		ips:  podIPs,
		events: []ipEvent{
			{nil, ipPod("a", "10.0.0.1")},
			{ipPod("a", "10.0.0.1"), ipPod("a", "10.0.0.2")},
		},
		want: map[string][]string{"10.0.0.1": nil, "10.0.0.2": {"ns/a"}},
	}, {
		name: "update keeping one IP of two",
		ips:  podIPs,
		events: []ipEvent{
			{nil, ipPod("a", "10.0.0.1", "fd00::1")},
			{ipPod("a", "10.0.0.1", "fd00::1"), ipPod("a", "10.0.0.1")},
		},
		want: map[string][]string{"10.0.0.1": {"ns/a"}, "fd00::1": nil},
	}, {
		name: "pod gets its IP late",
		ips:  podIPs,
		events: []ipEvent{
			{nil, ipPod("a")},
			{ipPod("a"), ipPod("a", "10.0.0.1")},
		},
		want: map[string][]string{"10.0.0.1": {"ns/a"}},
	}, {
		name: "delete",
		ips:  podIPs,
		events: []ipEvent{
			{nil, ipPod("a", "10.0.0.1")},
			{ipPod("a", "10.0.0.1"), nil},
		},
		want: map[string][]string{"10.0.0.1": nil},
	}, {
		name: "tombstone",
		ips:  podIPs,
		events: []ipEvent{
			{nil, ipPod("a", "10.0.0.1")},
			{cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: ipPod("a", "10.0.0.1")}, nil},
		},
		want: map[string][]string{"10.0.0.1": nil},
	}, {
		name: "shared IP: host network pods",
		ips:  podIPs,
		events: []ipEvent{
			{nil, ipPod("a", "10.0.0.1")},
			{nil, ipPod("b", "10.0.0.1")},
			{nil, ipPod("c", "10.0.0.1")},
		},
		want: map[string][]string{"10.0.0.1": {"ns/a", "ns/b", "ns/c"}},
	}, {
		name: "shared IP: one of three leaves",
		ips:  podIPs,
		events: []ipEvent{
			{nil, ipPod("a", "10.0.0.1")},
			{nil, ipPod("b", "10.0.0.1")},
			{nil, ipPod("c", "10.0.0.1")},
			{ipPod("b", "10.0.0.1"), nil},
		},
		want: map[string][]string{"10.0.0.1": {"ns/a", "ns/c"}},
	}, {
		name: "shared IP: back to one, then none",
		ips:  podIPs,
		events: []ipEvent{
			{nil, ipPod("a", "10.0.0.1")},
			{nil, ipPod("b", "10.0.0.1")},
			{ipPod("a", "10.0.0.1"), nil},
			{ipPod("b", "10.0.0.1"), ipPod("b", "10.0.0.2")},
		},
		want: map[string][]string{"10.0.0.1": nil, "10.0.0.2": {"ns/b"}},
	}, {
		// A relist replays every object as an update, changed or not,
		// and deletes those gone as tombstones.
		name: "relist",
		ips:  podIPs,
		events: []ipEvent{
			{nil, ipPod("a", "10.0.0.1")},
			{nil, ipPod("b", "10.0.0.2")},
			{ipPod("a", "10.0.0.1"), ipPod("a", "10.0.0.1")},
			{cache.DeletedFinalStateUnknown{Key: "ns/b", Obj: ipPod("b", "10.0.0.2")}, nil},
		},
		want: map[string][]string{"10.0.0.1": {"ns/a"}, "10.0.0.2": nil},
	}, {
		name: "add twice",
		ips:  podIPs,
		events: []ipEvent{
			{nil, ipPod("a", "10.0.0.1")},
			{nil, ipPod("a", "10.0.0.1")},
			{nil, ipPod("b", "10.0.0.1")},
			{nil, ipPod("b", "10.0.0.1")},
		},
		want: map[string][]string{"10.0.0.1": {"ns/a", "ns/b"}},
	}, {
		name: "slices sharing an IP during a rollout",
		ips:  sliceIPs,
		events: []ipEvent{
			{nil, ipSlice("old", "10.0.0.1", "10.0.0.2")},
			{nil, ipSlice("new", "10.0.0.2", "10.0.0.3")},
			{ipSlice("old", "10.0.0.1", "10.0.0.2"), ipSlice("old", "10.0.0.1")},
		},
		want: map[string][]string{"10.0.0.1": {"ns/old"}, "10.0.0.2": {"ns/new"}, "10.0.0.3": {"ns/new"}},
	}, {
		name: "slice deleted",
		ips:  sliceIPs,
		events: []ipEvent{
			{nil, ipSlice("old", "10.0.0.1", "10.0.0.2")},
			{nil, ipSlice("new", "10.0.0.2")},
			{ipSlice("old", "10.0.0.1", "10.0.0.2"), nil},
		},
		want: map[string][]string{"10.0.0.1": nil, "10.0.0.2": {"ns/new"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newIPKeys(tt.ips)
			for _, ev := range tt.events {
				switch {
				case ev.old == nil:
					x.added(ev.new)
				case ev.new == nil:
					x.deleted(ev.old)
				default:
					x.updated(ev.old, ev.new)
				}
			}
			for ip, want := range tt.want {
				got := x.keys(ip, nil)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("keys(%s) = %v, want %v", ip, got, want)
				}
			}
			for ip, keys := range x.shared {
				if len(keys) < 2 {
					t.Errorf("shared[%s] = %v: fewer than two keys", ip, keys)
				}
				if _, ok := x.one[ip]; ok {
					t.Errorf("%s is in both maps", ip)
				}
			}
		})
	}
}

// TestIPKeysObjects checks that lookups read the store and drop what the
// index has not caught up with: an object deleted or readdressed in the
// store before its event reached the index.
func TestIPKeysObjects(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	x := newIPKeys(podIPs)
	for _, p := range []*kubeconv.PodInfo{ipPod("a", "10.0.0.1"), ipPod("b", "10.0.0.1"), ipPod("c", "10.0.0.1")} {
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
		x.added(p)
	}
	// b moved to another IP and c was deleted; their events are pending.
	if err := store.Update(ipPod("b", "10.0.0.9")); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ipPod("c", "10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	var got []string
	x.objects(store, "10.0.0.1", func(o any) bool {
		got = append(got, o.(*kubeconv.PodInfo).Name)
		return true
	})
	if !slices.Equal(got, []string{"a"}) {
		t.Fatalf("objects(10.0.0.1) = %v, want [a]", got)
	}
	var n int
	if x.objects(store, "10.0.0.1", func(any) bool { n++; return false }) || n != 1 {
		t.Fatalf("objects went on after yield returned false (%d calls)", n)
	}
}
