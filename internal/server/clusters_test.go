package server

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
)

// twoClusters is a server over the local cluster's registry, its
// ServiceEntries and cluster b's registry, each a store holding "echo".
func twoClusters(t *testing.T, opts Options) (s *Server, local, entries, b *storeRegistry) {
	t.Helper()
	local, entries, b = newRegistry(), newRegistry(), newRegistry()
	for _, r := range []*storeRegistry{local, entries, b} {
		r.synced.Store(true)
	}
	opts.Sources = []aggregate.Source{
		{Name: aggregate.LocalSource, Controller: local},
		{Name: "serviceentries", Controller: entries},
		{Name: aggregate.RemoteSourcePrefix + "b", Controller: b},
	}
	return start(t, opts), local, entries, b
}

// TestPortConflictLoggedOnce: a port conflict is logged once when it
// appears, whatever the events of its hostname after that, and once when
// it ends.
func TestPortConflictLoggedOnce(t *testing.T) {
	logs := &logBuffer{}
	_, _, _, b := twoClusters(t, Options{ClusterID: "east", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	echo := func(port model.Port, addr string) {
		b.Update(&model.Service{Hostname: "echo.default.svc.cluster.local", Name: "echo", Namespace: "default", Ports: []model.Port{port}},
			[]*model.Endpoint{{Address: addr, Port: 7070, ServicePortName: port.Name}})
	}
	http7070 := model.Port{Name: "http", Port: 7070, Protocol: model.HTTP}
	for _, addr := range []string{"10.2.0.1", "10.2.0.2", "10.2.0.3"} {
		echo(http7070, addr)
	}
	echo(model.Port{Name: "grpc", Port: 7070, Protocol: model.GRPC}, "10.2.0.4")
	count := func(s string) int { return strings.Count(logs.String(), s) }
	if n := count("the ports of a service differ"); n != 1 {
		t.Fatalf("%d conflicts logged, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), `port 7070 is named \"grpc\" in east, \"http\" in b`) {
		t.Fatalf("the conflict's line does not name the clusters:\n%s", logs)
	}
	if n := count("the ports of a service agree again"); n != 1 {
		t.Fatalf("%d ends logged, want 1:\n%s", n, logs)
	}
}

// logBuffer collects log lines written from any goroutine.
type logBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestRegistrySizesByCluster: the size gauges count each cluster's
// registries, the local cluster's summing its Kubernetes registry and
// its ServiceEntries.
func TestRegistrySizesByCluster(t *testing.T) {
	s, _, _, _ := twoClusters(t, Options{ClusterID: "east"})
	resp, err := http.Get("http://" + s.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`meshpilot_registry_services{cluster="east"} 2`,
		`meshpilot_registry_endpoints{cluster="east"} 2`,
		`meshpilot_registry_services{cluster="b"} 1`,
		`meshpilot_registry_endpoints{cluster="b"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
