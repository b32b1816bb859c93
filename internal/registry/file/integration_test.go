package file_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/registry/file"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// manifests describes a service whose endpoints are the backends;
// notReady ones are marked not ready.
func manifests(service string, port int32, bs []grpctest.Backend, notReady ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Service
metadata: {name: %s, namespace: files}
spec:
  ports: [{name: grpc, port: %d}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s-1
  namespace: files
  labels: {kubernetes.io/service-name: %s}
addressType: IPv4
ports: [{name: grpc, port: %d}]
endpoints:
`, service, port, service, service, bs[0].Port)
	for _, be := range bs {
		ready := true
		for _, nr := range notReady {
			ready = ready && nr != be.IP
		}
		fmt.Fprintf(&b, "- addresses: [%s]\n  conditions: {ready: %t}\n", be.IP, ready)
	}
	return b.String()
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGRPCClientsFollowTheFolder runs meshpilot on a folder and sends real
// RPCs through grpc-go xDS channels to backends on loopback while the
// folder is edited.
func TestGRPCClientsFollowTheFolder(t *testing.T) {
	dir := t.TempDir()
	bs := grpctest.StartBackends(t, "127.0.0.31", "127.0.0.32", "127.0.0.33")
	writeFile(t, filepath.Join(dir, "namespace.yaml"), "apiVersion: v1\nkind: Namespace\nmetadata: {name: files}\n")
	echo := filepath.Join(dir, "echo.yaml")
	writeFile(t, echo, manifests("echo", 7070, bs))

	logs := testutil.NewLines()
	log := slog.New(slog.NewTextHandler(logs, nil))
	reg, err := file.New(file.Options{Dir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("meshpilot log:\n%s", logs.String())
		}
	})
	srv := testutil.RunServer(t, reg, log)

	cc := grpctest.Channel(t, srv.XDSAddr(), "xds:///echo.files.svc.cluster.local:7070", grpctest.ChannelOptions{Namespace: "files"})
	t.Run("RPCs spread over the folder's endpoints", func(t *testing.T) {
		grpctest.AwaitSpread(t, cc, bs...)
	})

	t.Run("an endpoint marked not ready stops receiving RPCs", func(t *testing.T) {
		start := time.Now()
		writeFile(t, echo, manifests("echo", 7070, bs, bs[1].IP))
		grpctest.AwaitSpread(t, cc, bs[0], bs[2])
		took := time.Since(start)
		t.Logf("traffic moved %v after the save", took.Round(time.Millisecond))
		if took > time.Second {
			t.Fatalf("traffic moved %v after the save; a saved edit must reach clients within a second", took)
		}
	})

	t.Run("a broken file keeps serving its last good content", func(t *testing.T) {
		reloads := reg.Reloads()
		logFrom := logs.Len()
		broken := strings.Replace(manifests("echo", 7070, bs), "port: 7070", "port: 70000", 1)
		writeFile(t, echo, broken)
		deadline := time.Now().Add(grpctest.Wait)
		for reg.Reloads() == reloads || len(reg.Problems()) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the broken file was never reported")
			}
			time.Sleep(5 * time.Millisecond)
		}
		want := fmt.Sprintf("file=%s document=1 line=1 field=spec.ports[0].port", echo)
		logs.Await(t, want, logFrom, func(l string) bool { return strings.Contains(l, want) })
		// Still the last good content: bs[1] not ready.
		grpctest.AwaitSpread(t, cc, bs[0], bs[2])
	})

	t.Run("fixing the file applies it", func(t *testing.T) {
		writeFile(t, echo, manifests("echo", 7070, bs))
		grpctest.AwaitSpread(t, cc, bs...)
	})

	t.Run("a new file in a new subfolder adds a service", func(t *testing.T) {
		writeFile(t, filepath.Join(dir, "teams", "blue", "fresh.yaml"), manifests("fresh", 7071, bs[2:]))
		fresh := grpctest.Channel(t, srv.XDSAddr(), "xds:///fresh:7071", grpctest.ChannelOptions{Namespace: "files"})
		grpctest.AwaitSpread(t, fresh, bs[2])
	})

	t.Run("a deleted file takes its service away", func(t *testing.T) {
		if err := os.Remove(echo); err != nil {
			t.Fatal(err)
		}
		grpctest.AwaitUnavailable(t, cc)
	})

	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs", n)
	}
}
