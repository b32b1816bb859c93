package multicluster

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/multicluster/clusterstate"
)

// DefaultProbeInterval is how often a remote API server is probed.
const DefaultProbeInterval = 5 * time.Second

// probeTimeout bounds one probe: an API server slower than this to say
// it is ready counts as not answering.
const probeTimeout = 2 * time.Second

// syncPoll is how often a registry is asked whether it has synced:
// model.Controller has no notification for it.
const syncPoll = 100 * time.Millisecond

// status is a cluster's State, since when, and its last error.
type status struct {
	state     clusterstate.State
	since     time.Time
	lastError string
}

// event is what a cluster's watch observes.
type event int

const (
	evSynced event = iota
	evTimedOut
	evProbeOK
	evProbeFailed
)

// next is the state after ev: a registry syncs once, after which the
// probe alone says whether its API server answers.
func next(cur clusterstate.State, ev event) clusterstate.State {
	switch {
	case ev == evSynced:
		return clusterstate.Synced
	case ev == evTimedOut && cur == clusterstate.Syncing:
		return clusterstate.Timeout
	case ev == evProbeFailed && cur == clusterstate.Synced:
		return clusterstate.Unreachable
	case ev == evProbeOK && cur == clusterstate.Unreachable:
		return clusterstate.Synced
	}
	return cur
}

// Clusters returns the remote clusters served, by ID. Safe to call at
// any time.
func (c *Controller) Clusters() []clusterstate.Cluster {
	c.mu.Lock()
	out := make([]clusterstate.Cluster, 0, len(c.clusters))
	for _, cl := range c.clusters {
		out = append(out, clusterstate.Cluster{
			ID: cl.id, Secret: c.ref(cl.secret), State: cl.status.state, APIServer: cl.config.Host,
			Since: cl.status.since, LastError: cl.status.lastError,
		})
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b clusterstate.Cluster) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// startWatch follows cl's registry in force, replacing the watch of the
// one before: synced when it was swapped in (a replacement is swapped in
// only once it has synced).
func (c *Controller) startWatch(ctx context.Context, log *slog.Logger, cl *cluster, swapped bool) {
	c.mu.Lock()
	if cl.stopWatch != nil {
		cl.stopWatch()
	}
	wctx, stop := context.WithCancel(ctx)
	cl.stopWatch = stop
	reg, cfg := cl.reg, cl.config
	if swapped && cl.status.state != clusterstate.Synced {
		cl.status.state, cl.status.since = clusterstate.Synced, time.Now()
	}
	c.mu.Unlock()
	probe := c.probe
	if probe == nil {
		probe = readyz
	}
	check := probe(cfg)
	c.tasks.Add(1)
	go func() {
		defer c.tasks.Done()
		c.watch(wctx, log, cl, reg, check, swapped)
	}()
}

// watch reports reg's sync (and its lateness), then probes its API server
// every ProbeInterval, with jitter so that many clusters do not probe at
// once. A probe rather than the informers' watch error handler: those
// informers are the registry's own (package kube, set up before they
// start), they report failures but not recoveries, and a failed watch is
// retried with a growing backoff, whereas a cheap bounded GET says both
// ways within one interval whatever the registry is.
func (c *Controller) watch(ctx context.Context, log *slog.Logger, cl *cluster, reg Registry, probe func(context.Context) error, synced bool) {
	deadline := time.NewTimer(c.opts.SyncTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(syncPoll)
	defer tick.Stop()
	probeAt := time.NewTimer(wait.Jitter(c.opts.ProbeInterval, 0.2))
	defer probeAt.Stop()
	late := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			if !synced {
				late = true
				log.Warn(fmt.Sprintf("remote cluster not synced after %s: served as it fills, readiness does not wait for it", c.opts.SyncTimeout))
				c.observe(log, cl, reg, evTimedOut, nil)
			}
		case <-tick.C:
			if !synced && reg.HasSynced() {
				synced = true
				tick.Stop()
				if late {
					log.Info("remote cluster synced")
				}
				c.observe(log, cl, reg, evSynced, nil)
			}
		case <-probeAt.C:
			err := probe(ctx)
			if ctx.Err() != nil {
				return
			}
			ev := evProbeOK
			if err != nil {
				ev = evProbeFailed
			}
			c.observe(log, cl, reg, ev, err)
			probeAt.Reset(wait.Jitter(c.opts.ProbeInterval, 0.2))
		}
	}
}

// observe applies ev to cl's state, if reg is still its registry.
func (c *Controller) observe(log *slog.Logger, cl *cluster, reg Registry, ev event, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl.reg != reg {
		return
	}
	if err != nil {
		cl.status.lastError = err.Error()
	}
	was := cl.status.state
	now := next(was, ev)
	if now == was {
		return
	}
	cl.status.state, cl.status.since = now, time.Now()
	switch {
	case now == clusterstate.Unreachable:
		log.Warn("remote cluster's API server does not answer: its last state stays served", "reason", err)
	case was == clusterstate.Unreachable:
		log.Info("remote cluster's API server answers again")
	}
}

// setLastError records a failure that changes no state.
func (c *Controller) setLastError(cl *cluster, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl.status.lastError = err.Error()
}

// readyz returns a probe of cfg's API server: GET /readyz, which every
// API server grants to everyone (ClusterRole system:public-info-viewer),
// bounded by probeTimeout.
func readyz(cfg *rest.Config) func(context.Context) error {
	pc := rest.CopyConfig(cfg)
	pc.Timeout = probeTimeout
	client, err := kubeapi.NewRawClient(pc)
	if err != nil {
		return func(context.Context) error { return fmt.Errorf("probe client: %w", err) }
	}
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		if err := client.Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
			return fmt.Errorf("GET %s/readyz: %w", cfg.Host, err)
		}
		return nil
	}
}
