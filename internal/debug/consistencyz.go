package debug

import (
	"context"
	"errors"
	"net/http"

	"github.com/meshpilot/meshpilot/internal/audit"
)

// Consistency runs a consistency audit of the Kubernetes registry
// (audit.Auditor.Audit): /debug/consistencyz shows its report.
type Consistency func(ctx context.Context) (audit.Report, error)

// consistencyz audits on each request. Audits run one at a time, and
// each lists every watched kind: the page is for people and for
// `meshpilot status consistency`, not for frequent polling
// (--audit-interval audits periodically, with metrics).
func consistencyz(run Consistency) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if run == nil {
			http.Error(w, "no Kubernetes cluster to audit: meshpilot serves files (--from)", http.StatusNotFound)
			return
		}
		rep, err := run(r.Context())
		switch {
		case errors.Is(err, audit.ErrNotSynced):
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadGateway)
		default:
			writeJSON(w, rep)
		}
	}
}
