package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	// The RBAC filter's config must be known to read it from an Any.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	apisecurity "istio.io/api/security/v1beta1"
	apitype "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// With Config.SecurityPolicies every service has an AuthorizationPolicy
// selecting its Pods (app=<service>) that lets one service account call
// it, and the first Config.Servers services each get a simulated gRPC
// server: an ADS stream asking, as grpc-go's xDS server does (gRFC A36),
// for the inbound listener of its first Pod's address on the target
// port. A policy change names another account; it has reached a server
// when the server's listener's RBAC filter names that account.

// DefaultServers is how many services get a simulated gRPC server when
// Config.Servers is 0.
const DefaultServers = 100

// allowedAccount is the service account a policy lets in after its n-th
// change.
func allowedAccount(n int) string { return "client-" + strconv.Itoa(n) }

// accountInRBAC finds the accounts a listener's RBAC filters name.
var accountInRBAC = regexp.MustCompile(`/sa/(client-[0-9]+)`)

// policyKey names what a server holds once its policy allows account:
// the key of a policy change.
func policyKey(svc *service, account string) string { return svc.hostname + "#" + account }

// servers is how many services get a server.
func (c *Config) servers() int {
	n := c.Servers
	if n == 0 {
		n = DefaultServers
	}
	return min(n, c.Services)
}

// authzPolicy is svc's policy allowing account.
func authzPolicy(svc *service, account string) *securityv1.AuthorizationPolicy {
	return &securityv1.AuthorizationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: svc.name, Namespace: svc.ns},
		Spec: apisecurity.AuthorizationPolicy{
			Selector: &apitype.WorkloadSelector{MatchLabels: map[string]string{"app": svc.name}},
			Action:   apisecurity.AuthorizationPolicy_ALLOW,
			Rules: []*apisecurity.Rule{{
				From: []*apisecurity.Rule_From{{Source: &apisecurity.Source{
					Principals: []string{"cluster.local/ns/" + svc.ns + "/sa/" + account},
				}}},
			}},
		},
	}
}

// writeAuthzPolicies writes every service's AuthorizationPolicy.
func (w *workload) writeAuthzPolicies(ctx context.Context, ic istioclient.Interface) error {
	w.istio = ic
	return forEach(ctx, len(w.services), w.cfg.Concurrency, func(ctx context.Context, i int) error {
		svc := w.services[i]
		out, err := ic.SecurityV1().AuthorizationPolicies(svc.ns).Create(ctx, authzPolicy(svc, allowedAccount(0)), metav1.CreateOptions{})
		w.writes.Add(1)
		if err != nil {
			return wrap(err, "creating the AuthorizationPolicy of %s", svc.hostname)
		}
		svc.mu.Lock()
		svc.authz, svc.authzChanges = out, 0
		svc.mu.Unlock()
		return nil
	})
}

// setAllowed writes svc's AuthorizationPolicy with the next account.
// before is called, with the key servers will hold, just before the
// write; written is when the write returned.
func (w *workload) setAllowed(ctx context.Context, svc *service, before func(key string)) (written time.Time, err error) {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	n := svc.authzChanges + 1
	account := allowedAccount(n)
	before(policyKey(svc, account))
	aps := w.istio.SecurityV1().AuthorizationPolicies(svc.ns)
	for attempt := 0; ; attempt++ {
		next := svc.authz.DeepCopy()
		next.Spec.Rules = authzPolicy(svc, account).Spec.Rules
		out, err := aps.Update(ctx, next, metav1.UpdateOptions{})
		w.writes.Add(1)
		if err == nil {
			svc.authz, svc.authzChanges = out, n
			return time.Now(), nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return time.Time{}, wrap(err, "updating the AuthorizationPolicy of %s", svc.hostname)
		}
		cur, gerr := aps.Get(ctx, svc.authz.Name, metav1.GetOptions{})
		if gerr != nil {
			return time.Time{}, wrap(gerr, "reading the AuthorizationPolicy of %s", svc.hostname)
		}
		svc.authz = cur
	}
}

