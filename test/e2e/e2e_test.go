// Package e2e runs meshpilot against a real kube-apiserver and sends real
// RPCs through unmodified grpc-go xDS clients to gRPC servers on loopback.
//
// The API server refuses loopback addresses in EndpointSlices, so slices
// carry documentation addresses (192.0.2.N) and the clients dial
// 127.0.0.N instead (grpctest.DocToLoopback).
package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/server"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == myGRPCClient {
		os.Exit(runMyGRPCClient())
	}
	testenv.Main(m, &env)
}

// startMeshpilot runs meshpilot in-process on loopback, watching ns only.
func startMeshpilot(t *testing.T, ns string) *server.Server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg, err := kube.New(env.API, kube.Options{Namespaces: []string{ns}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return testutil.RunServer(t, reg, log)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func createService(t *testing.T, ns, name string, port int32) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "grpc", Port: port}}},
	}
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// docAddr is the slice address of a loopback backend: 127.0.0.N -> 192.0.2.N.
func docAddr(b grpctest.Backend) string {
	return "192.0.2." + strings.TrimPrefix(b.IP, "127.0.0.")
}

// writeSlice creates or replaces the one slice of a service. notReady
// lists backends whose endpoint is not ready.
func writeSlice(t *testing.T, ns, service string, backends []grpctest.Backend, notReady ...grpctest.Backend) {
	t.Helper()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: service + "-slice", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if len(backends) > 0 {
		s.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("grpc"), Port: ptr.To(int32(backends[0].Port))}}
	}
	for _, b := range backends {
		ready := true
		for _, nr := range notReady {
			ready = ready && nr.IP != b.IP
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{docAddr(b)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
		})
	}
	env.ApplyEndpointSlice(t, s)
}

func TestGRPCClientsFollowKubernetes(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.21", "127.0.0.22", "127.0.0.23")
	createService(t, ns, "echo", 7070)
	writeSlice(t, ns, "echo", bs)
	srv := startMeshpilot(t, ns)
	channel := func(target, clientNS string) *grpc.ClientConn {
		return grpctest.Channel(t, srv.XDSAddr(), target,
			grpctest.ChannelOptions{Namespace: clientNS, MapAddress: grpctest.DocToLoopback})
	}

	cc := channel("xds:///echo."+ns+".svc.cluster.local:7070", "other")
	t.Run("RPCs spread over all ready endpoints", func(t *testing.T) {
		grpctest.AwaitSpread(t, cc, bs...)
	})
	t.Run("a not-ready endpoint stops receiving RPCs", func(t *testing.T) {
		writeSlice(t, ns, "echo", bs, bs[1])
		grpctest.AwaitSpread(t, cc, bs[0], bs[2])
		writeSlice(t, ns, "echo", bs)
		grpctest.AwaitSpread(t, cc, bs...)
	})
	t.Run("scaling to zero gives Unavailable, scaling back recovers", func(t *testing.T) {
		writeSlice(t, ns, "echo", nil)
		grpctest.AwaitUnavailable(t, cc)
		writeSlice(t, ns, "echo", bs[:1])
		grpctest.AwaitSpread(t, cc, bs[0])
		writeSlice(t, ns, "echo", bs)
		grpctest.AwaitSpread(t, cc, bs...)
	})
	t.Run("short names relative to the client namespace", func(t *testing.T) {
		grpctest.AwaitSpread(t, channel("xds:///echo:7070", ns), bs...)
		grpctest.AwaitSpread(t, channel("xds:///echo."+ns+":7070", "other"), bs...)
		grpctest.AwaitSpread(t, channel("xds:///echo."+ns+".svc:7070", "other"), bs...)
	})
	t.Run("a new service appears to a new channel without restart", func(t *testing.T) {
		createService(t, ns, "fresh", 7071)
		writeSlice(t, ns, "fresh", bs[2:])
		grpctest.AwaitSpread(t, channel("xds:///fresh:7071", ns), bs[2])
	})
	t.Run("a deleted service disappears", func(t *testing.T) {
		if err := env.Client.CoreV1().Services(ns).Delete(ctx(t), "echo", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		grpctest.AwaitUnavailable(t, cc)
	})
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs", n)
	}
}

