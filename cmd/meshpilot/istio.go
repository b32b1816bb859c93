package main

import (
	"context"
	"log/slog"

	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/gwstatus"
	"github.com/meshpilot/meshpilot/internal/metrics"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
	"github.com/meshpilot/meshpilot/internal/registry/serviceentry"
	"github.com/meshpilot/meshpilot/internal/translate"
)

// istioServing is what serve builds from the Istio kinds of a crd.Store,
// whether the store is a cluster's informers or a folder's manifests.
type istioServing struct {
	// policies is the DestinationRules as generators read them.
	policies *crd.Policies
	// routes is the VirtualServices as generators read them.
	routes *crd.Routes
	// security is the PeerAuthentications and AuthorizationPolicies as
	// gRPC servers' listeners read them.
	security *crd.Security
	// status is what became of each object, recorded by every consumer.
	status *configstatus.Reporter
	// serviceEntries is the services of the ServiceEntries and the
	// WorkloadEntries' endpoints: a source of the aggregate after the
	// Kubernetes (or file) registry, whose definitions win on a shared
	// hostname, as in Istio.
	serviceEntries *serviceentry.Registry
	// registry is the cluster's Istio registry, which the consistency
	// audit lists beside the Kubernetes kinds; nil for a folder.
	registry *crd.Registry
	// routeStatus takes the status of each HTTPRoute and GRPCRoute
	// attached to a Service, as the routes' conversion computes it, and
	// writes it back to the cluster from the elected replica
	// (gwstatus.Discard for a folder). Never nil.
	routeStatus gwstatus.Writer
}

// istioConsumers builds every consumer of store's Istio objects, the same
// for a cluster and for --from; they record each object's status in one
// Reporter, which logs refusals to log. services are the Kubernetes
// Services whose selectors pick WorkloadEntries (and, when they are a
// cluster's, its Pods, which workloadSelectors pick). routeStatus takes the
// Gateway API routes' status (gwstatus.Discard when there is nowhere to
// write it). Consumers append event handlers to store, mesh and services,
// so call it before they run.
func istioConsumers(store crd.Store, mesh crd.MeshSource, services serviceentry.Services, f serveFlags, routeStatus gwstatus.Writer, log *slog.Logger) istioServing {
	status := configstatus.NewReporter()
	status.SetLogger(log)
	// A cluster's registry knows Pods, which workloadSelectors select
	// too; a folder's does not.
	pods, _ := services.(serviceentry.Pods)
	// The root namespace, whose rules apply mesh-wide, is Istio's
	// default (istio-system) unless MeshConfig's rootNamespace names
	// another, whatever --system-namespace says: the same rules apply
	// under meshpilot as under istiod.
	policies := crd.NewPolicies(store, crd.PolicyOptions{DomainSuffix: f.domainSuffix, Mesh: mesh, Status: status})
	return istioServing{
		policies: policies,
		// The Kubernetes (or folder's) Services are those Gateway API
		// routes attach to and route to (their status says whether
		// each exists).
		routes: crd.NewRoutes(store, crd.RouteOptions{DomainSuffix: f.domainSuffix, Policies: policies, Status: status, Mesh: mesh,
			Services: services, GatewayStatus: routeStatus}),
		security: crd.NewSecurity(store, crd.SecurityOptions{Mesh: mesh, Status: status, AuthzGRPCIgnored: translate.AuthorizationGRPCIgnored}),
		status:   status,
		serviceEntries: serviceentry.New(store, serviceentry.Options{
			DomainSuffix: f.domainSuffix, Services: services, Pods: pods, Reporter: status,
		}),
		routeStatus: routeStatus,
	}
}

// runIstioRegistry watches Istio's configuration beside the Kubernetes
// registry until ctx ends; the returned function waits for it to stop.
// It does not hold readiness back: rules that arrive later are pushed
// like any change, and without the CRDs it logs once and waits for them.
func runIstioRegistry(ctx context.Context, cfg *rest.Config, mesh crd.MeshSource, services serviceentry.Services, f serveFlags, routeStatus gwstatus.Writer, log *slog.Logger, m *metrics.Metrics) (istio istioServing, wait func(), err error) {
	reg, err := crd.NewForConfig(cfg, crd.Options{
		Namespaces:   f.namespaces,
		Logger:       log,
		QueueMetrics: m.WorkqueueProviderFor(f.clusterID),
	})
	if err != nil {
		return istioServing{}, nil, err
	}
	istio = istioConsumers(reg, mesh, services, f, routeStatus, log)
	istio.registry = reg
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := reg.Run(ctx); err != nil {
			log.Error("Istio configuration watch stopped", "error", err)
		}
	}()
	return istio, func() { <-done }, nil
}
