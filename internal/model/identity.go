package model

import (
	"cmp"
	"slices"
)

// Identity is who an endpoint's workload is in the mesh: its namespace
// and service account, spiffe://<trust domain>/ns/<Namespace>/sa/<ServiceAccount>.
// Namespace may be empty: the service's namespace stands for it.
type Identity struct {
	Namespace      string
	ServiceAccount string
}

func compareIdentity(a, b Identity) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.ServiceAccount, b.ServiceAccount))
}

// endpointIdentities lists the distinct identities of eps, sorted, for a
// Store to tell whether a change of endpoints changed them
// (Event.SameServiceAccounts). An endpoint without a service account has
// none. Every endpoint counts, whatever the port it serves: the
// aggregate serves a source's endpoints under another source's
// definition, so a port this source's service lacks may still be served.
func endpointIdentities(eps []*Endpoint) []Identity {
	var out []Identity
	for _, ep := range eps {
		if ep.ServiceAccount == "" {
			continue
		}
		id := Identity{Namespace: ep.Namespace, ServiceAccount: ep.ServiceAccount}
		// Endpoints of one workload set usually share one identity:
		// skip runs before sorting.
		if n := len(out); n > 0 && out[n-1] == id {
			continue
		}
		out = append(out, id)
	}
	slices.SortFunc(out, compareIdentity)
	return slices.Compact(out)
}