// TestServeCommand runs the real binary against the API server: it
// becomes ready and serves a grpc-go client.
func TestServeCommand(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.24")
	createService(t, ns, "cmd", 7070)
	writeSlice(t, ns, "cmd", bs)

	bin := testutil.BuildMeshpilot(t)
	xdsAddr, httpAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	startProcess(t, bin, "serve", "--kubeconfig", env.Kubeconfig, "--namespaces", ns,
		"--xds-addr", xdsAddr, "--http-addr", httpAddr)
	testutil.AwaitHTTP(t, "http://"+httpAddr+"/readyz", http.StatusOK)
	testutil.AwaitHTTP(t, "http://"+httpAddr+"/healthz", http.StatusOK)
	cc := grpctest.Channel(t, xdsAddr, "xds:///cmd:7070", grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, bs...)
}

func TestServeCommandErrors(t *testing.T) {
	bin := testutil.BuildMeshpilot(t)
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"no kubeconfig anywhere", []string{"serve"}, []string{"HOME=" + t.TempDir(), "KUBECONFIG="}, "kubeconfig"},
		{"missing kubeconfig file", []string{"serve", "--kubeconfig", "/nonexistent/kubeconfig"}, nil, "/nonexistent/kubeconfig"},
		{"unreachable API server", []string{"serve", "--kubeconfig", unreachableKubeconfig(t)}, nil, "127.0.0.1:1"},
		{"memory limit ratio out of range", []string{"serve", "--memory-limit-ratio", "2"}, nil, "--memory-limit-ratio: ratio 2 is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runProcess(t, bin, tc.env, tc.args...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			last := lines[len(lines)-1]
			if code == 0 || !strings.HasPrefix(last, "meshpilot: ") || !strings.Contains(last, tc.want) {
				t.Fatalf("exit %d, output:\n%s\nwant a failing exit and a last line naming %q", code, out, tc.want)
			}
			if len(lines) > 3 {
				t.Fatalf("want one clear sentence, not a stack of retries; got:\n%s", out)
			}
		})
	}
}

func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	return writeFile(t, "kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, "https://127.0.0.1:1"))
}

// TestAPIServerRestartKeepsServing stops the API server under a running
// meshpilot: once meshpilot's watches have failed, clients keep the
// endpoints they have and RPCs keep flowing; once it is back, changes are
// pushed again.
func TestAPIServerRestartKeepsServing(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.26", "127.0.0.27")
	createService(t, ns, "steady", 7070)
	writeSlice(t, ns, "steady", bs)
	clientGo := captureClientGoLog(t)
	srv := startMeshpilot(t, ns)
	cc := grpctest.Channel(t, srv.XDSAddr(), "xds:///steady:7070",
		grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, bs...)

	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = env.StartAPIServer()
		}
	})
	// client-go retries a refused watch quietly, at debug level (meshpilot
	// serve --log-level debug shows it): the first refusal says that the
	// outage has reached meshpilot's EndpointSlice informer.
	clientGo.Await(t, "meshpilot's EndpointSlice watch refused", 0, func(l string) bool {
		return strings.Contains(l, "Watch failed") && strings.Contains(l, "*v1.EndpointSlice") &&
			strings.Contains(l, "/namespaces/"+ns+"/") && strings.Contains(l, "connection refused")
	})
	// Without the API server the model stays as it was and is still served,
	// to this client and to a new one.
	grpctest.AwaitSpread(t, cc, bs...)
	grpctest.AwaitSpread(t, grpctest.Channel(t, srv.XDSAddr(), "xds:///steady:7070",
		grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback}), bs...)

	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	writeSlice(t, ns, "steady", bs, bs[0])
	grpctest.AwaitSpread(t, cc, bs[1])
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs", n)
	}
}

// captureClientGoLog collects what client-go logs through klog, debug
// level included, as meshpilot serve routes it into its own log. klog's
// logger may change only while nothing logs: call it before meshpilot
// starts; it is restored after meshpilot stops.
func captureClientGoLog(t *testing.T) *testutil.Lines {
	t.Helper()
	out := testutil.NewLines()
	klog.SetSlogLogger(slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(klog.ClearLogger)
	return out
}
