package kubeconv

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodInfo is a metav1.Object, which informers key their caches by
// (cache.MetaNamespaceKeyFunc through meta.Accessor) and listers read.
// The getters of what it does not keep return nothing, and their setters
// do nothing: only the transform builds a PodInfo.
var _ metav1.Object = (*PodInfo)(nil)

func (p *PodInfo) GetNamespace() string                { return p.Namespace }
func (p *PodInfo) SetNamespace(namespace string)       { p.Namespace = namespace }
func (p *PodInfo) GetName() string                     { return p.Name }
func (p *PodInfo) SetName(name string)                 { p.Name = name }
func (p *PodInfo) GetGenerateName() string             { return "" }
func (p *PodInfo) SetGenerateName(string)              {}
func (p *PodInfo) GetUID() types.UID                   { return p.UID }
func (p *PodInfo) SetUID(uid types.UID)                { p.UID = uid }
func (p *PodInfo) GetResourceVersion() string          { return p.ResourceVersion }
func (p *PodInfo) SetResourceVersion(version string)   { p.ResourceVersion = version }
func (p *PodInfo) GetGeneration() int64                { return 0 }
func (p *PodInfo) SetGeneration(int64)                 {}
func (p *PodInfo) GetSelfLink() string                 { return "" }
func (p *PodInfo) SetSelfLink(string)                  {}
func (p *PodInfo) GetCreationTimestamp() metav1.Time   { return metav1.Time{} }
func (p *PodInfo) SetCreationTimestamp(metav1.Time)    {}
func (p *PodInfo) GetDeletionTimestamp() *metav1.Time  { return p.DeletionTimestamp }
func (p *PodInfo) SetDeletionTimestamp(t *metav1.Time) { p.DeletionTimestamp = t }
func (p *PodInfo) GetDeletionGracePeriodSeconds() *int64 {
	return nil
}
func (p *PodInfo) SetDeletionGracePeriodSeconds(*int64)          {}
func (p *PodInfo) GetLabels() map[string]string                  { return p.Labels }
func (p *PodInfo) SetLabels(labels map[string]string)            { p.Labels = labels }
func (p *PodInfo) GetAnnotations() map[string]string             { return nil }
func (p *PodInfo) SetAnnotations(map[string]string)              {}
func (p *PodInfo) GetFinalizers() []string                       { return nil }
func (p *PodInfo) SetFinalizers([]string)                        {}
func (p *PodInfo) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (p *PodInfo) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
func (p *PodInfo) GetOwnerReferences() []metav1.OwnerReference {
	return p.OwnerReferences
}
func (p *PodInfo) SetOwnerReferences(refs []metav1.OwnerReference) { p.OwnerReferences = refs }
