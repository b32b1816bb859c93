package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// The types a proxyless gRPC client asks for, in the order it follows
// them.
var typeOrder = []string{resourcev3.ListenerType, resourcev3.RouteType, resourcev3.ClusterType, resourcev3.EndpointType}

func typeIndex(url string) int { return slices.Index(typeOrder, url) }

// observer is told of addresses a client newly holds.
type observer interface {
	// observe reports that client id holds addr in a ClusterLoadAssignment
	// since at.
	observe(id int, addr string, at time.Time)
	// converged reports that client id holds every ClusterLoadAssignment it
	// needs.
	converged(id int, at time.Time)
}

// clientStats counts what a client received.
type clientStats struct {
	responses [4]atomic.Int64
	bytes     [4]atomic.Int64
	ignored   atomic.Int64 // resources it did not ask for
}

// adsClient is one simulated proxyless gRPC client: one state-of-the-world
// ADS stream (an xdstest client, read by the client's own goroutine) that
// follows LDS -> RDS -> CDS -> EDS as grpc-go does, ACKs every response
// and keeps, for every ClusterLoadAssignment it holds, the addresses it
// would send requests to. All of its state belongs to its receive loop.
type adsClient struct {
	id        int
	node      *core.Node
	listeners []string // the names it asks LDS for
	obs       observer
	stats     *clientStats

	stream *xdstest.Client
	// Current subscriptions per type, sorted; shared with stream, so
	// replaced, never modified.
	subs [4][]string
	// What each resource points to.
	listenerRoute map[string]string   // listener -> route configuration
	routeClusters map[string][]string // route configuration -> clusters
	routeSplit    map[string]string   // route configuration -> splitKey
	clusterEDS    map[string]string   // cluster -> EDS service name
	// Per ClusterLoadAssignment, the addresses that take traffic.
	clas map[string]map[string]struct{}
	// addrs is updateCLA's storage, kept between responses.
	addrs [][]byte
	// wantEndpoints is how many addresses taking traffic each service
	// has once every cluster's endpoints are in; 0 asks for none.
	wantEndpoints int
	converged     bool
	// received: a response came on the current stream (a client
	// reconnects at once after such a stream, else after a backoff).
	received bool

	opened time.Time
}

func newADSClient(id int, ns string, listeners []string, obs observer, stats *clientStats) *adsClient {
	ip := fmt.Sprintf("10.0.%d.%d", id/250, 1+id%250)
	pod := fmt.Sprintf("bench-client-%d", id)
	return &adsClient{
		id:            id,
		node:          xdstest.GRPCNode(xdstest.NodeOptions{ID: xdstest.SidecarID(ip, pod, ns), Namespace: ns}),
		listeners:     slices.Sorted(slices.Values(listeners)),
		obs:           obs,
		stats:         stats,
		listenerRoute: map[string]string{},
		routeClusters: map[string][]string{},
		routeSplit:    map[string]string{},
		clusterEDS:    map[string]string{},
		clas:          map[string]map[string]struct{}{},
	}
}

// run opens the stream on cc and follows it until ctx ends. A stream that
// ends otherwise is an error.
func (c *adsClient) run(ctx context.Context, cc grpc.ClientConnInterface) error {
	c.opened = time.Now()
	// Paused: this goroutine reads the stream itself, one per client;
	// Forget: the client keeps only what it needs, below; Raw: it reads
	// that from the bytes (wire.go).
	stream, err := xdstest.Open(ctx, cc, xdstest.Options{Node: c.node, Paused: true, Forget: true, Raw: true})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while opening
		}
		return fmt.Errorf("client %d: %w", c.id, err)
	}
	defer stream.Close()
	c.stream = stream
	if err := c.subscribe(0, c.listeners); err != nil {
		if ctx.Err() != nil {
			return nil // stopped (a restart) while asking: the send fails with EOF
		}
		return err
	}
	var resp xdstest.Response // reused: one allocation per client, not per response
	for {
		err := stream.ReceiveInto(&resp)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("client %d: the server closed the stream: %w", c.id, err)
			}
			if status.Code(err) == codes.Canceled && ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("client %d: %w", c.id, err)
		}
		if err := c.handle(&resp); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while answering: the ACK fails with EOF
			}
			return err
		}
		resp.Reset()
	}
}