// serverStream is one simulated gRPC xDS server: it asks for its inbound
// listener and reports, on every listener it receives, the accounts its
// RBAC filters let in.
type serverStream struct {
	id   int
	svc  *service
	ip   string
	name string // the inbound listener's name
	obs  observer
}

func (s *serverStream) run(ctx context.Context, cc grpc.ClientConnInterface) error {
	pod := fmt.Sprintf("bench-server-%d", s.id)
	node := xdstest.GRPCNode(xdstest.NodeOptions{ID: xdstest.SidecarID(s.ip, pod, s.svc.ns), Namespace: s.svc.ns,
		Metadata: map[string]string{"INSTANCE_IPS": s.ip}})
	stream, err := xdstest.Open(ctx, cc, xdstest.Options{Node: node, Paused: true, Forget: true})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("server %d: %w", s.id, err)
	}
	defer stream.Close()
	if err := stream.SetSubscription(resource.ListenerType, s.name); err != nil {
		return fmt.Errorf("server %d: %w", s.id, err)
	}
	for {
		resp, err := stream.Receive()
		if err != nil {
			if ctx.Err() != nil || (status.Code(err) == codes.Canceled && ctx.Err() != nil) {
				return nil
			}
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("server %d: the server closed the stream: %w", s.id, err)
			}
			return fmt.Errorf("server %d: %w", s.id, err)
		}
		if resp.Err != nil {
			return fmt.Errorf("server %d: %w", s.id, resp.Err)
		}
		for _, r := range resp.Resources {
			l, ok := r.Message.(*listener.Listener)
			if !ok || l.GetName() != s.name {
				continue
			}
			accounts, err := rbacAccounts(l)
			if err != nil {
				return fmt.Errorf("server %d: listener %s: %w", s.id, s.name, err)
			}
			for _, a := range accounts {
				s.obs.observe(s.id, policyKey(s.svc, a), resp.Received)
			}
			if slices.Contains(accounts, allowedAccount(0)) {
				s.obs.converged(s.id, resp.Received)
			}
		}
		if err := stream.ACK(resp); err != nil {
			return fmt.Errorf("server %d: %w", s.id, err)
		}
	}
}

// rbacAccounts lists the service accounts named by the RBAC filters of a
// listener's connection managers.
func rbacAccounts(l *listener.Listener) ([]string, error) {
	var out []string
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			m := &hcm.HttpConnectionManager{}
			if err := f.GetTypedConfig().UnmarshalTo(m); err != nil {
				continue
			}
			for _, hf := range m.GetHttpFilters() {
				if !strings.Contains(hf.GetTypedConfig().GetTypeUrl(), "rbac") {
					continue
				}
				b, err := protojson.Marshal(hf.GetTypedConfig())
				if err != nil {
					return nil, err
				}
				for _, m := range accountInRBAC.FindAllStringSubmatch(string(b), -1) {
					out = append(out, m[1])
				}
			}
		}
	}
	return out, nil
}

// serverFleet runs the simulated servers on one connection.
type serverFleet struct {
	tracker *tracker
	servers []*serverStream
	cc      *grpc.ClientConn
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	errs    chan error
}

// startServers opens a stream for each of the first cfg.servers()
// services' servers; its tracker knows server i as the one subscriber of
// service i.
func startServers(ctx context.Context, xdsAddr string, w *workload) (*serverFleet, error) {
	n := w.cfg.servers()
	f := &serverFleet{tracker: newTracker(n), errs: make(chan error, n)}
	f.tracker.byService = make([][]int, len(w.services))
	cc, err := grpc.NewClient("passthrough:///"+xdsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	f.cc = cc
	ctx, f.cancel = context.WithCancel(ctx)
	for i := range n {
		svc := w.services[i]
		f.tracker.byService[i] = []int{i}
		ip := firstAddress(svc)
		if ip == "" {
			f.stop()
			return nil, fmt.Errorf("service %s has no endpoint for its server", svc.hostname)
		}
		s := &serverStream{id: i, svc: svc, ip: ip, obs: f.tracker,
			name: model.InboundListenerPrefix + ip + ":" + strconv.Itoa(targetPort)}
		f.servers = append(f.servers, s)
		f.wg.Go(func() {
			if err := s.run(ctx, cc); err != nil {
				f.errs <- err
			}
		})
	}
	return f, nil
}

// firstAddress is the address of the first endpoint of svc's slice.
func firstAddress(svc *service) string {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if svc.slice == nil || len(svc.slice.Endpoints) == 0 || len(svc.slice.Endpoints[0].Addresses) == 0 {
		return ""
	}
	return svc.slice.Endpoints[0].Addresses[0]
}

func (f *serverFleet) stop() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	if f.cc != nil {
		_ = f.cc.Close()
	}
}

