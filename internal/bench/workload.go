package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

const (
	// ServicePort is the port of every benchmark service; clients ask for
	// "<fqdn>:7070".
	ServicePort = 7070
	targetPort  = 8080
	portName    = "grpc"
	region      = "bench-region"
)

// addrBase is the first endpoint address: 10.128.0.0/9 lies outside the
// API server's service range (testenv.ServiceCIDR, 10.96.0.0/12) and holds
// eight million addresses. Nothing ever dials them.
var addrBase = binary.BigEndian.Uint32(netip.MustParseAddr("10.128.0.0").AsSlice())

// service is one benchmark service and the slice that holds its endpoints.
type service struct {
	idx      int
	name, ns string
	hostname string
	mu       sync.Mutex                 // serialises slice writes
	slice    *discoveryv1.EndpointSlice // as last written (keptSlice)
	// vs is its VirtualService as last written (Config.TrafficRules),
	// v1Weight the weight of its route to subset v1.
	vs       *networkingv1.VirtualService
	v1Weight uint32
	// authz is its AuthorizationPolicy as last written
	// (Config.SecurityPolicies), after authzChanges changes.
	authz        *securityv1.AuthorizationPolicy
	authzChanges int
	// route is its HTTPRoute as last written (Config.GatewayRoutes); its
	// weight to itself is v1Weight.
	route *gatewayv1.HTTPRoute
}

func (s *service) listenerName() string { return fmt.Sprintf("%s:%d", s.hostname, ServicePort) }

// workload writes and changes the Kubernetes objects of a run.
type workload struct {
	client   kubernetes.Interface
	cfg      *Config
	services []*service
	nodes    []string
	// nodeNames and zones point at each node's name and zone, shared by
	// the endpoints on the node: at 50 000 services x 10 endpoints a
	// copy per endpoint would be tens of megabytes of meshbench's own
	// memory.
	nodeNames, zones []*string
	nextAddr         atomic.Uint32
	nextPod          atomic.Int64
	writes           atomic.Int64
	// istio writes the traffic rules and security policies
	// (Config.TrafficRules, Config.SecurityPolicies).
	istio istioclient.Interface
	// gateway writes the HTTPRoutes (Config.GatewayRoutes).
	gateway gatewayclient.Interface

	// retryWait is the first wait before a write is retried (retried);
	// 0 is a second.
	retryWait time.Duration

	// addrOffset moves this cluster's addresses into a range of its own
	// (clusters.go).
	addrOffset uint32
}

// kubeWriter is the clientset that writes a workload: no client-side
// rate limit to speak of (fastWrites), and Kubernetes' protobuf encoding
// both ways, which costs the API server and meshbench less CPU per
// object than JSON; the API server is what bounds the write rate.
// Istio's kinds have no protobuf encoding: their client keeps JSON.
func kubeWriter(cfg *rest.Config) (kubernetes.Interface, error) {
	rc := fastWrites(cfg)
	rc.ContentType = runtime.ContentTypeProtobuf
	rc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return kubernetes.NewForConfig(rc)
}

func newWorkload(client kubernetes.Interface, cfg *Config) *workload {
	w := &workload{client: client, cfg: cfg}
	for i := range cfg.Nodes {
		w.nodes = append(w.nodes, fmt.Sprintf("%s-node-%d", cfg.Prefix, i))
		w.nodeNames = append(w.nodeNames, &w.nodes[i])
		w.zones = append(w.zones, ptr.To(zone(i)))
	}
	for i := range cfg.Services {
		ns := w.namespace(i % cfg.Namespaces)
		name := fmt.Sprintf("svc-%d", i)
		w.services = append(w.services, &service{
			idx: i, name: name, ns: ns,
			hostname: name + "." + ns + ".svc.cluster.local",
		})
	}
	return w
}

func (w *workload) namespace(i int) string { return fmt.Sprintf("%s-%d", w.cfg.Prefix, i) }

// zone of node i: nodes are spread over three zones of one region.
func zone(node int) string { return fmt.Sprintf("%s-%c", region, 'a'+node%3) }

func (w *workload) newAddr() string { return w.addrAt(w.nextAddr.Add(1)) }

// addrAt is the n-th address of the workload.
func (w *workload) addrAt(n uint32) string {
	n += addrBase + w.addrOffset
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], n)
	return netip.AddrFrom4(b).String()
}

