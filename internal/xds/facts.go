package xds

import (
	"cmp"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate"
)

// unknownCluster is the cluster of a client whose CLUSTER_ID names a
// cluster meshpilot does not read. No endpoint is in it, so such a client
// gets what it got under its own name: for a cluster-local host, no
// endpoint (as from istiod, which filters by the client's cluster and
// does not replace an unknown one), and for any other host every
// cluster's. Not the local cluster: a client of a remote cluster whose
// Secret is missing or not read yet would then be sent the local
// cluster's cluster-local endpoints, which it may not even reach. The
// name cannot be a cluster's: a Secret's key has no space or parenthesis.
const unknownCluster = "(unknown cluster)"

// knownFacts replaces what a client says about itself that names no
// namespace, node or cluster meshpilot knows (Options.Inventory), so that
// clients that make names up share one variant of each resource that
// varies by it (Result.Vary) instead of making one each; a real one keeps
// its own. What the client is served does not change:
//
//   - An unknown namespace becomes none. Nothing is in it: no service to
//     resolve a short name to, no rule in it (nor a Namespace object it
//     would have to exist in), so a client of it gets what a client
//     naming no namespace gets, as from istiod, where no namespace's
//     configuration applies to it. The one thing that goes is a service
//     exported to that namespace by name before the namespace exists.
//   - An unknown node becomes none: no endpoint is on it, so under
//     internalTrafficPolicy Local the client gets none either way, and
//     under PreferSameNode every endpoint at one priority instead of
//     every endpoint one priority down.
//   - An unknown cluster becomes unknownCluster.
//
// The workload behind the client's address (Server.client) then fills
// in a node left empty, so a real Pod with a made-up NODE_NAME gets its
// own. The sync state (/debug/syncz) still shows what the client said.
// A namespace or cluster that comes to exist after a client's stream
// opened applies from the client's next node (its next stream: clients
// send the node once).
func (s *Server) knownFacts(c *translate.Client) {
	inv := s.opts.Inventory
	if inv == nil {
		return
	}
	if c.Namespace != "" && !inv.HasNamespace(c.Namespace) {
		c.Namespace = ""
	}
	if c.NodeName != "" && !inv.HasNode(c.NodeName) {
		c.NodeName = ""
	}
	if c.ClusterID != cmp.Or(s.opts.LocalClusterID, model.DefaultClusterID) && !inv.HasCluster(c.ClusterID) {
		c.ClusterID = unknownCluster
	}
}
