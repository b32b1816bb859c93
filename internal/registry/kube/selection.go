package kube

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// namespaceSelection is the set of discovery selectors in force: those of
// --discovery-selectors (fixed) and those of MeshConfig (swapped at run
// time). Safe for concurrent use.
//
// As in Istio (pkg/kube/namespace discoveryNamespacesFilter), a namespace
// is selected when its labels match any selector, and every namespace is
// when there is no selector at all. The two lists are one union: a
// namespace selected by the flag stays selected whatever MeshConfig says.
type namespaceSelection struct {
	flag []labels.Selector // never changed after New

	mu   sync.RWMutex      // guards mesh
	mesh []labels.Selector // MeshConfig's; replaced whole, never modified
}

// selectors returns the selectors in force; the slice must not be
// modified.
func (s *namespaceSelection) selectors() []labels.Selector {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.unionLocked()
}

func (s *namespaceSelection) unionLocked() []labels.Selector {
	if len(s.mesh) == 0 {
		return s.flag
	}
	return slices.Concat(s.flag, s.mesh)
}

// setMesh puts MeshConfig's selectors in force and returns those in force
// before and after.
func (s *namespaceSelection) setMesh(mesh []labels.Selector) (before, after []labels.Selector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before = s.unionLocked()
	s.mesh = slices.Clone(mesh)
	return before, s.unionLocked()
}

// selects applies selectors to a namespace's labels; ns is nil when the
// namespace is not (yet) known, which only an empty list selects.
func selects(selectors []labels.Selector, ns *corev1.Namespace) bool {
	if len(selectors) == 0 {
		return true
	}
	if ns == nil {
		return false
	}
	set := labels.Set(ns.Labels)
	for _, sel := range selectors {
		if sel.Matches(set) {
			return true
		}
	}
	return false
}
