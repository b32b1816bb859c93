package serviceentry

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/file"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

const folder = `apiVersion: v1
kind: Namespace
metadata: {name: ns}
---
apiVersion: v1
kind: Service
metadata: {name: vm, namespace: ns}
spec:
  selector: {app: vm}
  ports: [{name: grpc, port: 7070, targetPort: 9000}]
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm1, namespace: ns}
spec: {address: 10.0.0.7, labels: {app: vm}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: ns}
spec:
  hosts: [ext.example.com]
  resolution: STATIC
  ports: [{number: 80, protocol: GRPC, name: grpc}]
  endpoints: [{address: 10.0.0.8}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: short, namespace: ns}
spec:
  hosts: [short]
  resolution: STATIC
  ports: [{number: 80, protocol: GRPC, name: grpc}]
`

// TestFromAFolder: with serve --from, the folder's registry is both the
// store of the Istio objects and the Kubernetes Services: a ServiceEntry
// is served, a WorkloadEntry joins the Service that selects it, and a
// refusal names the file and line.
func TestFromAFolder(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mesh.yaml"), []byte(folder), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := file.New(file.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	status := configstatus.NewReporter()
	r := New(files.Istio(), Options{Services: files, Reporter: status})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = files.Run(ctx) }()
	go func() { _ = r.Run(ctx) }()

	vm := model.ServiceHostname("vm", "ns", "")
	testenv.Eventually(t, "the entry and the WorkloadEntry served", func() (bool, string) {
		got := append(addrs(r.Endpoints("ext.example.com", 80, nil)), addrs(r.EndpointsByPortName(vm, "grpc", nil))...)
		return slices.Equal(got, []string{"10.0.0.8:80", "10.0.0.7:9000"}), strings.Join(got, ",")
	})
	st, _ := status.Get(configstatus.Ref{Kind: "ServiceEntry", Namespace: "ns", Name: "short"})
	list := status.List()
	where := ""
	for _, e := range list {
		if e.Name == "short" {
			where = e.Where
		}
	}
	if st.Refused == nil || st.Refused.Path != "spec.hosts[0]" || !strings.HasSuffix(where, "mesh.yaml:26 (document 5)") {
		t.Fatalf("short: %+v at %q", st.Refused, where)
	}
}