// subscribe changes the subscription of type t to names (sorted) and asks
// for them when it changed, in one request that carries the type's last
// ACKed version and nonce, as grpc-go's does.
func (c *adsClient) subscribe(t int, names []string) error {
	if slices.Equal(c.subs[t], names) {
		return nil
	}
	c.subs[t] = names
	if err := c.stream.SetSubscription(typeOrder[t], names...); err != nil {
		return fmt.Errorf("client %d: %w", c.id, err)
	}
	return nil
}

func (c *adsClient) handle(resp *xdstest.Response) error {
	now := resp.Received
	t := typeIndex(resp.TypeURL)
	if t < 0 {
		c.stats.ignored.Add(int64(len(resp.Resources)))
		return nil
	}
	c.stats.responses[t].Add(1)
	c.received = true
	var present []string // the names of a full-state response, whatever was asked
	for _, res := range resp.Resources {
		c.stats.bytes[t].Add(int64(len(res.Raw.GetValue())))
		name, err := c.read(t, res.Raw, now)
		if err != nil {
			// A real client would NACK; the benchmark wants to hear of it.
			return fmt.Errorf("client %d: %s: %w", c.id, typeOrder[t], err)
		}
		if t == 0 || t == 2 {
			present = append(present, name)
		}
	}
	// Listeners and clusters come whole in every response: one not in it
	// is gone. Route configurations and load assignments stay until
	// unsubscribed.
	var next []string // the subscription of the next type
	switch t {
	case 0:
		c.listenerRoute = keepOnly(c.listenerRoute, present)
		next = sortedValues(c.listenerRoute)
	case 1:
		for _, rc := range c.subs[1] {
			next = append(next, c.routeClusters[rc]...)
		}
		next = sortedUnique(next)
	case 2:
		c.clusterEDS = keepOnly(c.clusterEDS, present)
		next = sortedValues(c.clusterEDS)
	}
	// ACK with the current subscription, then follow the chain.
	if err := c.stream.ACK(resp); err != nil {
		return fmt.Errorf("client %d: %w", c.id, err)
	}
	if t < 3 {
		if err := c.subscribe(t+1, next); err != nil {
			return err
		}
		c.prune(t + 1)
	}
	if !c.converged && c.complete() {
		c.converged = true
		c.obs.converged(c.id, now)
	}
	return nil
}

// read takes in one resource of type t and returns its name; a resource
// the client did not ask for is counted and otherwise ignored.
func (c *adsClient) read(t int, raw *anypb.Any, now time.Time) (string, error) {
	b, err := unwrap(typeOrder[t], raw)
	if err != nil {
		return "", err
	}
	switch t {
	case 0:
		name, rc, err := readListener(b)
		if err != nil {
			return name, fmt.Errorf("listener %s: %w", name, err)
		}
		if c.wants(t, name) {
			c.listenerRoute[name] = rc
		}
		return name, nil
	case 1:
		rc, err := readRouteConfig(b)
		if err != nil || !c.wants(t, rc.name) {
			return rc.name, err
		}
		c.routeClusters[rc.name] = rc.clusters
		if rc.split != c.routeSplit[rc.name] {
			c.routeSplit[rc.name] = rc.split
			if rc.split != "" {
				c.obs.observe(c.id, rc.split, now)
			}
		}
		return rc.name, nil
	case 2:
		name, eds, err := readCluster(b)
		if err == nil && c.wants(t, name) {
			c.clusterEDS[name] = eds
		}
		return name, err
	default:
		return c.updateCLA(b, now)
	}
}

// wants says whether the client subscribes to name of type t, and counts
// what it does not.
func (c *adsClient) wants(t int, name string) bool {
	if _, ok := slices.BinarySearch(c.subs[t], name); ok {
		return true
	}
	c.stats.ignored.Add(1)
	return false
}

