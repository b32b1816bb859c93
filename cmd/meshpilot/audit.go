package main

import (
	"context"
	"log/slog"

	"github.com/meshpilot/meshpilot/internal/audit"
	"github.com/meshpilot/meshpilot/internal/metrics"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/server"
)

// consistencyAudit builds the audit of the local cluster's registry, run
// on demand by /debug/consistencyz and every --audit-interval (when set)
// by the task it returns, which relists what outlived two audits. Remote
// clusters' registries are not audited.
func consistencyAudit(reg *kube.Controller, f serveFlags, m *metrics.Metrics, log *slog.Logger) (*audit.Auditor, beside, error) {
	a, err := audit.New(audit.Options{Registry: reg, Interval: f.auditInterval, Observer: m.WatchAudits(), Logger: log})
	if err != nil {
		return nil, beside{}, err
	}
	if f.auditInterval > 0 {
		log.Info("consistency audit every --audit-interval", "interval", f.auditInterval)
	}
	return a, beside{name: "consistency audit", run: func(ctx context.Context, _ *server.Server) error { return a.Run(ctx) }}, nil
}
