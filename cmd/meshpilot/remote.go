package main

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/metrics"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/multicluster"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
)

// kubeOptions are the options of every cluster's registry, local and
// remote: the same scope flags apply to each.
func kubeOptions(f serveFlags, mesh *meshconfig.Watcher, log *slog.Logger) kube.Options {
	return kube.Options{
		DomainSuffix:       f.domainSuffix,
		Namespaces:         f.namespaces,
		DiscoverySelectors: f.discoverySelectors,
		MeshSynced:         mesh.HasSynced,
		Workers:            f.workers,
		Logger:             log,
	}
}

// remoteClusters returns what follows the remote-cluster Secrets of the
// local cluster (client) and adds each remote cluster's registry to the
// served aggregate, its metrics in m under its cluster ID.
func remoteClusters(client kubernetes.Interface, mesh *meshconfig.Watcher, f serveFlags, log *slog.Logger, m *metrics.Metrics) func(context.Context, *aggregate.Controller) error {
	return func(ctx context.Context, sources *aggregate.Controller) error {
		c, err := multicluster.New(multicluster.Options{
			Client:         client,
			Namespace:      f.systemNamespace,
			LocalClusterID: f.clusterID,
			Sources:        sources,
			SyncTimeout:    f.remoteSyncTimeout,
			Logger:         log,
			NewRegistry: func(clusterID string, cfg *rest.Config) (model.Controller, error) {
				remote, err := kubernetes.NewForConfig(cfg)
				if err != nil {
					return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
				}
				opts := kubeOptions(f, mesh, log.With("cluster", clusterID))
				opts.ClusterID = clusterID
				opts.QueueMetrics = m.WorkqueueProviderFor(clusterID)
				opts.OnInformerEvent = m.InformerEventsFor(clusterID)
				reg, err := kube.New(remote, opts)
				if err != nil {
					return nil, err
				}
				// MeshConfig's discoverySelectors as they are now; the
				// local registry alone follows their later changes.
				reg.SetMeshDiscoverySelectors(mesh.DiscoverySelectors())
				return reg, nil
			},
		})
		if err != nil {
			return err
		}
		return c.Run(ctx)
	}
}
