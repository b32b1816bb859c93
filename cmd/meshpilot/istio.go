package main

import (
	"context"
	"log/slog"

	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/metrics"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
)

// runIstioRegistry watches Istio's traffic rules beside the Kubernetes
// registry until ctx ends; the returned function waits for it to stop.
// Its DestinationRules reach the generators through the returned
// policies. It does not hold readiness back: rules that arrive later are
// pushed like any change, and without the CRDs it logs once and waits
// for them.
func runIstioRegistry(ctx context.Context, cfg *rest.Config, f serveFlags, log *slog.Logger, m *metrics.Metrics) (policies *crd.Policies, wait func(), err error) {
	reg, err := crd.NewForConfig(cfg, crd.Options{
		Namespaces:   f.namespaces,
		Logger:       log,
		QueueMetrics: m.WorkqueueProvider(),
	})
	if err != nil {
		return nil, nil, err
	}
	// Istio's root namespace, whose rules apply mesh-wide, is its system
	// namespace by default: meshpilot's is --system-namespace.
	policies = crd.NewPolicies(reg, crd.PolicyOptions{DomainSuffix: f.domainSuffix, RootNamespace: f.systemNamespace})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := reg.Run(ctx); err != nil {
			log.Error("Istio traffic rules stopped", "error", err)
		}
	}()
	return policies, func() { <-done }, nil
}
