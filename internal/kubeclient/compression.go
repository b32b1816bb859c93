package kubeclient

import "k8s.io/client-go/rest"

// Uncompressed returns a copy of cfg that asks the API server for
// responses without gzip, for a controller that runs next to it, as
// Kubernetes' own control plane components do (kubernetes#80919): on a
// local network compression costs both sides CPU and latency and saves
// nothing. It costs memory too: an informer's watch whose initial list
// the API server gzips (its WatchListCompression, seen with 1.37) keeps
// a gzip reader of about 50 KiB for its whole life. A client far from
// its API server (a remote cluster, a command run from a laptop) keeps
// gzip.
func Uncompressed(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.DisableCompression = true
	return c
}
