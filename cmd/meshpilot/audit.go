package main

import (
	"context"
	"log/slog"

	"github.com/meshpilot/meshpilot/internal/audit"
	"github.com/meshpilot/meshpilot/internal/metrics"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/server"
)

// consistencyAudit builds the audit of the local cluster's registries
// (Kubernetes, and the Istio kinds of rules), run on demand by
// /debug/consistencyz and every --audit-interval (when set) by the task it
// returns, which relists what outlived two audits. Remote clusters'
// registries are not audited.
func consistencyAudit(reg *kube.Controller, rules *crd.Registry, f serveFlags, m *metrics.Metrics, log *slog.Logger) (*audit.Auditor, beside, error) {
	var sources []audit.Source
	if rules != nil {
		sources = append(sources, rules)
	}
	a, err := audit.New(audit.Options{Registry: reg, Sources: sources, Interval: f.auditInterval, Observer: m.WatchAudits(), Logger: log})
	if err != nil {
		return nil, beside{}, err
	}
	if f.auditInterval > 0 {
		log.Info("consistency audit every --audit-interval", "interval", f.auditInterval)
	}
	return a, beside{name: "consistency audit", run: func(ctx context.Context, _ *server.Server) error { return a.Run(ctx) }}, nil
}
