package file

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
)

// TestVirtualServiceStatusNamesFileAndLine: in file mode a VirtualService
// is refused as in a cluster (two destinations both of weight 0), with the
// file, line and document it was read from, and applied once mended.
func TestVirtualServiceStatusNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	status := configstatus.NewReporter()
	crd.NewRoutes(r.Istio(), crd.RouteOptions{Status: status})
	path := filepath.Join(dir, "routes.yaml")
	vs := func(w1, w2 string) string {
		return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - route:
    - {destination: {host: reviews}, weight: ` + w1 + `}
    - {destination: {host: ratings}, weight: ` + w2 + `}
`
	}
	for _, step := range []struct {
		content, where, state, field string
	}{
		{goodService + "---\n" + vs("0", "0"), path + ":10 (document 2)", "refused", "spec.http[0].route"},
		{vs("80", "20"), path + ":1 (document 1)", "applied", ""},
	} {
		if err := os.WriteFile(path, []byte(step.content), 0o644); err != nil {
			t.Fatal(err)
		}
		r.reload(nil, time.Time{})
		entries := status.List()
		if len(entries) != 1 || entries[0].Where != step.where || entries[0].State() != step.state {
			t.Fatalf("status %+v, want one %s entry at %s", entries, step.state, step.where)
		}
		if f := entries[0].Refused; step.field != "" && (f == nil || f.Path != step.field) {
			t.Fatalf("refused %+v, want field %s", f, step.field)
		}
	}
}
