package aggregate

import "strings"

// The sources of a cluster's registries are named by convention, so that
// reports (metrics, /debug/configz) can say which cluster a source's
// objects come from.
const (
	// RemoteSourcePrefix begins the name of a remote cluster's source:
	// "cluster/<cluster ID>".
	RemoteSourcePrefix = "cluster/"
	// LocalSource is the name of the local cluster's Kubernetes registry.
	LocalSource = "kubernetes"
)

// SourceCluster returns the ID of the cluster a source's objects come
// from: the ID in a remote cluster's source name, else localID: the
// local cluster's registry, and what is read beside it (its
// ServiceEntries, a folder), belong to the local cluster.
func SourceCluster(source, localID string) string {
	if id, ok := strings.CutPrefix(source, RemoteSourcePrefix); ok {
		return id
	}
	return localID
}

// SourceLabel names a source where sources are told apart (the port
// conflicts of /debug/configz): the cluster ID for a cluster's registry,
// remote or local, and the source's own name for the others
// ("serviceentries", "files"), which share the local cluster with its
// registry.
func SourceLabel(source, localID string) string {
	if source == LocalSource {
		return localID
	}
	if id, ok := strings.CutPrefix(source, RemoteSourcePrefix); ok {
		return id
	}
	return source
}
