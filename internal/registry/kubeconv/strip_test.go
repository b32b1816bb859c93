package kubeconv_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// The conversion tests convert through the two helpers below, so that
// each of their cases also shows that the objects the informers cache
// (kubeconv.StrippedService, kubeconv.StrippedEndpointSlice) give the
// model the full objects give.

// cvConvertService is ConvertService, checked against the stripped
// Service.
func cvConvertService(t *testing.T, svc *corev1.Service, domainSuffix string) *model.Service {
	t.Helper()
	got := kubeconv.ConvertService(svc, domainSuffix)
	if stripped := kubeconv.ConvertService(kubeconv.StrippedService(svc), domainSuffix); !stripped.Equal(got) {
		t.Errorf("the stripped Service converts to\n%s\nthe full one to\n%s", cvJSON(stripped), cvJSON(got))
	}
	return got
}

// cvBuildEndpoints is BuildEndpoints, checked against the stripped
// slices.
func cvBuildEndpoints(t *testing.T, svc *model.Service, in []*discoveryv1.EndpointSlice, lookup kubeconv.EndpointLookup) []*model.Endpoint {
	t.Helper()
	got := kubeconv.BuildEndpoints(svc, in, lookup)
	stripped := make([]*discoveryv1.EndpointSlice, len(in))
	for i, s := range in {
		stripped[i] = kubeconv.StrippedEndpointSlice(s)
	}
	if other := kubeconv.BuildEndpoints(svc, stripped, lookup); !slices.EqualFunc(other, got, (*model.Endpoint).Equal) {
		t.Errorf("the stripped slices give the endpoints\n%s\nthe full ones\n%s", cvJSON(other), cvJSON(got))
	}
	return got
}

func cvJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// TestStrippedObjectsShareRepeatedStrings: two slices decoded apart, as an
// informer decodes them, share one copy of their namespace and one
// node-name and zone pointer per value once stripped, and their Services
// one label map for labels and an equal selector.
func TestStrippedObjectsShareRepeatedStrings(t *testing.T) {
	slice := func(name string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: strings.Clone("shop")},
			Endpoints: []discoveryv1.Endpoint{{
				Addresses: []string{"192.0.2.1"}, NodeName: new(strings.Clone("node-a")), Zone: new(strings.Clone("z1")),
				Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
			}},
		}
	}
	a, b := kubeconv.StrippedEndpointSlice(slice("a")), kubeconv.StrippedEndpointSlice(slice("b"))
	if unsafe.StringData(a.Namespace) != unsafe.StringData(b.Namespace) {
		t.Error("the namespaces of two slices are two copies")
	}
	ea, eb := a.Endpoints[0], b.Endpoints[0]
	if ea.NodeName != eb.NodeName || ea.Zone != eb.Zone || ea.Conditions.Ready != eb.Conditions.Ready {
		t.Error("the node, zone or readiness of two endpoints are two copies")
	}

	svc := kubeconv.StrippedService(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "cart", Labels: map[string]string{"app": "cart"}},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "cart"}},
	})
	if reflect.ValueOf(svc.Labels).UnsafePointer() != reflect.ValueOf(svc.Spec.Selector).UnsafePointer() {
		t.Error("labels and an equal selector are two maps")
	}
}
