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

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	// Forget: the client keeps only what it needs, below.
	stream, err := xdstest.Open(ctx, cc, xdstest.Options{Node: c.node, Paused: true, Forget: true})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while opening
		}
		return fmt.Errorf("client %d: %w", c.id, err)
	}
	defer stream.Close()
	c.stream = stream
	if err := c.subscribe(0, c.listeners); err != nil {
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
	if resp.Err != nil {
		// A real client would NACK; the benchmark wants to hear of it.
		return fmt.Errorf("client %d: %w", c.id, resp.Err)
	}
	wanted := make(map[string]bool, len(c.subs[t]))
	for _, n := range c.subs[t] {
		wanted[n] = true
	}
	var next []string // the subscription of the next type
	present := make(map[string]bool, len(resp.Resources))
	for _, res := range resp.Resources {
		c.stats.bytes[t].Add(int64(len(res.Raw.GetValue())))
		msg, name := res.Message, res.Name
		present[name] = true
		if !wanted[name] {
			c.stats.ignored.Add(1)
			continue
		}
		switch m := msg.(type) {
		case *listener.Listener:
			rc, err := routeName(m)
			if err != nil {
				return fmt.Errorf("client %d: listener %s: %w", c.id, name, err)
			}
			c.listenerRoute[name] = rc
		case *route.RouteConfiguration:
			c.routeClusters[name] = clustersOf(m)
			if k := splitKey(m); k != c.routeSplit[name] {
				c.routeSplit[name] = k
				if k != "" {
					c.obs.observe(c.id, k, now)
				}
			}
		case *cluster.Cluster:
			eds := m.GetEdsClusterConfig().GetServiceName()
			if eds == "" {
				eds = name
			}
			c.clusterEDS[name] = eds
		case *endpoint.ClusterLoadAssignment:
			c.updateCLA(name, m, now)
		}
	}
	// Listeners and clusters come whole in every response: one not in it
	// is gone. Route configurations and load assignments stay until
	// unsubscribed.
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

// updateCLA keeps the addresses of a ClusterLoadAssignment that take
// traffic and tells the observer of each one new since the last: a change
// has reached a client when the client would send the endpoint requests,
// not merely when it lists it.
func (c *adsClient) updateCLA(name string, cla *endpoint.ClusterLoadAssignment, now time.Time) {
	old := c.clas[name]
	cur := make(map[string]struct{}, len(old)+1)
	for _, l := range cla.GetEndpoints() {
		for _, lb := range l.GetLbEndpoints() {
			addr := lb.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
			if addr == "" || !takesTraffic(lb.GetHealthStatus()) {
				continue
			}
			cur[addr] = struct{}{}
			if _, had := old[addr]; !had {
				c.obs.observe(c.id, addr, now)
			}
		}
	}
	c.clas[name] = cur
}

// takesTraffic says whether grpc-go sends requests to an endpoint of this
// health: it keeps HEALTHY and UNKNOWN endpoints and drops the rest
// (grpc-go's cdsbalancer, configbuilder.go).
func takesTraffic(h core.HealthStatus) bool {
	return h == core.HealthStatus_HEALTHY || h == core.HealthStatus_UNKNOWN
}

// keepOnly drops from m the names missing from a full-state response.
func keepOnly(m map[string]string, present map[string]bool) map[string]string {
	for n := range m {
		if !present[n] {
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

// routeName reads the RDS name of an API listener's HttpConnectionManager.
func routeName(l *listener.Listener) (string, error) {
	a := l.GetApiListener().GetApiListener()
	if a == nil {
		return "", errors.New("not an API listener")
	}
	var m hcm.HttpConnectionManager
	if err := a.UnmarshalTo(&m); err != nil {
		return "", fmt.Errorf("decoding the HttpConnectionManager: %w", err)
	}
	name := m.GetRds().GetRouteConfigName()
	if name == "" {
		return "", errors.New("the HttpConnectionManager names no RDS route configuration")
	}
	return name, nil
}

// clustersOf lists the clusters a route configuration's routes lead to.
func clustersOf(rc *route.RouteConfiguration) []string {
	var out []string
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			a := r.GetRoute()
			if c := a.GetCluster(); c != "" {
				out = append(out, c)
			}
			for _, wc := range a.GetWeightedClusters().GetClusters() {
				out = append(out, wc.GetName())
			}
		}
	}
	return sortedUnique(out)
}
