package crd

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
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
	// Read as the informer reads it (JSON of a whole CRD, decoded with the
	// group's scheme, then stripCRD), so the test also covers what the
	// narrow type and the transform keep.
	decode := crdDecoder(t)
	crd := func(established bool, versions ...apiextensionsv1.CustomResourceDefinitionVersion) any {
		c := &apiextensionsv1.CustomResourceDefinition{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: "destinationrules." + Group},
		}
		c.Spec.Versions = versions
		status := apiextensionsv1.ConditionFalse
		if established {
			status = apiextensionsv1.ConditionTrue
		}
		c.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: status}}
		out, err := stripCRD(decode(c))
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
		if got := crdServes(tc.obj, Version); got != tc.want {
			t.Errorf("%s: crdServes = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCRDRead: of a whole CRD as kubectl applies it (schemas, names,
// conditions of other types, the last-applied annotation, managed
// fields), the informer keeps its name, UID, resourceVersion, served
// versions and conditions alone.
func TestCRDRead(t *testing.T) {
	c := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "destinationrules." + Group, UID: "u1", ResourceVersion: "7",
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1<<16)},
			Labels:        map[string]string{"app": "istio-pilot"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "destinationrules", Kind: "DestinationRule"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1alpha3", Served: true, Schema: &apiextensionsv1.CustomResourceValidation{
					OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Description: strings.Repeat("d", 1<<16)}}},
				{Name: "v1", Served: true, Storage: true},
			},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue, Message: "no conflicts found"},
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue, Reason: "InitialNamesAccepted"},
		}},
	}
	got, err := stripCRD(crdDecoder(t)(c))
	if err != nil {
		t.Fatal(err)
	}
	want := &crdObject{
		ObjectMeta: metav1.ObjectMeta{Name: "destinationrules." + Group, UID: "u1", ResourceVersion: "7"},
		Spec:       crdSpec{Versions: []crdVersion{{Name: "v1alpha3", Served: true}, {Name: "v1", Served: true}}},
		Status:     crdStatus{Conditions: []crdCondition{{Type: "NamesAccepted", Status: "True"}, {Type: "Established", Status: "True"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read\n%+v\nwant\n%+v", got, want)
	}
	if again, _ := stripCRD(got); !reflect.DeepEqual(again, want) {
		t.Errorf("stripCRD twice gives %+v", again)
	}
	if cp := want.DeepCopyObject(); !reflect.DeepEqual(cp, want) {
		t.Errorf("DeepCopyObject gives %+v", cp)
	}
}

// crdDecoder returns a function that decodes a CRD's JSON as the
// registry's apiextensions client does.
func crdDecoder(t *testing.T) func(*apiextensionsv1.CustomResourceDefinition) runtime.Object {
	s := runtime.NewScheme()
	if err := crdGroupOptions.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	dec := serializer.NewCodecFactory(s).UniversalDeserializer()
	return func(c *apiextensionsv1.CustomResourceDefinition) runtime.Object {
		t.Helper()
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := dec.Decode(data, nil, nil)
		if err != nil {
			t.Fatalf("decoding a CRD: %v", err)
		}
		return obj
	}
}
