package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Type URLs of the resources a proxyless gRPC client asks for.
const (
	typeListener = "type.googleapis.com/envoy.config.listener.v3.Listener"
	typeRoute    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	typeCluster  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	typeEndpoint = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	typeResource = "type.googleapis.com/envoy.service.discovery.v3.Resource"
)

var typeOrder = []string{typeListener, typeRoute, typeCluster, typeEndpoint}

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
// ADS stream that follows LDS -> RDS -> CDS -> EDS as grpc-go does, ACKs
// every response and keeps, for every ClusterLoadAssignment it holds, the
// addresses it would send requests to. All of its state belongs to its
// receive loop.
type adsClient struct {
	id        int
	node      *core.Node
	listeners []string // the names it asks LDS for
	obs       observer
	stats     *clientStats

	stream   discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	sentNode bool
	// Current subscriptions per type, sorted.
	subs [4][]string
	// What each resource points to.
	listenerRoute map[string]string   // listener -> route configuration
	routeClusters map[string][]string // route configuration -> clusters
	clusterEDS    map[string]string   // cluster -> EDS service name
	// Per ClusterLoadAssignment, the addresses that take traffic.
	clas      map[string]map[string]struct{}
	converged bool

	opened time.Time
}

func newADSClient(id int, ns string, listeners []string, obs observer, stats *clientStats) *adsClient {
	ip := fmt.Sprintf("10.0.%d.%d", id/250, 1+id%250)
	pod := fmt.Sprintf("bench-client-%d", id)
	meta, _ := structpb.NewStruct(map[string]any{
		"GENERATOR": "grpc",
		"NAMESPACE": ns,
	})
	return &adsClient{
		id: id,
		node: &core.Node{
			Id:                   fmt.Sprintf("sidecar~%s~%s.%s~%s.svc.cluster.local", ip, pod, ns, ns),
			Metadata:             meta,
			UserAgentName:        "gRPC Go",
			UserAgentVersionType: &core.Node_UserAgentVersion{UserAgentVersion: grpc.Version},
			ClientFeatures:       []string{"envoy.lb.does_not_support_overprovisioning", "xds.config.resource-in-sotw"},
		},
		listeners:     slices.Sorted(slices.Values(listeners)),
		obs:           obs,
		stats:         stats,
		listenerRoute: map[string]string{},
		routeClusters: map[string][]string{},
		clusterEDS:    map[string]string{},
		clas:          map[string]map[string]struct{}{},
	}
}

// run opens the stream on cc and follows it until ctx ends. A stream that
// ends otherwise is an error.
func (c *adsClient) run(ctx context.Context, cc *grpc.ClientConn) error {
	c.opened = time.Now()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return fmt.Errorf("client %d: opening the ADS stream: %w", c.id, err)
	}
	c.stream = stream
	if err := c.subscribe(0, c.listeners); err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("client %d: the server closed the stream", c.id)
			}
			if status.Code(err) == codes.Canceled && ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("client %d: %w", c.id, err)
		}
		if err := c.handle(resp, time.Now()); err != nil {
			return err
		}
	}
}

func (c *adsClient) send(t int, version, nonce string) error {
	req := &discovery.DiscoveryRequest{
		TypeUrl:       typeOrder[t],
		ResourceNames: c.subs[t],
		VersionInfo:   version,
		ResponseNonce: nonce,
	}
	if !c.sentNode {
		req.Node = c.node
		c.sentNode = true
	}
	if err := c.stream.Send(req); err != nil {
		return fmt.Errorf("client %d: sending a request: %w", c.id, err)
	}
	return nil
}

// subscribe changes the subscription of type t to names (sorted) and asks
// for them when it changed. Like grpc-go, it keeps the type's last ACKed
// version and nonce out of a new subscription request.
func (c *adsClient) subscribe(t int, names []string) error {
	if slices.Equal(c.subs[t], names) {
		return nil
	}
	c.subs[t] = names
	return c.send(t, "", "")
}

func (c *adsClient) handle(resp *discovery.DiscoveryResponse, now time.Time) error {
	t := typeIndex(resp.GetTypeUrl())
	if t < 0 {
		c.stats.ignored.Add(int64(len(resp.GetResources())))
		return nil
	}
	c.stats.responses[t].Add(1)
	wanted := make(map[string]bool, len(c.subs[t]))
	for _, n := range c.subs[t] {
		wanted[n] = true
	}
	var next []string // the subscription of the next type
	present := make(map[string]bool, len(resp.GetResources()))
	for _, res := range resp.GetResources() {
		c.stats.bytes[t].Add(int64(len(res.GetValue())))
		msg, err := unmarshal(t, res)
		if err != nil {
			// A real client would NACK; the benchmark wants to hear of it.
			return fmt.Errorf("client %d: %w", c.id, err)
		}
		name := resourceName(msg)
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
	if err := c.send(t, resp.GetVersionInfo(), resp.GetNonce()); err != nil {
		return err
	}
	if t < 3 {
		if err := c.subscribe(t+1, next); err != nil {
			return err
		}
		c.prune(t + 1)
	}
	if !c.converged && len(c.subs[3]) == len(c.listeners) {
		for _, n := range c.subs[3] {
			if _, ok := c.clas[n]; !ok {
				return nil
			}
		}
		c.converged = true
		c.obs.converged(c.id, now)
	}
	return nil
}

// prune forgets resources of type t no longer subscribed.
func (c *adsClient) prune(t int) {
	keep := func(name string) bool { _, ok := slices.BinarySearch(c.subs[t], name); return ok }
	switch t {
	case 1:
		for n := range c.routeClusters {
			if !keep(n) {
				delete(c.routeClusters, n)
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

func unmarshal(t int, res *anypb.Any) (proto.Message, error) {
	if res.GetTypeUrl() == typeResource {
		var r discovery.Resource
		if err := proto.Unmarshal(res.GetValue(), &r); err != nil {
			return nil, fmt.Errorf("decoding a Resource wrapper: %w", err)
		}
		res = r.GetResource()
	}
	var m proto.Message
	switch t {
	case 0:
		m = &listener.Listener{}
	case 1:
		m = &route.RouteConfiguration{}
	case 2:
		m = &cluster.Cluster{}
	default:
		m = &endpoint.ClusterLoadAssignment{}
	}
	if res.GetTypeUrl() != typeOrder[t] {
		return nil, fmt.Errorf("a %s response holds a %s", typeOrder[t], res.GetTypeUrl())
	}
	if err := proto.Unmarshal(res.GetValue(), m); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", res.GetTypeUrl(), err)
	}
	return m, nil
}

func resourceName(m proto.Message) string {
	switch m := m.(type) {
	case *listener.Listener:
		return m.GetName()
	case *route.RouteConfiguration:
		return m.GetName()
	case *cluster.Cluster:
		return m.GetName()
	case *endpoint.ClusterLoadAssignment:
		return m.GetClusterName()
	}
	return ""
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
