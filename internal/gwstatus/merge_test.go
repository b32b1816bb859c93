package gwstatus

import (
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

const ours = gatewayv1.GatewayController(DefaultControllerName)

var (
	t0  = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now = metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
)

func svc(name string) gatewayv1.ParentReference {
	return gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")), Name: gatewayv1.ObjectName(name)}
}

func cond(typ, status, reason string, gen int64, at metav1.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, ObservedGeneration: gen, LastTransitionTime: at}
}

func accepted(status, reason string) metav1.Condition {
	return cond("Accepted", status, reason, 0, metav1.Time{})
}
func resolved(status, reason string) metav1.Condition {
	return cond("ResolvedRefs", status, reason, 0, metav1.Time{})
}

func entry(c gatewayv1.GatewayController, ref gatewayv1.ParentReference, conds ...metav1.Condition) gatewayv1.RouteParentStatus {
	return gatewayv1.RouteParentStatus{ParentRef: ref, ControllerName: c, Conditions: conds}
}

func TestMergeParents(t *testing.T) {
	other := gatewayv1.GatewayController("example.com/gateway")
	gw := gatewayv1.ParentReference{Name: "gw"}
	okA := ParentStatus{ParentRef: svc("a"), Conditions: []metav1.Condition{accepted("True", "Accepted"), resolved("True", "ResolvedRefs")}}
	for _, tc := range []struct {
		name string
		cur  []gatewayv1.RouteParentStatus
		want []ParentStatus
		gen  int64
		out  []gatewayv1.RouteParentStatus
	}{{
		name: "a new entry: every condition at now, with the generation",
		want: []ParentStatus{okA},
		gen:  3,
		out: []gatewayv1.RouteParentStatus{entry(ours, svc("a"),
			cond("Accepted", "True", "Accepted", 3, now), cond("ResolvedRefs", "True", "ResolvedRefs", 3, now))},
	}, {
		name: "unchanged statuses keep their transition time, a changed one takes now; a new generation is observed",
		cur: []gatewayv1.RouteParentStatus{entry(ours, svc("a"),
			cond("Accepted", "True", "Accepted", 2, t0), cond("ResolvedRefs", "True", "ResolvedRefs", 2, t0))},
		want: []ParentStatus{{ParentRef: svc("a"), Conditions: []metav1.Condition{accepted("True", "Accepted"), resolved("False", "BackendNotFound")}}},
		gen:  3,
		out: []gatewayv1.RouteParentStatus{entry(ours, svc("a"),
			cond("Accepted", "True", "Accepted", 3, t0), cond("ResolvedRefs", "False", "BackendNotFound", 3, now))},
	}, {
		name: "a reason changed without the status keeps the transition time",
		cur:  []gatewayv1.RouteParentStatus{entry(ours, svc("a"), cond("ResolvedRefs", "False", "BackendNotFound", 3, t0))},
		want: []ParentStatus{{ParentRef: svc("a"), Conditions: []metav1.Condition{resolved("False", "RefNotPermitted")}}},
		gen:  3,
		out:  []gatewayv1.RouteParentStatus{entry(ours, svc("a"), cond("ResolvedRefs", "False", "RefNotPermitted", 3, t0))},
	}, {
		name: "another controller's entries stay where they are, even for the same parent",
		cur: []gatewayv1.RouteParentStatus{
			entry(other, gw, cond("Accepted", "True", "Accepted", 1, t0)),
			entry(other, svc("a"), cond("Accepted", "False", "NotAllowedByListeners", 1, t0)),
		},
		want: []ParentStatus{okA},
		gen:  1,
		out: []gatewayv1.RouteParentStatus{
			entry(other, gw, cond("Accepted", "True", "Accepted", 1, t0)),
			entry(other, svc("a"), cond("Accepted", "False", "NotAllowedByListeners", 1, t0)),
			entry(ours, svc("a"), cond("Accepted", "True", "Accepted", 1, now), cond("ResolvedRefs", "True", "ResolvedRefs", 1, now)),
		},
	}, {
		name: "ours stay in place; a parent gone from the desired status loses its entry; a new one is appended",
		cur: []gatewayv1.RouteParentStatus{
			entry(ours, svc("gone"), cond("Accepted", "True", "Accepted", 1, t0)),
			entry(other, gw, cond("Accepted", "True", "Accepted", 1, t0)),
			entry(ours, svc("a"), cond("Accepted", "True", "Accepted", 1, t0), cond("ResolvedRefs", "True", "ResolvedRefs", 1, t0)),
		},
		want: []ParentStatus{{ParentRef: svc("b"), Conditions: []metav1.Condition{accepted("True", "Accepted")}}, okA},
		gen:  1,
		out: []gatewayv1.RouteParentStatus{
			entry(other, gw, cond("Accepted", "True", "Accepted", 1, t0)),
			entry(ours, svc("a"), cond("Accepted", "True", "Accepted", 1, t0), cond("ResolvedRefs", "True", "ResolvedRefs", 1, t0)),
			entry(ours, svc("b"), cond("Accepted", "True", "Accepted", 1, now)),
		},
	}, {
		name: "no desired status: ours removed, others kept",
		cur: []gatewayv1.RouteParentStatus{
			entry(ours, svc("a"), cond("Accepted", "True", "Accepted", 1, t0)),
			entry(other, gw, cond("Accepted", "True", "Accepted", 1, t0)),
		},
		gen: 1,
		out: []gatewayv1.RouteParentStatus{entry(other, gw, cond("Accepted", "True", "Accepted", 1, t0))},
	}, {
		name: "defaults spelled out or omitted name the same parent; a duplicate entry of ours is dropped",
		cur: []gatewayv1.RouteParentStatus{
			entry(ours, gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")),
				Namespace: ptr.To(gatewayv1.Namespace("ns")), Name: "a"}, cond("Accepted", "True", "Accepted", 1, t0)),
			entry(ours, svc("a"), cond("Accepted", "True", "Accepted", 1, t0)),
		},
		want: []ParentStatus{{ParentRef: svc("a"), Conditions: []metav1.Condition{accepted("True", "Accepted")}}},
		gen:  1,
		out:  []gatewayv1.RouteParentStatus{entry(ours, svc("a"), cond("Accepted", "True", "Accepted", 1, t0))},
	}, {
		name: "a port or section makes another parent",
		cur: []gatewayv1.RouteParentStatus{
			entry(ours, gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")),
				Name: "a", Port: ptr.To(gatewayv1.PortNumber(80))}, cond("Accepted", "True", "Accepted", 1, t0)),
		},
		want: []ParentStatus{{ParentRef: svc("a"), Conditions: []metav1.Condition{accepted("True", "Accepted")}}},
		gen:  1,
		out:  []gatewayv1.RouteParentStatus{entry(ours, svc("a"), cond("Accepted", "True", "Accepted", 1, now))},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := mergeParents(tc.cur, tc.want, ours, "ns", tc.gen, now)
			if !apiequality.Semantic.DeepEqual(tc.out, got) {
				t.Errorf("mergeParents:\n%s\nwant:\n%s", dump(got), dump(tc.out))
			}
			// Merging again from what was written changes nothing:
			// a second replica, or a resync, writes nothing.
			if again := mergeParents(got, tc.want, ours, "ns", tc.gen, metav1.NewTime(now.Add(time.Hour))); !apiequality.Semantic.DeepEqual(got, again) {
				t.Errorf("merging the merged result again changed it:\n%s\nwas:\n%s", dump(again), dump(got))
			}
		})
	}
}

