// Package resource names the xDS types meshpilot serves by their type
// URLs, as go-control-plane's pkg/resource/v3 does. It imports nothing,
// so that the generators that build resources, the server that serves
// them, and their clients and tests all name the types from here.
package resource

const (
	// ListenerType is the type URL of listeners.
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	// RouteType is the type URL of route configurations.
	RouteType = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	// ClusterType is the type URL of clusters.
	ClusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	// EndpointType is the type URL of ClusterLoadAssignments.
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)
