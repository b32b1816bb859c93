package crd

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
)

// TestHandlerSkipsNoOps feeds a kind's handler the updates a relist and a
// status write produce: neither may reach the queue; a spec, label or
// annotation change, an add and a delete (also as a tombstone) do.
func TestHandlerSkipsNoOps(t *testing.T) {
	dr := func(rv string, gen int64, labels, annotations map[string]string) *networkingv1.DestinationRule {
		return &networkingv1.DestinationRule{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "dr", ResourceVersion: rv, Generation: gen, Labels: labels, Annotations: annotations,
		}}
	}
	base := dr("1", 1, map[string]string{"a": "1"}, nil)
	want := Event{DestinationRule, "ns", "dr"}
	for _, tc := range []struct {
		name  string
		call  func(h cache.ResourceEventHandlerFuncs)
		queue bool
	}{
		{"relist replay (same resourceVersion)", func(h cache.ResourceEventHandlerFuncs) {
			h.UpdateFunc(base, dr("1", 1, map[string]string{"a": "1"}, nil))
		}, false},
		{"status write (same generation)", func(h cache.ResourceEventHandlerFuncs) {
			h.UpdateFunc(base, dr("2", 1, map[string]string{"a": "1"}, nil))
		}, false},
		{"spec change", func(h cache.ResourceEventHandlerFuncs) {
			h.UpdateFunc(base, dr("2", 2, map[string]string{"a": "1"}, nil))
		}, true},
		{"label change", func(h cache.ResourceEventHandlerFuncs) {
			h.UpdateFunc(base, dr("2", 1, map[string]string{"a": "2"}, nil))
		}, true},
		{"annotation change", func(h cache.ResourceEventHandlerFuncs) {
			h.UpdateFunc(base, dr("2", 1, map[string]string{"a": "1"}, map[string]string{"x": "y"}))
		}, true},
		{"add", func(h cache.ResourceEventHandlerFuncs) { h.AddFunc(base) }, true},
		{"delete", func(h cache.ResourceEventHandlerFuncs) { h.DeleteFunc(base) }, true},
		{"delete seen as a tombstone", func(h cache.ResourceEventHandlerFuncs) {
			h.DeleteFunc(cache.DeletedFinalStateUnknown{Key: "ns/dr", Obj: base})
		}, true},
		{"tombstone without its object", func(h cache.ResourceEventHandlerFuncs) {
			h.DeleteFunc(cache.DeletedFinalStateUnknown{Key: "ns/dr"})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Registry{queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[Event]())}
			defer r.queue.ShutDown()
			tc.call(r.handler(DestinationRule))
			if !tc.queue {
				if n := r.queue.Len(); n != 0 {
					t.Fatalf("%d keys queued, want none", n)
				}
				return
			}
			if n := r.queue.Len(); n != 1 {
				t.Fatalf("%d keys queued, want 1", n)
			}
			if got, _ := r.queue.Get(); got != want {
				t.Fatalf("queued %v, want %v", got, want)
			}
		})
	}
}

// TestCRDServes: only an Established CRD that serves v1 starts a kind.
func TestCRDServes(t *testing.T) {
	// Built through stripCRD, so the test also covers what it keeps.
	crd := func(established bool, versions ...apiextensionsv1.CustomResourceDefinitionVersion) any {
		c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "destinationrules." + Group}}
		c.Spec.Versions = versions
		status := apiextensionsv1.ConditionFalse
		if established {
			status = apiextensionsv1.ConditionTrue
		}
		c.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: status}}
		out, err := stripCRD(c)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	v := func(name string, served bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: served,
			Schema: &apiextensionsv1.CustomResourceValidation{}}
	}
	for _, tc := range []struct {
		name string
		obj  any
		want bool
	}{
		{"established, v1 served", crd(true, v("v1alpha3", true), v("v1", true)), true},
		{"not established", crd(false, v("v1", true)), false},
		{"v1 not served", crd(true, v("v1alpha3", true), v("v1", false)), false},
		{"no v1 (Istio before 1.22)", crd(true, v("v1alpha3", true), v("v1beta1", true)), false},
		{"a tombstone", cache.DeletedFinalStateUnknown{Key: "x"}, false},
	} {
		if got := crdServes(tc.obj); got != tc.want {
			t.Errorf("%s: crdServes = %v, want %v", tc.name, got, tc.want)
		}
	}
	if c := crd(true, v("v1", true)).(*apiextensionsv1.CustomResourceDefinition); c.Spec.Versions[0].Schema != nil {
		t.Error("stripCRD kept the schema")
	}
}
