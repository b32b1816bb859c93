package kube

import "github.com/meshpilot/meshpilot/internal/model"

// The cluster's namespaces and nodes, for what a client says about
// itself (model.Inventory). Namespaces and Nodes are watched cluster-wide
// whatever Options.Namespaces say, so every namespace and node counts.

// HasNamespace reports whether the Namespace is cached.
func (c *Controller) HasNamespace(name string) bool { return c.live.namespace(name) != nil }

// HasNode reports whether the Node is cached, or a watched Pod or
// endpoint is on it (its Node may be gone while they are still there).
func (c *Controller) HasNode(name string) bool {
	if name == "" {
		return false
	}
	if c.live.node(name) != nil {
		return true
	}
	for _, scope := range c.live.scopes {
		if keys, _ := scope.pods.IndexKeys(indexPodByNode, name); len(keys) > 0 {
			return true
		}
		if keys, _ := scope.slices.IndexKeys(indexSliceByNode, name); len(keys) > 0 {
			return true
		}
	}
	return false
}

// HasCluster reports whether id is the cluster of this registry, when
// it reads a remote one (Options.ClusterID).
func (c *Controller) HasCluster(id string) bool { return id != "" && id == c.opts.ClusterID }

var _ model.Inventory = (*Controller)(nil)
