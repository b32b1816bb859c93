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
// key or Secret removes it. A kubeconfig's author is not trusted: one
// whose credentials run a command or read a file in meshpilot's
// container (exec, tokenFile, client certificate or key files, auth
// providers but oidc) is refused unless Options.InsecureKubeconfigOptions
// allows it, as istiod does. A kubeconfig that does not parse, a cluster
// ID equal to the local one and a cluster ID already held by another
// Secret are logged and change nothing; a cluster ID goes to the first
// Secret the worker sees naming it, and once that Secret
// lets it go, to another Secret naming it.
//
// What a remote registry watches is serve's scope (Options.Scope), unless
// its Secret's annotations meshpilot.io/namespaces and
// meshpilot.io/discovery-selectors say otherwise; a changed annotation
// rebuilds the registry as a changed kubeconfig does, and a value the
// flags would not take is logged and changes nothing. MeshConfig's
// discoverySelectors apply beside them and follow their changes
// (SetMeshDiscoverySelectors), as in the local registry.
//
// One worker applies the Secrets, each Secret's changes in order; a
// replacement waits for its sync on a goroutine of its own, so it holds up
// no other Secret, and a newer change of the same cluster drops it first.
//
// Nothing here waits for a remote cluster: a registry added is served as
// it fills, so an unreachable API server holds up neither readiness nor
// the local cluster, and one that goes away keeps serving its informers'
// last state. Clusters reports each cluster's State (syncing, synced,
// timeout after SyncTimeout, unreachable when its API server stops
// answering a periodic probe), which /debug/clusterz and a metric show.
package multicluster
