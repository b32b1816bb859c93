package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshpilot/meshpilot/internal/debug"
	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// echoCluster is the route configuration, cluster and endpoint assignment of
// the registry's service.
const echoCluster = "outbound|7070||echo.default.svc.cluster.local"

// meshServer starts a server of newRegistry with the mesh config file
// path, first holding mesh, and a gRPC client of it; write replaces the
// file.
func meshServer(t *testing.T, mesh string) (s *Server, c *xdstest.TestClient, path string, write func(string)) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "mesh.yaml")
	write = func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(mesh)
	w, err := meshconfig.FromFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry()
	reg.synced.Store(true)
	s = start(t, Options{Sources: reg.sources(), Mesh: w})
	conn, err := grpc.NewClient(s.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c = xdstest.Connect(t, conn, xdstest.Options{
		Node:    xdstest.GRPCNode(xdstest.NodeOptions{ID: xdstest.SidecarID("10.0.0.1", "client", "default"), Namespace: "default"}),
		AutoACK: true, Wait: 20 * time.Second,
	})
	return s, c, path, write
}

// TestMeshConfigFileReload edits the mesh config file of a running server:
// the route a client holds changes its retry policy, and /debug/configz
// shows the config in force, its source, the fields ignored and the
// cluster-local hosts.
func TestMeshConfigFileReload(t *testing.T) {
	s, c, path, write := meshServer(t, "defaultHttpRetryPolicy: {attempts: 3}\n")
	c.Subscribe(resourcev3.RouteType, echoCluster)
	retries := func() int {
		p := c.RouteConfiguration(echoCluster).GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetRetryPolicy()
		if p == nil {
			return 0
		}
		return int(p.GetNumRetries().GetValue())
	}
	c.WaitUntil("the route with 3 retries", func() bool { return c.RouteConfiguration(echoCluster) != nil && retries() == 3 })

	write("defaultHttpRetryPolicy: {attempts: 0}\nenableTracing: true\nserviceSettings: [{settings: {clusterLocal: true}, hosts: ['*.shop.svc.cluster.local']}]\n")
	c.WaitUntil("the route without retries", func() bool { return retries() == 0 })

	resp, err := http.Get("http://" + s.HTTPAddr() + "/debug/configz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var z debug.Configz
	if err := json.NewDecoder(resp.Body).Decode(&z); err != nil {
		t.Fatal(err)
	}
	if z.MeshConfig.Source != "file "+path || !slices.Equal(z.MeshConfig.Ignored, []string{"enableTracing"}) || z.MeshConfig.Mesh == nil {
		t.Errorf("/debug/configz mesh config %+v, want the file, its config and enableTracing ignored", z.MeshConfig)
	}
	wantLocal := model.ClusterLocalHosts{
		{Host: "kubernetes.default.svc.cluster.local", ClusterLocal: true, Default: true},
		{Host: "*.kube-system.svc.cluster.local", ClusterLocal: true, Default: true},
		{Host: "*.shop.svc.cluster.local", ClusterLocal: true},
	}
	if !reflect.DeepEqual(z.MeshConfig.ClusterLocalHosts, wantLocal) {
		t.Errorf("/debug/configz cluster-local hosts %+v, want %+v", z.MeshConfig.ClusterLocalHosts, wantLocal)
	}
}

// TestMeshConfigLocalityReload edits the mesh config file's
// localityLbSetting under a running server: the endpoint assignment a
// client holds follows it (a distribute entry naming no locality of the
// service's endpoints leaves none), and the route it holds is not resent.
func TestMeshConfigLocalityReload(t *testing.T) {
	_, c, _, write := meshServer(t, "{}\n")
	c.Subscribe(resourcev3.RouteType, echoCluster)
	c.Subscribe(resourcev3.EndpointType, echoCluster)
	addrs := func() string { return strings.Join(xdstest.Addresses(c.LoadAssignment(echoCluster)), ",") }
	c.WaitUntil("echo's endpoint and route", func() bool { return c.RouteConfiguration(echoCluster) != nil && addrs() == "10.1.0.1" })
	routeVersion := c.Version(resourcev3.RouteType)

	write("localityLbSetting: {distribute: [{from: '*', to: {r9: 100}}]}\n")
	c.WaitUntil("no endpoint outside r9", func() bool { return c.LoadAssignment(echoCluster) != nil && addrs() == "" })
	write("localityLbSetting: {enabled: false}\n")
	c.WaitUntil("echo's endpoint back", func() bool { return addrs() == "10.1.0.1" })
	if v := c.Version(resourcev3.RouteType); v != routeVersion {
		t.Errorf("the route was resent (version %s, then %s) after a change of localityLbSetting alone", routeVersion, v)
	}
}