// setup writes namespaces, nodes, services, pods (with their status;
// none with Config.NoPods) and one EndpointSlice per service, with at most
// cfg.Concurrency writes in flight.
func (w *workload) setup(ctx context.Context) error {
	core := w.client.CoreV1()
	err := forEach(ctx, w.cfg.Namespaces+len(w.nodes), w.cfg.Concurrency, func(ctx context.Context, i int) error {
		if i < w.cfg.Namespaces {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.namespace(i)}}
			err := w.retried(ctx, func(retry bool) error {
				_, err := core.Namespaces().Create(ctx, ns, metav1.CreateOptions{})
				return madeBefore(retry, err)
			})
			return wrap(err, "creating namespace %s", ns.Name)
		}
		n := i - w.cfg.Namespaces
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: w.nodes[n], Labels: map[string]string{
			corev1.LabelTopologyRegion: region,
			corev1.LabelTopologyZone:   zone(n),
		}}}
		err := w.retried(ctx, func(retry bool) error {
			_, err := core.Nodes().Create(ctx, node, metav1.CreateOptions{})
			return madeBefore(retry, err)
		})
		return wrap(err, "creating node %s", node.Name)
	})
	if err != nil {
		return err
	}
	// One task per object keeps the writes in flight even when a service
	// has many endpoints; a slice is written once its pods are. Task i
	// is object i%(E+1) of service i/(E+1): 0 the service, then its Pods
	// (with NoPods, its endpoints, which cost no write).
	perService := w.cfg.Endpoints + 1
	eps := make([][]discoveryv1.Endpoint, len(w.services))
	for s := range eps {
		eps[s] = make([]discoveryv1.Endpoint, w.cfg.Endpoints)
	}
	err = forEach(ctx, len(w.services)*perService, w.cfg.Concurrency, func(ctx context.Context, i int) error {
		s, obj := i/perService, i%perService
		svc := w.services[s]
		if obj == 0 {
			return w.createService(ctx, svc)
		}
		ep, err := w.newEndpoint(ctx, svc)
		eps[s][obj-1] = ep
		return err
	})
	if err != nil {
		return err
	}
	return forEach(ctx, len(w.services), w.cfg.Concurrency, func(ctx context.Context, i int) error {
		svc := w.services[i]
		out, err := w.createSlice(ctx, svc, eps[i])
		if err != nil {
			return err
		}
		svc.slice = out
		return nil
	})
}

// keptSlice is what a service remembers of its slice after sent was
// written and the API server answered out: what was sent, with the
// server's metadata but not its managedFields. The decoded answer would
// be a second copy of every endpoint, managedFields a third of its size.
// An update built from it sends the same fields as one built from out:
// the API server fills in the same defaults again and keeps the
// managedFields an update leaves out.
func keptSlice(sent, out *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	kept := *sent
	kept.ObjectMeta = out.ObjectMeta
	kept.ManagedFields = nil
	return &kept
}

// createSlice writes the one EndpointSlice of svc with eps.
func (w *workload) createSlice(ctx context.Context, svc *service, eps []discoveryv1.Endpoint) (*discoveryv1.EndpointSlice, error) {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: svc.name + "-0", Namespace: svc.ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc.name},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(int32(targetPort))}},
		Endpoints:   eps,
	}
	slices := w.client.DiscoveryV1().EndpointSlices(svc.ns)
	var out *discoveryv1.EndpointSlice
	err := w.retried(ctx, func(retry bool) (err error) {
		out, err = slices.Create(ctx, slice, metav1.CreateOptions{})
		if madeBefore(retry, err) == nil && err != nil {
			out, err = slices.Get(ctx, slice.Name, metav1.GetOptions{})
		}
		return err
	})
	if err != nil {
		return nil, wrap(err, "creating the slice of %s", svc.hostname)
	}
	return keptSlice(slice, out), nil
}

// createService writes svc, selecting its Pods; with NoPods it selects
// none, as a Service whose slices someone else manages. With Headless it
// asks for no cluster IP.
func (w *workload) createService(ctx context.Context, svc *service) error {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc.name, Namespace: svc.ns},
		Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{
				Name: portName, Port: ServicePort, TargetPort: intstr.FromInt32(targetPort),
			}},
		},
	}
	if !w.cfg.NoPods {
		s.Spec.Selector = map[string]string{"app": svc.name}
	}
	if w.cfg.Headless {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	}
	err := w.retried(ctx, func(retry bool) error {
		_, err := w.client.CoreV1().Services(svc.ns).Create(ctx, s, metav1.CreateOptions{})
		return madeBefore(retry, err)
	})
	return wrap(err, "creating service %s", svc.hostname)
}

// newEndpoint is a new ready endpoint of svc on one of the nodes: a Pod's
// (createPod), or with NoPods one that only its slice will hold.
func (w *workload) newEndpoint(ctx context.Context, svc *service) (discoveryv1.Endpoint, error) {
	if w.cfg.NoPods {
		ep, _ := w.nextEndpoint()
		return ep, nil
	}
	return w.createPod(ctx, svc)
}

// nextEndpoint is a ready endpoint with a new address on the next node,
// with no targetRef, and its number n (Pod n's, when there is one).
func (w *workload) nextEndpoint() (ep discoveryv1.Endpoint, n int) {
	n = int(w.nextPod.Add(1))
	node := n % len(w.nodes)
	return discoveryv1.Endpoint{
		Addresses:  []string{w.newAddr()},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		NodeName:   w.nodeNames[node],
		Zone:       w.zones[node],
	}, n
}

