package xdstest

import (
	"context"
	"fmt"
	"maps"
	"slices"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// What the client holds is what it ACKed; see the package documentation.

// Held returns a copy of what the client holds of typeURL, by name.
func (c *Client) Held(typeURL string) map[string]Resource {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.state(typeURL).held)
}

// Names lists the names the client holds of typeURL, sorted.
func (c *Client) Names(typeURL string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.state(typeURL).held))
}

// Resource returns the resource of typeURL called name, if the client
// holds it.
func (c *Client) Resource(typeURL, name string) (Resource, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res, ok := c.state(typeURL).held[name]
	return res, ok
}

// Version is the version of the last response of typeURL the client
// ACKed; empty before the first.
func (c *Client) Version(typeURL string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state(typeURL).acked
}

// Subscribed lists the names the client asks for of typeURL, in the order
// they were first subscribed.
func (c *Client) Subscribed(typeURL string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.state(typeURL).subs)
}

// LoadAssignment is the ClusterLoadAssignment called name the client
// holds, or nil.
func (c *Client) LoadAssignment(name string) *endpoint.ClusterLoadAssignment {
	return typed[*endpoint.ClusterLoadAssignment](c.Resource(resourcev3.EndpointType, name))
}

// Listener is the listener called name the client holds, or nil.
func (c *Client) Listener(name string) *listener.Listener {
	return typed[*listener.Listener](c.Resource(resourcev3.ListenerType, name))
}

// Cluster is the cluster called name the client holds, or nil.
func (c *Client) Cluster(name string) *cluster.Cluster {
	return typed[*cluster.Cluster](c.Resource(resourcev3.ClusterType, name))
}

// RouteConfiguration is the route configuration called name the client
// holds, or nil.
func (c *Client) RouteConfiguration(name string) *route.RouteConfiguration {
	return typed[*route.RouteConfiguration](c.Resource(resourcev3.RouteType, name))
}

// Await returns once ok holds, checking it again after every change of
// what the client holds. It fails when ctx ends first or when the stream
// has ended (nothing can change any more). ok may call the client's
// accessors.
func (c *Client) Await(ctx context.Context, ok func() bool) error {
	for {
		c.mu.Lock()
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		changed, ended := c.changed, c.err
		c.mu.Unlock()
		if ok() {
			return nil
		}
		if ended != nil {
			return fmt.Errorf("the stream ended: %w", ended)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Addresses lists the socket addresses of a ClusterLoadAssignment's
// endpoints, sorted, whatever their health.
func Addresses(cla *endpoint.ClusterLoadAssignment) []string {
	var out []string
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			out = append(out, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
		}
	}
	slices.Sort(out)
	return out
}
