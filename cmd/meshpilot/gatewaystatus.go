package main

import (
	"context"
	"log/slog"

	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/gwstatus"
	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/metrics"
	"github.com/meshpilot/meshpilot/internal/replicas"
	"github.com/meshpilot/meshpilot/internal/server"
)

// gatewayStatus builds the writer of the status of Gateway API routes
// attached to Services, which the routes' conversion feeds, and what runs
// it beside the server: every replica takes part in the election on the
// Lease gwstatus.DefaultLeaseName of its namespace (as --balance's
// Leases: --system-namespace if given, else the Pod's), and the leader
// alone writes.
func gatewayStatus(cfg *rest.Config, client *kubeapi.Client, f serveFlags, log *slog.Logger, m *metrics.Metrics) (*gwstatus.KubeWriter, beside, error) {
	explicit := ""
	if f.systemNamespaceSet {
		explicit = f.systemNamespace
	}
	ns, _, err := replicas.Identity(explicit, f.systemNamespace)
	if err != nil {
		return nil, beside{}, err
	}
	id, err := gwstatus.Identity()
	if err != nil {
		return nil, beside{}, err
	}
	w, err := gwstatus.NewKubeWriter(gwstatus.Options{
		Config:         cfg,
		Client:         client,
		ControllerName: f.gatewayControllerName,
		Namespace:      ns,
		Identity:       id,
		QueueMetrics:   m.WorkqueueProviderFor(f.clusterID),
		Log:            log,
	})
	if err != nil {
		return nil, beside{}, err
	}
	return w, beside{name: "gateway status", run: func(ctx context.Context, _ *server.Server) error {
		w.Run(ctx)
		return nil
	}}, nil
}
