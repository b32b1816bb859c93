package kubeconv

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCanonicalServiceAccounts: a Service's
// alpha.istio.io/canonical-serviceaccounts annotation survives the
// informer's stripping and becomes the service's own identities, split
// on commas as istiod splits it.
func TestCanonicalServiceAccounts(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "apps", Annotations: map[string]string{
			CanonicalServiceAccountsAnnotation: "spiffe://cluster.local/ns/apps/sa/a,b@example.com",
			"unrelated":                        "x",
		}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Name: "grpc", Port: 80}}},
	}
	got := ConvertService(StrippedService(svc), "cluster.local").ServiceAccounts
	if want := []string{"spiffe://cluster.local/ns/apps/sa/a", "b@example.com"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if ann := StrippedService(svc).Annotations; len(ann) != 1 {
		t.Errorf("kept annotations %v, want the canonical service accounts alone", ann)
	}
	svc.Annotations = nil
	if got := ConvertService(svc, "cluster.local").ServiceAccounts; got != nil {
		t.Errorf("without the annotation: %v", got)
	}
}
