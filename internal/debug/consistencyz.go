package debug

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/meshpilot/meshpilot/internal/audit"
)

// Consistency runs a consistency audit of the Kubernetes registry
// (audit.Auditor.Audit): /debug/consistencyz shows its report.
type Consistency func(ctx context.Context) (audit.Report, error)

// consistencyz audits on request. Each audit lists every watched kind
// of the cluster: the page is for people and for `meshpilot status
// consistency`, not for polling (--audit-interval audits periodically,
// with metrics), and limit refuses (429) a request while an audit runs
// or too soon after the last one started, so that a loop of requests
// cannot turn into a loop of cluster-wide LISTs.
func consistencyz(run Consistency, limit *auditLimit) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if run == nil {
			http.Error(w, "no Kubernetes cluster to audit: meshpilot serves files (--from)", http.StatusNotFound)
			return
		}
		ok, wait := limit.start(time.Now())
		if !ok {
			limit.refuse(w, wait)
			return
		}
		rep, err := run(r.Context())
		limit.done(!errors.Is(err, audit.ErrNotSynced))
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