// createPod creates a ready, running Pod of svc on one of the nodes with a
// new address and returns the slice endpoint for it.
func (w *workload) createPod(ctx context.Context, svc *service) (discoveryv1.Endpoint, error) {
	ep, n := w.nextEndpoint()
	addr := ep.Addresses[0]
	pods := w.client.CoreV1().Pods(svc.ns)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", svc.name, n), Namespace: svc.ns,
			Labels: w.podLabels(svc, n),
		},
		Spec: corev1.PodSpec{
			NodeName:   *ep.NodeName,
			Containers: []corev1.Container{{Name: "app", Image: "meshbench/app"}},
		},
	}
	var out *corev1.Pod
	err := w.retried(ctx, func(retry bool) (err error) {
		out, err = pods.Create(ctx, pod, metav1.CreateOptions{})
		if madeBefore(retry, err) == nil && err != nil {
			out, err = pods.Get(ctx, pod.Name, metav1.GetOptions{})
		}
		return err
	})
	if err != nil {
		return discoveryv1.Endpoint{}, wrap(err, "creating pod %s/%s", svc.ns, pod.Name)
	}
	now := metav1.Now()
	status := corev1.PodStatus{
		Phase:  corev1.PodRunning,
		PodIP:  addr,
		PodIPs: []corev1.PodIP{{IP: addr}},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	err = w.retried(ctx, func(retry bool) error {
		if retry {
			// The failed attempt may have been written after all, which
			// moved the Pod's resourceVersion.
			cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cur.Status.PodIP == addr {
				return nil
			}
			out = cur
		}
		out.Status = status
		_, err := pods.UpdateStatus(ctx, out, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return discoveryv1.Endpoint{}, wrap(err, "setting the status of pod %s/%s", svc.ns, pod.Name)
	}
	ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: svc.ns, Name: pod.Name, UID: out.UID}
	return ep, nil
}

// appendEndpoint adds ep (made by newEndpoint) to the slice of svc.
// before is called just before the slice is written; written is when the
// slice write returned.
func (w *workload) appendEndpoint(ctx context.Context, svc *service, ep discoveryv1.Endpoint, before func()) (written time.Time, err error) {
	written, _, err = w.rotateEndpoint(ctx, svc, ep, 0, before)
	return written, err
}

// rotateEndpoint adds ep to the slice of svc like appendEndpoint and, when
// the slice then holds more than keep endpoints (keep > 0), drops its
// oldest in the same write and returns it: a soak changes endpoints
// without growing the cluster.
func (w *workload) rotateEndpoint(ctx context.Context, svc *service, ep discoveryv1.Endpoint, keep int, before func()) (written time.Time, dropped *discoveryv1.Endpoint, err error) {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	before()
	slices := w.client.DiscoveryV1().EndpointSlices(svc.ns)
	for attempt := 0; ; attempt++ {
		next := svc.slice.DeepCopy()
		next.Endpoints = append(next.Endpoints, ep)
		dropped = nil
		if keep > 0 && len(next.Endpoints) > keep {
			dropped = &next.Endpoints[0]
			next.Endpoints = next.Endpoints[1:]
		}
		out, err := slices.Update(ctx, next, metav1.UpdateOptions{})
		w.writes.Add(1)
		if err == nil {
			written = time.Now()
			svc.slice = keptSlice(next, out)
			return written, dropped, nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return time.Time{}, nil, wrap(err, "updating the slice of %s", svc.hostname)
		}
		cur, gerr := slices.Get(ctx, svc.slice.Name, metav1.GetOptions{})
		if gerr != nil {
			return time.Time{}, nil, wrap(gerr, "reading the slice of %s", svc.hostname)
		}
		cur.ManagedFields = nil
		svc.slice = cur
	}
}

// writeRetries bounds the retries of a write that failed transiently;
// they wait 1, 2, 4 ... 32 s, a minute in all, the API server's own
// request timeout.
const writeRetries = 6

// retried makes a write with attempt, counting each attempt, until it
// succeeds, fails for good or has failed transiently writeRetries more
// times. attempt learns whether an attempt before it failed: that one may
// have been written all the same. A setup of a million writes on a
// loaded machine meets API server timeouts; one of them should not end a
// run of an hour.
func (w *workload) retried(ctx context.Context, attempt func(retry bool) error) error {
	wait := w.retryWait
	if wait == 0 {
		wait = time.Second
	}
	for n := 0; ; n++ {
		err := attempt(n > 0)
		w.writes.Add(1)
		if err == nil || !transient(err) || n >= writeRetries {
			return err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return err
		}
		wait *= 2
	}
}

// transient says whether a failed write may succeed when made again: the
// API server timed it out or shed it, lost etcd for a moment (an internal
// error), or the connection broke.
func transient(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// madeBefore is the error of a create, nil when it says the object
// exists on a retry: the attempt that failed made it.
func madeBefore(retry bool, err error) error {
	if retry && apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// forEach runs fn for 0..n-1 with at most workers calls at a time and
// returns the first error; after it, calls not yet started are skipped.
func forEach(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers = max(1, min(workers, n))
	var (
		next    atomic.Int64
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					errOnce.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		// The parent ended.
		return context.Cause(ctx)
	}
	return first
}
