package file

import (
	"slices"

	"github.com/meshpilot/meshpilot/internal/model"
)

// builtinNamespaces exist in every cluster, so a folder may use them
// without a Namespace document.
var builtinNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// The folder's namespaces and nodes, for what a client says about itself
// (model.Inventory).

// HasNamespace reports whether the folder defines the namespace, or it
// is one every cluster has: every object of the folder is in one of
// those.
func (r *Registry) HasNamespace(name string) bool {
	return r.view.Load().namespaces[name] != nil || slices.Contains(builtinNamespaces, name)
}

// HasNode reports whether the folder defines the Node, or puts a Pod or
// an endpoint on it.
func (r *Registry) HasNode(name string) bool {
	v := r.view.Load()
	return v.nodes[name] != nil || v.podNodes[name]
}

// HasCluster is false: the folder's objects are the local cluster's.
func (r *Registry) HasCluster(string) bool { return false }

var _ model.Inventory = (*Registry)(nil)
