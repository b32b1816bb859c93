package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/debug"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds"
)

// debugPages serves fixed debug pages, as a meshpilot would.
func debugPages(t *testing.T, pages map[string]any) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func runStatus(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code := run(context.Background(), append([]string{"status"}, args...), &out, &out)
	return out.String(), code
}

func TestStatusTable(t *testing.T) {
	at := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	sent := func(v, n string) *xds.Sent { return &xds.Sent{Version: v, Nonce: n, Time: at} }
	url := debugPages(t, map[string]any{"/debug/syncz": []debug.SyncStatus{
		{Type: "grpc", ClientInfo: xds.ClientInfo{NodeID: "sidecar~10.0.0.7~cart.shop~shop.svc.cluster.local", Namespace: "shop", GRPC: true, Connected: at,
			Types: map[string]*xds.TypeSync{
				"LDS": {Status: xds.Synced, LastSent: sent("v1", "1"), LastACK: sent("v1", "1")},
				"RDS": {Status: xds.Stale, LastSent: sent("v2", "2")},
				"CDS": {Status: xds.NotSent},
				"EDS": {Status: xds.NACKed, LastSent: sent("v4", "4"), LastNACK: &xds.NACK{Version: "v4", Nonce: "4", Error: "bad weights"}},
			}, NACKs: 1}},
		{Type: "envoy", ClientInfo: xds.ClientInfo{Stream: 9, Delta: true, Connected: at}},
	}})
	out, code := runStatus(t, "--server", url)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	lines := strings.Split(out, "\n")
	for _, want := range [][]string{
		{"NAME", "NAMESPACE", "TYPE", "LDS", "RDS", "CDS", "EDS", "NACKS", "CONNECTED"},
		{"sidecar~10.0.0.7~cart.shop~shop.svc.cluster.local", "shop", "grpc", "SYNCED", "STALE", "NOT", "SENT", "NACKED", "1"},
		{"(stream", "9,", "no", "request", "yet)", "(delta)", "-", "envoy", "-", "-", "-", "-", "0"},
	} {
		found := false
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) >= len(want) && strings.Join(f[:len(want)], " ") == strings.Join(want, " ") {
				found = true
			}
		}
		if !found {
			t.Errorf("no line starting %q in:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "Rejected configuration:\n  sidecar~10.0.0.7~cart.shop~shop.svc.cluster.local EDS version v4: bad weights") {
		t.Errorf("the NACK's error is not listed:\n%s", out)
	}

	out, code = runStatus(t, "--server", debugPages(t, map[string]any{"/debug/syncz": []debug.SyncStatus{}}))
	if code != 0 || strings.TrimSpace(out) != "No xDS clients connected." {
		t.Errorf("no clients: exit %d\n%s", code, out)
	}
}

func TestStatusServices(t *testing.T) {
	host := model.Hostname("cart.shop.svc.cluster.local")
	url := debugPages(t, map[string]any{
		"/debug/registryz": []*model.Service{{Hostname: host, Name: "cart", Namespace: "shop", Resolution: model.Passthrough,
			Ports: []model.Port{{Name: "grpc", Port: 8080, Protocol: model.GRPC}, {Name: "http", Port: 80, Protocol: model.HTTP}}}},
		"/debug/endpointz": []debug.ServiceEndpoints{{Hostname: host, Ports: []debug.PortEndpoints{
			{Port: 8080, Endpoints: []*model.Endpoint{{Address: "10.0.0.1", Health: model.Healthy}, {Address: "10.0.0.2", Health: model.Draining}}},
			{Port: 80, Endpoints: []*model.Endpoint{{Address: "10.0.0.1", Health: model.Healthy}}},
		}}},
	})
	out, code := runStatus(t, "--server", strings.TrimPrefix(url, "http://"), "services")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[1]), " ") != "cart.shop.svc.cluster.local shop Passthrough 8080/GRPC,80/HTTP 2/3" {
		t.Fatalf("services:\n%s", out)
	}
}

func TestStatusErrors(t *testing.T) {
	for _, tc := range []struct {
		name, server, want string
	}{
		{"nothing listening", "http://127.0.0.1:1", "is meshpilot running"},
		{"debug pages elsewhere", debugPages(t, map[string]any{}), "--debug-addr"},
		{"not meshpilot", debugPages(t, map[string]any{"/debug/syncz": "hello"}), "not a meshpilot debug page"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runStatus(t, "--server", tc.server, "--timeout", "5s")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code == 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "meshpilot: ") || !strings.Contains(lines[0], tc.want) {
				t.Fatalf("exit %d, output:\n%s\nwant one error line naming %q", code, out, tc.want)
			}
		})
	}
}