func TestSameParentIsDefaultsAware(t *testing.T) {
	for _, tc := range []struct {
		a, b gatewayv1.ParentReference
		same bool
	}{
		{gatewayv1.ParentReference{Name: "gw"}, gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group(gatewayv1.GroupName)), Kind: ptr.To(gatewayv1.Kind("Gateway")), Name: "gw"}, true},
		{gatewayv1.ParentReference{Name: "a"}, svc("a"), false},
		{svc("a"), gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")), Namespace: ptr.To(gatewayv1.Namespace("other")), Name: "a"}, false},
		{svc("a"), gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")), SectionName: ptr.To(gatewayv1.SectionName("http")), Name: "a"}, false},
	} {
		if got := sameParent(tc.a, tc.b, "ns"); got != tc.same {
			t.Errorf("sameParent(%+v, %+v) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

func dump(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func TestCheckControllerName(t *testing.T) {
	for name, ok := range map[string]bool{
		DefaultControllerName:      true,
		"example.com/a/b-c_d~e":    true,
		"mesh-controller":          false, // no domain
		"Example.com/mesh":         false, // upper case domain
		"example.com/":             false,
		"":                         false,
		"example.com/" + long(250): false,
	} {
		if err := CheckControllerName(name); (err == nil) != ok {
			t.Errorf("CheckControllerName(%q) = %v, want ok %v", name, err, ok)
		}
	}
}

func long(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a'
	}
	return string(b)
}
