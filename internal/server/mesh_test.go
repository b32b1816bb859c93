package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

// TestMeshConfigFileReload edits the mesh config file of a running server:
// the route a client holds changes its retry policy, and /debug/configz
// shows the config in force, its source, the fields ignored and the
// cluster-local hosts.
func TestMeshConfigFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("defaultHttpRetryPolicy: {attempts: 3}\n")
	mesh, err := meshconfig.FromFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry()
	reg.synced.Store(true)
	s := start(t, Options{Sources: reg.sources(), Mesh: mesh})

	conn, err := grpc.NewClient(s.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := xdstest.Connect(t, conn, xdstest.Options{
		Node:    xdstest.GRPCNode(xdstest.NodeOptions{ID: xdstest.SidecarID("10.0.0.1", "client", "default"), Namespace: "default"}),
		AutoACK: true, Wait: 20 * time.Second,
	})
	const name = "outbound|7070||echo.default.svc.cluster.local"
	c.Subscribe(resourcev3.RouteType, name)
	retries := func() int {
		p := c.RouteConfiguration(name).GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetRetryPolicy()
		if p == nil {
			return 0
		}
		return int(p.GetNumRetries().GetValue())
	}
	c.WaitUntil("the route with 3 retries", func() bool { return c.RouteConfiguration(name) != nil && retries() == 3 })

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
