package main

import (
	"fmt"
	"log/slog"

	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/kubeclient"
	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/metrics"
	"github.com/meshpilot/meshpilot/internal/multicluster"
	"github.com/meshpilot/meshpilot/internal/multicluster/clusterstate"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
)

// kubeOptions are the options of every cluster's registry, local and
// remote: the same scope flags apply to each, unless a remote Secret's
// annotations say otherwise.
func kubeOptions(f serveFlags, mesh *meshconfig.Watcher, log *slog.Logger) kube.Options {
	return kube.Options{
		DomainSuffix:       f.domainSuffix,
		LocalClusterID:     f.clusterID,
		Namespaces:         f.namespaces,
		DiscoverySelectors: f.discoverySelectors,
		MeshSynced:         mesh.Synced(),
		Workers:            f.workers,
		Logger:             log,
	}
}

// remoteClusters returns what follows the remote-cluster Secrets of the
// local cluster (client); its Run adds each remote cluster's registry to
// the served aggregate, its metrics in m under its cluster ID. Every
// remote registry follows MeshConfig's discoverySelectors as the local
// one does; call it before mesh runs.
func remoteClusters(client *kubeapi.Client, mesh *meshconfig.Watcher, f serveFlags, log *slog.Logger, m *metrics.Metrics) (*multicluster.Controller, error) {
	c, err := multicluster.New(multicluster.Options{
		Secrets:                   client.Secrets(f.systemNamespace),
		Namespace:                 f.systemNamespace,
		LocalClusterID:            f.clusterID,
		SyncTimeout:               f.remoteSyncTimeout,
		InsecureKubeconfigOptions: f.insecureKubeconfigOptions,
		Logger:                    log,
		Scope:                     multicluster.Scope{Namespaces: f.namespaces, DiscoverySelectors: f.discoverySelectors},
		MeshDiscoverySelectors:    mesh.DiscoverySelectors(),
		NewRegistry: func(clusterID string, cfg *rest.Config, scope multicluster.Scope) (multicluster.Registry, error) {
			cfg = kubeclient.WithOutageGate(cfg, kubeclient.OutageOptions{Logger: log.With("cluster", clusterID)})
			remote, err := kubeapi.NewForConfig(cfg)
			if err != nil {
				return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
			}
			opts := kubeOptions(f, mesh, log.With("cluster", clusterID))
			opts.ClusterID = clusterID
			opts.Namespaces, opts.DiscoverySelectors = scope.Namespaces, scope.DiscoverySelectors
			opts.QueueMetrics = m.WorkqueueProviderFor(clusterID)
			opts.OnInformerEvent = m.InformerEventsFor(clusterID)
			reg, err := kube.New(remote, opts)
			if err != nil {
				return nil, err
			}
			return reg, nil
		},
	})
	if err != nil {
		return nil, err
	}
	// The same precedence as the local registry's: MeshConfig's
	// selectors beside the Secret's annotation or else the flag's.
	mesh.AppendSelectorHandler(c.SetMeshDiscoverySelectors)
	return c, nil
}

// clusterz lists, for /debug/clusterz, the local cluster (synced once its
// registry is) and then the remote ones.
func clusterz(clusterID, apiServer string, synced func() bool, remotes *multicluster.Controller) func() []clusterstate.Cluster {
	return func() []clusterstate.Cluster {
		local := clusterstate.Cluster{ID: clusterID, APIServer: apiServer, State: clusterstate.Syncing, Local: true}
		if synced() {
			local.State = clusterstate.Synced
		}
		return append([]clusterstate.Cluster{local}, remotes.Clusters()...)
	}
}
