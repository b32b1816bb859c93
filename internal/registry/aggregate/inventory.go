package aggregate

import "github.com/meshpilot/meshpilot/internal/model"

// The namespaces, nodes and clusters of every source (model.Inventory):
// one exists when any source that keeps an inventory knows it, so a
// remote cluster's namespaces and nodes count as the local cluster's do.
// Without a source that keeps one (only stores, say), nothing can tell
// what exists, and every name is taken to.

// HasNamespace reports whether any source knows the namespace.
func (a *Controller) HasNamespace(name string) bool {
	return a.anyInventory(func(inv model.Inventory) bool { return inv.HasNamespace(name) })
}

// HasNode reports whether any source knows the Kubernetes node.
func (a *Controller) HasNode(name string) bool {
	return a.anyInventory(func(inv model.Inventory) bool { return inv.HasNode(name) })
}

// HasCluster reports whether any source reads that cluster.
func (a *Controller) HasCluster(id string) bool {
	return a.anyInventory(func(inv model.Inventory) bool { return inv.HasCluster(id) })
}

func (a *Controller) anyInventory(has func(model.Inventory) bool) bool {
	kept := false
	for _, e := range a.view.Load().sources {
		if inv, ok := e.Controller.(model.Inventory); ok {
			if has(inv) {
				return true
			}
			kept = true
		}
	}
	return !kept
}

var _ model.Inventory = (*Controller)(nil)