// complete says whether the client holds everything its listeners lead
// to: a route configuration per listener, every cluster they route to
// (one per service, or one per subset of a weighted route) and every
// ClusterLoadAssignment.
func (c *adsClient) complete() bool {
	if len(c.listenerRoute) != len(c.listeners) || len(c.subs[3]) == 0 {
		return false
	}
	for _, rc := range c.subs[1] {
		if _, ok := c.routeClusters[rc]; !ok {
			return false
		}
	}
	for _, cl := range c.subs[2] {
		if _, ok := c.clusterEDS[cl]; !ok {
			return false
		}
	}
	for _, n := range c.subs[3] {
		if _, ok := c.clas[n]; !ok {
			return false
		}
	}
	return c.holdsEveryEndpoint()
}

// holdsEveryEndpoint says whether each service's load assignments (one,
// or one per subset) hold wantEndpoints addresses between them: with
// several clusters, a client holding one cluster's endpoints only has not
// converged.
func (c *adsClient) holdsEveryEndpoint() bool {
	if c.wantEndpoints == 0 {
		return true
	}
	byHost := map[string]map[string]struct{}{}
	for name, addrs := range c.clas {
		// outbound|<port>|<subset>|<host>
		host := name[strings.LastIndexByte(name, '|')+1:]
		set := byHost[host]
		if set == nil {
			set = map[string]struct{}{}
			byHost[host] = set
		}
		for a := range addrs {
			set[a] = struct{}{}
		}
	}
	for _, set := range byHost {
		if len(set) < c.wantEndpoints {
			return false
		}
	}
	return true
}

// prune forgets resources of type t no longer subscribed.
func (c *adsClient) prune(t int) {
	keep := func(name string) bool { _, ok := slices.BinarySearch(c.subs[t], name); return ok }
	switch t {
	case 1:
		for n := range c.routeClusters {
			if !keep(n) {
				delete(c.routeClusters, n)
				delete(c.routeSplit, n)
			}
		}
	case 2:
		for n := range c.clusterEDS {
			if !keep(n) {
				delete(c.clusterEDS, n)
			}
		}
	case 3:
		for n := range c.clas {
			if !keep(n) {
				delete(c.clas, n)
			}
		}
	}
}

// updateCLA keeps the addresses of a ClusterLoadAssignment (as
// marshalled) that take traffic, when the client asked for it, and tells
// the observer of each one new since the last: a change has reached a
// client when the client would send the endpoint requests, not merely
// when it lists it. It returns the assignment's name.
func (c *adsClient) updateCLA(b []byte, now time.Time) (string, error) {
	addrs := c.addrs[:0]
	defer func() {
		clear(addrs) // they point into the response
		c.addrs = addrs[:0]
	}()
	name, err := readLoadAssignment(b, func(addr []byte, health int32) {
		if len(addr) > 0 && takesTraffic(core.HealthStatus(health)) {
			addrs = append(addrs, addr)
		}
	})
	if err != nil || !c.wants(3, name) {
		return name, err
	}
	old := c.clas[name]
	cur := make(map[string]struct{}, len(addrs))
	for _, addr := range addrs {
		if _, had := old[string(addr)]; had {
			cur[string(addr)] = struct{}{}
			continue
		}
		a := string(addr)
		cur[a] = struct{}{}
		c.obs.observe(c.id, a, now)
	}
	c.clas[name] = cur
	return name, nil
}

// takesTraffic says whether grpc-go sends requests to an endpoint of this
// health: it keeps HEALTHY and UNKNOWN endpoints and drops the rest
// (grpc-go's cdsbalancer, configbuilder.go).
func takesTraffic(h core.HealthStatus) bool {
	return h == core.HealthStatus_HEALTHY || h == core.HealthStatus_UNKNOWN
}

// keepOnly drops from m the names missing from a full-state response.
func keepOnly(m map[string]string, present []string) map[string]string {
	for n := range m {
		if !slices.Contains(present, n) {
			delete(m, n)
		}
	}
	return m
}

func sortedValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return sortedUnique(out)
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
