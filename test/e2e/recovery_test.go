package e2e

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/kubeclient"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// outage is how long the API server stays down in
// TestRecoveryAfterAPIServerOutage: long enough for client-go's reflector
// backoff (800 ms, doubling, jittered up to twice) to have grown past
// several steps, as it does in a real outage.
const outage = 15 * time.Second

// TestRecoveryAfterAPIServerOutage stops the API server under a running
// meshpilot for a while, starts it again, and at its return changes a
// Service and an EndpointSlice (a restarted API server refuses a watch
// from before the restart as too old: informers must list again); it waits until the model
// has both and a grpc-go client follows the slice, and logs how long that
// took after the API server's return: the recovery time. Its clients are
// built as serve builds them, behind kubeclient's outage gate, which must
// have closed and opened, with client-go's reflectors seeing no failed
// watch.
func TestRecoveryAfterAPIServerOutage(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.41", "127.0.0.42")
	createService(t, ns, "outage", 7070)
	writeSlice(t, ns, "outage", bs)
	clientGo := captureClientGoLog(t)
	logs := testutil.NewLines()
	log := slog.New(slog.NewTextHandler(logs, nil))
	// As serve builds its clients.
	client, err := kubeapi.NewForConfig(kubeclient.WithOutageGate(env.Config, kubeclient.OutageOptions{Logger: log}))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := kube.New(client, kube.Options{Namespaces: []string{ns}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := testutil.RunServer(t, reg, log)
	cc := grpctest.Channel(t, srv.XDSAddr(), "xds:///outage:7070",
		grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, bs...)

	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	started := make(chan error, 1)
	startCalled := false
	t.Cleanup(func() {
		if !startCalled {
			_ = env.StartAPIServer()
		}
	})
	// The outage's length is the experiment, not a wait for an event.
	time.Sleep(outage - time.Since(stopped))
	startCalled = true
	go func() { started <- env.StartAPIServer() }()
	defer func() { <-started }()
	host := model.ServiceHostname("outage", ns, model.DefaultDomainSuffix)
	// The API server is back when it first serves a request, which is
	// some time before it says it is ready, and before StartAPIServer,
	// polling at its own pace, returns.
	back, ready := awaitBack(t, func() {
		svc, err := env.Client.CoreV1().Services(ns).Get(ctx(t), "outage", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "http", Port: 8080})
		if _, err := env.Client.CoreV1().Services(ns).Update(ctx(t), svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		writeSlice(t, ns, "outage", bs, bs[0])
	})
	grpctest.AwaitSpread(t, cc, bs[1])
	clientSaw := time.Now()
	testenv.Eventually(t, "the Service's new port in the model", func() (bool, string) {
		svc := reg.GetService(host)
		return svc != nil && len(svc.Ports) == 2, "one port"
	})
	exact := time.Now() // both changes in: the later of the two, to a poll
	t.Logf("recovery (outage %s): model exact %.2fs after the API server served again (%.2fs after /readyz OK); "+
		"a grpc-go client followed the slice %.2fs after (%.2fs after /readyz OK)", outage,
		exact.Sub(back).Seconds(), exact.Sub(ready).Seconds(), clientSaw.Sub(back).Seconds(), clientSaw.Sub(ready).Seconds())
	for _, want := range []string{"API server unreachable", "API server back after"} {
		logs.Await(t, want, 0, func(l string) bool { return strings.Contains(l, want) })
	}
	// Every request of a reflector is a GET, which the gate holds back or
	// sends again, or a resumed watch, which it answers 410 Expired: the
	// outage never reached them as a failed list or watch, the failures
	// that grow their backoff.
	failed := 0
	for _, l := range strings.Split(clientGo.String(), "\n") {
		low := strings.ToLower(l)
		if strings.Contains(l, "/namespaces/"+ns+"/") && (strings.Contains(low, "watch failed") ||
			strings.Contains(low, "failed to watch") || strings.Contains(low, "failed to list")) {
			failed++
		}
	}
	if failed != 0 {
		t.Fatalf("meshpilot's reflectors saw %d failed requests through the outage gate:\n%s", failed, clientGo.String())
	}
}

// awaitBack polls the stopped API server until it serves a request (a
// GET of the EndpointSlices of a namespace), calls served at once, and
// returns when it did and when /readyz first answered OK. Each poll is
// one request, without client-go's retries.
func awaitBack(t *testing.T, served func()) (back, ready time.Time) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) && (back.IsZero() || ready.IsZero()) {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		rest := env.Client.Discovery().RESTClient()
		if back.IsZero() {
			if _, err := rest.Get().AbsPath("/apis/discovery.k8s.io/v1/endpointslices").Param("limit", "1").MaxRetries(0).DoRaw(c); err == nil {
				back = time.Now()
				served()
			}
		}
		if ready.IsZero() {
			if _, err := rest.Get().AbsPath("/readyz").MaxRetries(0).DoRaw(c); err == nil {
				ready = time.Now()
			}
		}
		cancel()
		time.Sleep(20 * time.Millisecond) // between polls
	}
	if back.IsZero() || ready.IsZero() {
		t.Fatal("the API server never came back")
	}
	return back, ready
}