// runPolicyChurn changes the allowed account of one served service's
// AuthorizationPolicy per tick, going through the served services in
// turn, and waits for its server to hold the listener that allows it,
// or for the miss timeout.
func runPolicyChurn(ctx context.Context, w *workload, f *serverFleet) (*ChurnResult, error) {
	cfg := w.cfg
	ph := newChurnPhase(f.tracker, cfg)
	ph.begin()
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate))
	defer tick.Stop()
	for i := range cfg.Changes {
		if i > 0 {
			select {
			case <-tick.C:
			case err := <-f.errs:
				return ph.abort(fmt.Errorf("during policy churn: %w", err))
			case <-ctx.Done():
				return ph.abort(context.Cause(ctx))
			}
		}
		svc := w.services[i%len(f.servers)]
		ph.change(ctx, i, svc.idx, func(expect func(key string)) (time.Time, error) {
			return w.setAllowed(ctx, svc, expect)
		})
	}
	return ph.result(ctx, w.services)
}

// runServersPhase opens the servers, waits until each holds its listener
// with its policy, then changes policies as churn changes endpoints.
func runServersPhase(ctx context.Context, sv *serving, w *workload, res *Result, logf func(string, ...any)) error {
	cfg := w.cfg
	select {
	case <-time.After(cfg.Settle):
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	logf("opening %d gRPC servers' inbound listener streams", cfg.servers())
	start := time.Now()
	f, err := startServers(ctx, sv.xdsAddr, w)
	if err != nil {
		return err
	}
	defer f.stop()
	timeout := time.NewTimer(max(cfg.MissTimeout, 30*time.Second))
	defer timeout.Stop()
	select {
	case <-f.tracker.allConverged:
	case err := <-f.errs:
		return fmt.Errorf("servers: %w", err)
	case <-timeout.C:
		return fmt.Errorf("only %d of %d servers received their listener with their policy in time", f.tracker.convergedCount(), len(f.servers))
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	conv := f.tracker.convergenceSince(start)
	res.ServerConvergence = &conv
	logf("all %d servers hold their listener with their policy in %.0f ms", len(f.servers), conv.AllMS)
	res.snapshot(sv.proc, "servers")
	if cfg.Changes == 0 {
		return nil
	}
	select {
	case <-time.After(cfg.Settle):
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	logf("policy churn: %d AuthorizationPolicy changes at %g/s", cfg.Changes, cfg.Rate)
	pch, err := runPolicyChurn(ctx, w, f)
	if err != nil {
		return err
	}
	res.PolicyChurn = pch
	res.snapshot(sv.proc, "policy-churn")
	logf("policy churn: %d (server, change) pairs: from the write's start p50 %.1f ms, p99 %.1f ms; from its return p50 %.1f ms, p99 %.1f ms; %d misses",
		pch.Pairs, pch.FromWriteStart.P50MS, pch.FromWriteStart.P99MS, pch.P50MS, pch.P99MS, pch.Misses)
	return nil
}

// convergenceSince is convergence for subscribers that all started at
// start.
func (t *tracker) convergenceSince(start time.Time) ConvergenceResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	per := make([]time.Duration, 0, len(t.convergedAt))
	for _, at := range t.convergedAt {
		per = append(per, at.Sub(start))
	}
	d := newDist(per)
	return ConvergenceResult{Clients: len(per), AllMS: d.p(100), P50MS: d.p(50), P99MS: d.p(99), MaxMS: d.p(100)}
}
