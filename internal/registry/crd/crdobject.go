package crd

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// crdObject is what the registry reads of a CustomResourceDefinition:
// which versions it serves and whether it is Established. It is decoded
// from the API server's JSON, whose decoder skips every field the type
// lacks (the OpenAPI schemas of hundreds of kilobytes, the names, the
// conversion), so that meshpilot need not link
// k8s.io/apiextensions-apiserver's types, whose generated protobuf, deep
// copies and registration cost the binary about 280 KiB for four small
// watches.
type crdObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              crdSpec   `json:"spec"`
	Status            crdStatus `json:"status,omitempty"`
}

type crdSpec struct {
	Versions []crdVersion `json:"versions,omitempty"`
}

type crdVersion struct {
	Name   string `json:"name"`
	Served bool   `json:"served"`
}

type crdStatus struct {
	Conditions []crdCondition `json:"conditions,omitempty"`
}

// crdCondition is a condition of a CRD's status; Type and Status are
// apiextensions/v1's CustomResourceDefinitionConditionType and
// ConditionStatus.
type crdCondition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
}

// The condition crdServes looks for: apiextensions/v1's Established with
// ConditionTrue.
const (
	crdEstablished = "Established"
	crdConditionOn = "True"
)

type crdObjectList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []crdObject `json:"items"`
}

func (c *crdObject) DeepCopyObject() runtime.Object {
	if c == nil {
		return nil
	}
	return c.deepCopy()
}

func (c *crdObject) deepCopy() *crdObject {
	out := &crdObject{TypeMeta: c.TypeMeta, Spec: crdSpec{Versions: append([]crdVersion(nil), c.Spec.Versions...)},
		Status: crdStatus{Conditions: append([]crdCondition(nil), c.Status.Conditions...)}}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

func (l *crdObjectList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &crdObjectList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]crdObject, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].deepCopy()
		}
	}
	return out
}

// crdGroupVersion is apiextensions.k8s.io/v1, of which the registry reads
// CustomResourceDefinitions alone.
var crdGroupVersion = schema.GroupVersion{Group: "apiextensions.k8s.io", Version: "v1"}

// addCRDToScheme registers crdObject as the group version's
// CustomResourceDefinition.
func addCRDToScheme(s *runtime.Scheme) error {
	s.AddKnownTypeWithName(crdGroupVersion.WithKind("CustomResourceDefinition"), &crdObject{})
	s.AddKnownTypeWithName(crdGroupVersion.WithKind("CustomResourceDefinitionList"), &crdObjectList{})
	return nil
}
