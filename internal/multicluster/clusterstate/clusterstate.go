// Package clusterstate says where each cluster meshpilot reads stands, as
// /debug/clusterz shows it. It imports nothing, so that the debug pages,
// the server and `meshpilot status` read it without the multicluster
// controller and its Kubernetes clients.
package clusterstate

import "time"

// State is where a cluster stands, with istiod's names where it has one.
type State string

const (
	// Syncing: added, its registry has not synced yet.
	Syncing State = "syncing"
	// Synced: its registry has synced and its API server answers.
	Synced State = "synced"
	// Timeout: not synced within --remote-sync-timeout; served as it
	// fills, readiness does not wait for it.
	Timeout State = "timeout"
	// Unreachable: synced once, but its API server does not answer now;
	// its last state stays served.
	Unreachable State = "unreachable"
)

// All are every State, in the order metrics list them.
var All = []State{Syncing, Synced, Timeout, Unreachable}

// Cluster is one cluster as /debug/clusterz shows it. The first three
// fields have the JSON names of istiod's page, which
// `istioctl x remote-clusters` reads; fields are only ever added.
type Cluster struct {
	ID string `json:"id"`
	// Secret is the remote Secret, namespace/name; empty for the local
	// cluster.
	Secret string `json:"secretName,omitempty"`
	State  State  `json:"syncStatus"`
	// APIServer is the API server's URL.
	APIServer string `json:"apiServer,omitempty"`
	// Since is when the cluster entered State; zero when not known (the
	// local cluster).
	Since time.Time `json:"since,omitzero"`
	// LastError is the last failure seen: a probe of the API server, or
	// a replacement that did not sync.
	LastError string `json:"lastError,omitempty"`
	// Local marks meshpilot's own cluster (--cluster-id).
	Local bool `json:"local,omitempty"`
}
