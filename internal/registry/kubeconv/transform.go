package kubeconv

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StripManagedFields drops managedFields and the
// kubectl.kubernetes.io/last-applied-configuration annotation from any
// metav1.Object: both are often larger than the rest of the object and are
// never read here. The object is modified in place, which informers allow
// for transforms since client-go 1.27; the annotation map is replaced, not
// edited, in case it is shared.
func StripManagedFields(obj any) (any, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	// A nil pointer inside the interface would panic on the first setter.
	if v := reflect.ValueOf(obj); v.Kind() == reflect.Pointer && v.IsNil() {
		return obj, nil
	}
	o.SetManagedFields(nil)
	if ann := o.GetAnnotations(); ann != nil {
		if _, found := ann[corev1.LastAppliedConfigAnnotation]; found {
			kept := make(map[string]string, len(ann)-1)
			for k, v := range ann {
				if k != corev1.LastAppliedConfigAnnotation {
					kept[k] = v
				}
			}
			if len(kept) == 0 {
				kept = nil
			}
			o.SetAnnotations(kept)
		}
	}
	return obj, nil
}
