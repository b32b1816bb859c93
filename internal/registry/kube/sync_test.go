package kube

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// How a test knows that a controller has emitted everything it owes for
// what the test wrote, with no quiet period (a busy machine outlasts any):
// it writes a sync point, a Service of its own with an EndpointSlice, and
// waits for their events, then for the work queue to be idle.
//
// The Service and EndpointSlice informers hand their events to the
// handlers in the order of the writes, so once the controller has emitted
// the sync point's events, every earlier Service and EndpointSlice event
// has queued its rebuild; once the work queue is then idle, every rebuild
// queued so far is done, and its event handled (handlers run on the
// worker, before it is done with the key). Pod, Node and Namespace events
// are not ordered with the sync point's: a test that writes those waits
// for what they change in the model first, and the rebuilds they queued
// before that are done once the queue is idle.

// syncPrefix starts the names of sync points' Services.
const syncPrefix = "sync-"

// syncAddress is the sync points' endpoint, a documentation address that
// no test's Pod or slice uses.
const syncAddress = "198.51.100.1"

// recorder keeps the change events a controller emits, and writes sync
// points; the events of sync points are kept apart.
type recorder struct {
	// client writes sync points into syncNS, a namespace the controller
	// watches and selects.
	client kubernetes.Interface
	syncNS string
	// suffix is the controller's domain suffix.
	suffix string
	// queue follows the controller's work queue (Options.QueueMetrics).
	queue testenv.QueueProbe

	mu       sync.Mutex // guards the fields below
	events   []model.Event
	synced   map[syncEvent]bool
	points   int
	informer map[string]int // informer events by "kind event"
}

// syncEvent is what a sync point waits for: an event of its Service.
type syncEvent struct {
	kind        model.EventKind
	host        model.Hostname
	noEndpoints bool
}

func newRecorder(client kubernetes.Interface, syncNS string) *recorder {
	return &recorder{client: client, syncNS: syncNS, synced: map[syncEvent]bool{}, informer: map[string]int{}}
}

// instrument returns opts with the work queue followed and informer
// events counted by the recorder.
func (r *recorder) instrument(opts Options) Options {
	r.suffix = model.DomainSuffixOrDefault(opts.DomainSuffix)
	opts.QueueMetrics = &r.queue
	opts.OnInformerEvent = func(kind, event string) {
		r.mu.Lock()
		r.informer[kind+" "+event]++
		r.mu.Unlock()
	}
	return opts
}

// informerEvents is how many informer events of a kind ("Node") and event
// ("update") the controller has handled.
func (r *recorder) informerEvents(kind, event string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.informer[kind+" "+event]
}

func (r *recorder) add(ev model.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if strings.HasPrefix(string(ev.Hostname), syncPrefix) {
		r.synced[syncEvent{ev.Kind, ev.Hostname, ev.NoEndpoints}] = true
		return
	}
	r.events = append(r.events, ev)
}

// take returns and forgets the events recorded so far for a namespace.
func (r *recorder) take(namespace string) []model.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out, rest []model.Event
	for _, ev := range r.events {
		if ev.Namespace == namespace {
			out = append(out, ev)
		} else {
			rest = append(rest, ev)
		}
	}
	r.events = rest
	return out
}

// point writes a sync point and returns once the controller has emitted
// every event it owes for what was written before (see the top of this
// file). The point's Service is created, given its EndpointSlice, which
// is then deleted, and deleted, each step awaited by its event, so that
// the Service and EndpointSlice informers both deliver an event of it and
// the model holds nothing of it afterwards.
func (r *recorder) point(t *testing.T) {
	t.Helper()
	if r.syncNS == "" {
		t.Fatal("the recorder has no namespace for sync points")
	}
	r.mu.Lock()
	r.points++
	name := fmt.Sprintf("%s%d", syncPrefix, r.points)
	r.mu.Unlock()
	ns := r.syncNS
	host := model.ServiceHostname(name, ns, r.suffix)
	await := func(kind model.EventKind, noEndpoints bool) {
		t.Helper()
		ev := syncEvent{kind, host, noEndpoints}
		testenv.Eventually(t, fmt.Sprintf("sync point %s/%s: %v", ns, name, ev), func() (bool, string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.synced[ev], "not emitted"
		})
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{grpcPort}},
	}
	if _, err := r.client.CoreV1().Services(ns).Create(ctx(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("sync point: %v", err)
	}
	await(model.ServiceChanged, true)
	s := slice(ns, name, name, 9090, grpcPort.Name, sliceEndpoint{ip: syncAddress})
	if _, err := r.client.DiscoveryV1().EndpointSlices(ns).Create(ctx(t), s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("sync point: %v", err)
	}
	await(model.EndpointsChanged, false)
	if err := r.client.DiscoveryV1().EndpointSlices(ns).Delete(ctx(t), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("sync point: %v", err)
	}
	await(model.EndpointsChanged, true)
	if err := r.client.CoreV1().Services(ns).Delete(ctx(t), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("sync point: %v", err)
	}
	await(model.ServiceDeleted, true)
	r.idle(t)
}

// idle waits until the work queue holds no key and no worker is busy with
// one: every rebuild queued so far is done, and its events handled.
func (r *recorder) idle(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, "an idle work queue", func() (bool, string) {
		n := r.queue.Pending()
		return n == 0, fmt.Sprintf("%d keys queued or in work", n)
	})
}
