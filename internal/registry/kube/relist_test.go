package kube

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/kubeclient"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// cutProxy forwards TCP to an address until it is cut: then it closes every
// open connection and refuses new ones until restored. It stands for a
// network partition between meshpilot and the API server.
type cutProxy struct {
	lis    net.Listener
	target string
	cut    atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{lis: lis, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { lis.Close(); p.closeAll() })
	return p
}

func (p *cutProxy) serve() {
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		if p.cut.Load() {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); out.Close() }()
		go func() { _, _ = io.Copy(in, out); in.Close() }()
	}
}

func (p *cutProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *cutProxy) Cut()     { p.cut.Store(true); p.closeAll() }
func (p *cutProxy) Restore() { p.cut.Store(false) }

// TestRelistAfterWatchExpiry cuts meshpilot off the API server, changes the
// cluster meanwhile and waits until etcd has compacted past what meshpilot
// saw, so that its watches come back with 410 Gone (from the API server; or,
// behind the outage gate serve builds its clients with, from the gate during
// the cut) and its informers relist. The model must end with exactly the
// API's state, with one event per real change and none for the objects that
// did not change. It logs how long after the reconnection that took.
func TestRelistAfterWatchExpiry(t *testing.T) {
	// Without the watch cache, watches are served by etcd, and the API
	// server compacts etcd every second: an old resourceVersion expires
	// quickly and for certain.
	env2, err := testenv.StartWith(testenv.Options{APIServerFlags: map[string]string{
		"watch-cache":              "false",
		"etcd-compaction-interval": "1s",
	}})
	if err != nil {
		t.Fatalf("a second API server is required: %v", err)
	}
	defer env2.Stop()
	for _, tc := range []struct {
		name, ns string
		gated    bool
	}{
		// The API server answers the resumed watch 410 once the
		// connection is back.
		{"plain client", "relist", false},
		// As serve builds its clients: the gate answers the resumed watch
		// 410 during the cut, and the list after it waits for the return.
		{"outage gate", "relist-gated", true},
	} {
		t.Run(tc.name, func(t *testing.T) { relistAfterWatchExpiry(t, env2, tc.ns, tc.gated) })
	}
}

// relistAfterWatchExpiry is TestRelistAfterWatchExpiry in namespace ns of
// env2, with a client behind the outage gate when gated.
func relistAfterWatchExpiry(t *testing.T, env2 *testenv.Env, ns string, gated bool) {
	direct := env2.Client
	if _, err := direct.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create := func(name string) *corev1.Service {
		t.Helper()
		svc, err := direct.CoreV1().Services(ns).Create(ctx(t), &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{grpcPort}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	create("gone")
	create("changed")
	create("steady")

	u, err := url.Parse(env2.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	cfg := rest.CopyConfig(env2.Config)
	cfg.Host = "https://" + proxy.lis.Addr().String()
	if gated {
		cfg = kubeclient.WithOutageGate(cfg, kubeclient.OutageOptions{Logger: slog.New(slog.DiscardHandler)})
	}
	client, err := kubeapi.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(direct, ns)
	c, err := New(client, rec.instrument(Options{Namespaces: []string{ns}}))
	if err != nil {
		t.Fatal(err)
	}
	c.AppendEventHandler(rec.add)
	serviceUpdates := func() int { return rec.informerEvents("Service", "update") }
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	testenv.Eventually(t, "synced", func() (bool, string) { return c.HasSynced(), "" })
	if svcs, _ := c.Len(); svcs != 3 {
		t.Fatalf("%d services at sync, want 3", svcs)
	}
	settledEvents(t, rec, ns)

	proxy.Cut()
	cutAt := time.Now()
	// What the informer saw last may be newer than the last object (a
	// bookmark): its watch expires only when compaction passes that.
	seenRV := c.scopes[ns].services.LastSyncResourceVersion()
	if err := direct.CoreV1().Services(ns).Delete(ctx(t), "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	changed, err := direct.CoreV1().Services(ns).Get(ctx(t), "changed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changed.Spec.Ports = append(changed.Spec.Ports, corev1.ServicePort{Name: "http", Port: 80})
	if _, err := direct.CoreV1().Services(ns).Update(ctx(t), changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	create("added")

	// Wait until a watch from what meshpilot last saw is refused as expired.
	testenv.Eventually(t, "etcd compaction past the informers' resourceVersion", func() (bool, string) {
		w, err := direct.CoreV1().Services(ns).Watch(ctx(t), metav1.ListOptions{ResourceVersion: seenRV})
		if err != nil {
			return apierrors.IsResourceExpired(err) || apierrors.IsGone(err), err.Error()
		}
		defer w.Stop()
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Error {
				st := apierrors.FromObject(ev.Object)
				return apierrors.IsResourceExpired(st) || apierrors.IsGone(st), st.Error()
			}
			return false, "watch still served from " + seenRV
		case <-time.After(200 * time.Millisecond):
			return false, "watch still open from " + seenRV
		}
	})
	before := serviceUpdates()
	proxy.Restore()
	restored := time.Now()

	host := func(name string) model.Hostname { return model.ServiceHostname(name, ns, model.DefaultDomainSuffix) }
	testenv.Eventually(t, "the API's state after the relist", func() (bool, string) {
		ch := c.GetService(host("changed"))
		ok := c.GetService(host("gone")) == nil && c.GetService(host("added")) != nil &&
			c.GetService(host("steady")) != nil && ch != nil && len(ch.Ports) == 2
		return ok, "model not caught up"
	})
	t.Logf("recovery: the model matched the API %.2fs after the connection came back (cut for %.1fs)",
		time.Since(restored).Seconds(), restored.Sub(cutAt).Seconds())
	// A relist replays every object as an update; a resumed watch would
	// have given one update (for "changed") alone.
	testenv.Eventually(t, "a relist", func() (bool, string) {
		n := serviceUpdates() - before
		return n >= 2, "service updates since the restore: " + strconv.Itoa(n)
	})
	got := map[model.Event]int{}
	for _, ev := range settledEvents(t, rec, ns) {
		ev.Observed, ev.SameServiceAccounts = time.Time{}, false
		got[ev]++
	}
	want := map[model.Event]int{
		{Kind: model.ServiceDeleted, Hostname: host("gone"), Namespace: ns, NoEndpoints: true}:    1,
		{Kind: model.ServiceChanged, Hostname: host("changed"), Namespace: ns, NoEndpoints: true}: 1,
		{Kind: model.ServiceChanged, Hostname: host("added"), Namespace: ns, NoEndpoints: true}:   1,
	}
	if len(got) != len(want) {
		t.Fatalf("events after the relist = %v, want %v", got, want)
	}
	for ev, n := range want {
		if got[ev] != n {
			t.Fatalf("events after the relist = %v, want %v", got, want)
		}
	}
	if svcs, _ := c.Len(); svcs != 3 {
		t.Fatalf("%d services after the relist, want 3", svcs)
	}
}
