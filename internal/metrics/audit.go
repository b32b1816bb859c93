package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Audits holds the consistency audit's metrics (internal/audit); it is
// the audit's Observer.
type Audits struct {
	differences *prometheus.GaugeVec
	runs        prometheus.Counter
	relists     *prometheus.CounterVec
}

// WatchAudits adds the gauge audit_differences{kind} and the counters
// audit_runs_total and audit_relists_total{kind}, and returns what sets
// them. Call it once.
func (m *Metrics) WatchAudits() *Audits {
	a := &Audits{
		differences: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "audit", Name: "differences",
			Help: "Differences the last consistency audit found, by kind: a watched Kubernetes kind (its informer cache against a fresh LIST) or model.Service and model.Endpoint (the model against one rebuilt from the LIST).",
		}, []string{"kind"}),
		runs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "audit", Name: "runs_total",
			Help: "Consistency audits run (periodic ones and /debug/consistencyz).",
		}),
		relists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "audit", Name: "relists_total",
			Help: "Relists of a Kubernetes kind because a difference outlived two periodic audits.",
		}, []string{"kind"}),
	}
	m.registry.MustRegister(a.differences, a.runs, a.relists)
	return a
}

// Audited counts one audit and sets its differences by kind; it fits
// audit.Observer.
func (a *Audits) Audited(differences map[string]int) {
	a.runs.Inc()
	for kind, n := range differences {
		a.differences.WithLabelValues(kind).Set(float64(n))
	}
}

// Relisted counts one relist of kind; it fits audit.Observer.
func (a *Audits) Relisted(kind string) { a.relists.WithLabelValues(kind).Inc() }
