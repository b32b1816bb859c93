// Package multicluster follows the remote-cluster Secrets of the system
// namespace and keeps one registry per remote cluster behind the
// aggregate, as Istio's remote secrets do.
//
// A Secret labelled istio/multiCluster=true holds, per data key, a
// cluster ID and its kubeconfig (what `istioctl create-remote-secret`
// writes). A new key adds the cluster's registry with the lowest
// precedence (aggregate.AddSource), a changed kubeconfig builds a new one
// and swaps it in only once it has synced (aggregate.ReplaceSource,
// bounded by Options.SyncTimeout: the old one stays otherwise), a removed
// key or Secret removes it. A kubeconfig that does not parse, a cluster
// ID equal to the local one and a cluster ID already held by another
// Secret are logged and change nothing.
//
// Nothing here waits for a remote cluster: a registry added is served as
// it fills, so an unreachable API server holds up neither readiness nor
// the local cluster (it is logged when it has not synced within
// SyncTimeout), and one that goes away keeps serving its informers' last
// state.
package multicluster
