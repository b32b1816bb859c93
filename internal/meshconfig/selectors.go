package meshconfig

import (
	"fmt"
	"maps"
	"slices"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// discoverySelectorsOf converts MeshConfig's discoverySelectors as Istio
// does (pkg/kube/namespace LabelSelectorAsSelector): matchLabels are
// equalities, matchExpressions take Kubernetes' four operators, the
// requirements of one selector are ANDed, an empty selector matches every
// namespace. Istio logs a selector it cannot convert and keeps the
// selectors it had; meshpilot refuses the whole config with the field's
// path, so that the last good config (selectors and all) stays in force.
func discoverySelectorsOf(in []*meshv1alpha1.LabelSelector) ([]labels.Selector, error) {
	out := make([]labels.Selector, 0, len(in))
	for i, ls := range in {
		path := fmt.Sprintf("discoverySelectors[%d]", i)
		sel, err := labelSelector(ls, path)
		if err != nil {
			return nil, err
		}
		out = append(out, sel)
	}
	return out, nil
}

func labelSelector(ls *meshv1alpha1.LabelSelector, path string) (labels.Selector, error) {
	if ls == nil {
		return labels.Nothing(), nil
	}
	reqs := make([]labels.Requirement, 0, len(ls.GetMatchLabels())+len(ls.GetMatchExpressions()))
	// Sorted, so that the first bad label named is always the same one.
	for _, k := range slices.Sorted(maps.Keys(ls.GetMatchLabels())) {
		r, err := labels.NewRequirement(k, selection.Equals, []string{ls.GetMatchLabels()[k]})
		if err != nil {
			return nil, fmt.Errorf("%s.matchLabels.%s: %w", path, k, err)
		}
		reqs = append(reqs, *r)
	}
	for j, e := range ls.GetMatchExpressions() {
		at := fmt.Sprintf("%s.matchExpressions[%d]", path, j)
		op, ok := operators[metav1.LabelSelectorOperator(e.GetOperator())]
		if !ok {
			return nil, fmt.Errorf("%s.operator: %q is not In, NotIn, Exists or DoesNotExist", at, e.GetOperator())
		}
		r, err := labels.NewRequirement(e.GetKey(), op, slices.Clone(e.GetValues()))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		reqs = append(reqs, *r)
	}
	return labels.NewSelector().Add(reqs...), nil
}

// operators are the label selector operators Kubernetes' LabelSelector
// allows, as selection operators.
var operators = map[metav1.LabelSelectorOperator]selection.Operator{
	metav1.LabelSelectorOpIn:           selection.In,
	metav1.LabelSelectorOpNotIn:        selection.NotIn,
	metav1.LabelSelectorOpExists:       selection.Exists,
	metav1.LabelSelectorOpDoesNotExist: selection.DoesNotExist,
}

// sameSelectors reports whether two lists of selectors select alike,
// judged by their canonical strings (Empty tells labels.Nothing, whose
// string is also "", from an empty selector).
func sameSelectors(a, b []labels.Selector) bool {
	return slices.EqualFunc(a, b, func(x, y labels.Selector) bool {
		return x.String() == y.String() && x.Empty() == y.Empty()
	})
}
