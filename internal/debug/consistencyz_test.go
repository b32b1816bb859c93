package debug

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/audit"
	"github.com/meshpilot/meshpilot/internal/model"
)

// TestConsistencyzPage: the page shows the audit's report as JSON, with
// "differences": [] when there are none; 404 without a cluster, 503
// before the registry synced, 502 when the LIST fails.
func TestConsistencyzPage(t *testing.T) {
	since := time.Date(2026, 12, 1, 18, 2, 11, 0, time.UTC)
	report := audit.Report{Started: since, Took: "12ms", Listed: []audit.Listed{{Kind: "EndpointSlice", Objects: 3, Pages: 1}}, Services: 2,
		Differences: []audit.Difference{{Kind: "EndpointSlice", Object: "shop/cart-a", Field: "metadata.resourceVersion", Cache: "10", List: "12", Since: since, Audits: 2}}}
	for _, tc := range []struct {
		name string
		run  Consistency
		code int
		want string
	}{
		{"no cluster", nil, http.StatusNotFound, "no Kubernetes cluster to audit"},
		{"not synced", func(context.Context) (audit.Report, error) { return audit.Report{}, audit.ErrNotSynced }, http.StatusServiceUnavailable, "not synced"},
		{"list fails", func(context.Context) (audit.Report, error) {
			return audit.Report{}, errors.New("audit: listing Pod: forbidden")
		}, http.StatusBadGateway, "forbidden"},
		{"consistent", func(context.Context) (audit.Report, error) {
			return audit.Report{Listed: []audit.Listed{}, Differences: []audit.Difference{}}, nil
		}, http.StatusOK, `"differences": []`},
		{"a difference", func(context.Context) (audit.Report, error) { return report, nil }, http.StatusOK,
			`{"kind":"EndpointSlice","object":"shop/cart-a","field":"metadata.resourceVersion","cache":"10","list":"12","since":"2026-12-01T18:02:11Z","audits":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			Register(mux, Options{Discovery: model.NewStore(), XDS: fakeXDS{}, Consistency: tc.run})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			code, body := get(t, srv.URL+"/debug/consistencyz")
			compact := string(body)
			if code == http.StatusOK {
				var rep audit.Report
				if err := json.Unmarshal(body, &rep); err != nil {
					t.Fatalf("not a report: %v: %s", err, body)
				}
				if len(rep.Differences) > 0 {
					b, _ := json.Marshal(rep.Differences[0])
					compact = string(b)
				}
			}
			if code != tc.code || !strings.Contains(compact, tc.want) {
				t.Fatalf("%d %s, want %d with %s", code, body, tc.code, tc.want)
			}
		})
	}
}
