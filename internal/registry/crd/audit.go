package crd

import (
	"fmt"

	"k8s.io/client-go/tools/pager"
)

// What a consistency audit (internal/audit) reads and does: the informer
// caches per kind, pagers that list a kind as the informers do, and a
// relist of one kind. Kinds are named as Kind, as strings.

// AuditKinds returns the kinds whose informers run (their CRDs are
// installed), in a fixed order: the others have nothing to compare.
func (r *Registry) AuditKinds() []string {
	var out []string
	for _, k := range kinds {
		if r.Watching(k.kind) {
			out = append(out, string(k.kind))
		}
	}
	return out
}

// Cached returns what the informer caches hold of kind, over every
// watched namespace, with managed fields stripped
// (kubeconv.StripManagedFields). Never modify the objects.
func (r *Registry) Cached(kind string) []any {
	var out []any
	for _, inf := range r.informers(Kind(kind)) {
		out = append(out, inf.GetStore().List()...)
	}
	return out
}

// ListPagers returns pagers that list kind exactly as the informers
// watch it (the same client and namespaces), one per watched namespace,
// each with pageSize items a page (client-go's default when 0); none for
// a kind not watched.
func (r *Registry) ListPagers(kind string, pageSize int64) []*pager.ListPager {
	if !r.Watching(Kind(kind)) {
		return nil
	}
	var out []*pager.ListPager
	for _, k := range kinds {
		if string(k.kind) != kind {
			continue
		}
		for _, ns := range r.namespaces {
			p := pager.New(k.list(r.clients[clientKey(k.group, k.version)], ns))
			if pageSize > 0 {
				p.PageSize = pageSize
			}
			out = append(out, p)
		}
	}
	return out
}

// Relist makes the informers of kind list it again, by ending their
// watches as an expired resourceVersion would (package relist): every
// object comes back to the handlers, which report those that changed. It
// returns how many watches it ended.
func (r *Registry) Relist(kind string) (int, error) {
	rl, ok := r.relisters[Kind(kind)]
	if !ok {
		return 0, fmt.Errorf("istio registry: no informer for kind %q", kind)
	}
	return rl.Relist(), nil
}
