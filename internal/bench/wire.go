package bench

import (
	"errors"
	"fmt"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
)

// A simulated client reads from each resource the few fields it follows,
// straight from the wire: decoding whole Listeners, Clusters and
// ClusterLoadAssignments into messages costs ten thousand clients more
// CPU than the server spends sending them. The field numbers are the
// Envoy v3 protos' (go-control-plane's generated code says them in each
// field's protobuf tag); wire_test.go checks every reader against
// messages marshalled by the protobuf library.
//
// A singular field the wire repeats is read as protobuf merges it (the
// last scalar wins, messages merge); meshpilot marshals each once.

// httpConnectionManagerType is the type URL of an API listener's
// HttpConnectionManager.
const httpConnectionManagerType = resourcev3.APITypePrefix + "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"

// resourceWrapperType is discovery.Resource, in which a state of the
// world response wraps each resource for clients that announce
// xds.config.resource-in-sotw, as grpc-go does.
const resourceWrapperType = resourcev3.APITypePrefix + "envoy.service.discovery.v3.Resource"

// fields calls fn with each field of the message b: its number, and its
// bytes (a length-delimited field) or its value (a varint); fixed-width
// and group fields are skipped.
func fields(b []byte, fn func(num protowire.Number, bytes []byte, varint uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType && typ != protowire.VarintType {
			continue
		}
		if err := fn(num, v, x); err != nil {
			return err
		}
	}
	return nil
}

// unwrap returns the bytes of a response's resource of typeURL, out of
// its discovery.Resource wrapper if it has one.
func unwrap(typeURL string, a *anypb.Any) ([]byte, error) {
	if a.GetTypeUrl() == resourceWrapperType {
		var inner []byte
		innerType := ""
		err := fields(a.GetValue(), func(num protowire.Number, b []byte, _ uint64) error {
			if num != 2 { // Resource.resource
				return nil
			}
			return fields(b, func(num protowire.Number, b []byte, _ uint64) error {
				switch num {
				case 1: // Any.type_url
					innerType = string(b)
				case 2: // Any.value
					inner = b
				}
				return nil
			})
		})
		if err != nil {
			return nil, fmt.Errorf("decoding a Resource wrapper: %w", err)
		}
		if innerType != typeURL {
			return nil, fmt.Errorf("a %s response wraps a %q", typeURL, innerType)
		}
		return inner, nil
	}
	if a.GetTypeUrl() != typeURL {
		return nil, fmt.Errorf("a %s response holds a %s", typeURL, a.GetTypeUrl())
	}
	return a.GetValue(), nil
}

// readListener reads a Listener's name and the RDS route configuration
// its API listener's HttpConnectionManager names.
func readListener(b []byte) (name, routeConfig string, err error) {
	api := false
	err = fields(b, func(num protowire.Number, b []byte, _ uint64) error {
		switch num {
		case 1: // Listener.name
			name = string(b)
		case 19: // Listener.api_listener
			api = true
			return fields(b, func(num protowire.Number, b []byte, _ uint64) error {
				if num != 1 { // ApiListener.api_listener, an Any
					return nil
				}
				hcmType, hcm := "", []byte(nil)
				if err := fields(b, func(num protowire.Number, b []byte, _ uint64) error {
					switch num {
					case 1:
						hcmType = string(b)
					case 2:
						hcm = b
					}
					return nil
				}); err != nil {
					return err
				}
				if hcmType != httpConnectionManagerType {
					return fmt.Errorf("the API listener holds a %q, not an HttpConnectionManager", hcmType)
				}
				return fields(hcm, func(num protowire.Number, b []byte, _ uint64) error {
					if num != 3 { // HttpConnectionManager.rds
						return nil
					}
					return fields(b, func(num protowire.Number, b []byte, _ uint64) error {
						if num == 2 { // Rds.route_config_name
							routeConfig = string(b)
						}
						return nil
					})
				})
			})
		}
		return nil
	})
	switch {
	case err != nil:
		return name, "", err
	case !api:
		return name, "", errors.New("not an API listener")
	case routeConfig == "":
		return name, "", errors.New("the HttpConnectionManager names no RDS route configuration")
	}
	return name, routeConfig, nil
}

// routeConfig is what a client follows of a RouteConfiguration.
type routeConfig struct {
	name string
	// clusters are the clusters its routes lead to, sorted, once each.
	clusters []string
	// split is routeKey of the first route that splits traffic by
	// weight; "" when none does.
	split string
}

// readRouteConfig reads a RouteConfiguration's name, the clusters its
// routes lead to and its first weighted split.
func readRouteConfig(b []byte) (routeConfig, error) {
	var rc routeConfig
	var weights []uint32
	splitFound := false
	err := fields(b, func(num protowire.Number, b []byte, _ uint64) error {
		switch num {
		case 1: // RouteConfiguration.name
			rc.name = string(b)
		case 2: // RouteConfiguration.virtual_hosts
			return fields(b, func(num protowire.Number, b []byte, _ uint64) error {
				if num != 3 { // VirtualHost.routes
					return nil
				}
				return fields(b, func(num protowire.Number, b []byte, _ uint64) error {
					if num != 2 { // Route.route, a RouteAction
						return nil
					}
					var w []uint32
					err := fields(b, func(num protowire.Number, b []byte, _ uint64) error {
						switch num {
						case 1: // RouteAction.cluster
							rc.clusters = append(rc.clusters, string(b))
						case 3: // RouteAction.weighted_clusters
							return fields(b, func(num protowire.Number, b []byte, _ uint64) error {
								if num != 1 { // WeightedCluster.clusters
									return nil
								}
								var weight uint32
								err := fields(b, func(num protowire.Number, b []byte, _ uint64) error {
									switch num {
									case 1: // ClusterWeight.name
										rc.clusters = append(rc.clusters, string(b))
									case 2: // ClusterWeight.weight, a UInt32Value
										return fields(b, func(num protowire.Number, _ []byte, x uint64) error {
											if num == 1 {
												weight = uint32(x)
											}
											return nil
										})
									}
									return nil
								})
								w = append(w, weight)
								return err
							})
						}
						return nil
					})
					if len(w) > 0 && !splitFound {
						splitFound, weights = true, w
					}
					return err
				})
			})
		}
		return nil
	})
	if err != nil {
		return rc, err
	}
	rc.clusters = sortedUnique(rc.clusters)
	if splitFound {
		rc.split = routeKey(rc.name, weights)
	}
	return rc, nil
}

// readCluster reads a Cluster's name and the service name it asks EDS
// for (its name when it sets none).
func readCluster(b []byte) (name, eds string, err error) {
	err = fields(b, func(num protowire.Number, b []byte, _ uint64) error {
		switch num {
		case 1: // Cluster.name
			name = string(b)
		case 3: // Cluster.eds_cluster_config
			return fields(b, func(num protowire.Number, b []byte, _ uint64) error {
				if num == 2 { // EdsClusterConfig.service_name
					eds = string(b)
				}
				return nil
			})
		}
		return nil
	})
	if eds == "" {
		eds = name
	}
	return name, eds, err
}

// readLoadAssignment reads a ClusterLoadAssignment's cluster name and
// calls fn with each endpoint's socket address (as bytes that live only
// for the call) and health status, in order.
func readLoadAssignment(b []byte, fn func(addr []byte, health int32)) (name string, err error) {
	err = fields(b, func(num protowire.Number, b []byte, _ uint64) error {
		switch num {
		case 1: // ClusterLoadAssignment.cluster_name
			name = string(b)
		case 2: // ClusterLoadAssignment.endpoints, LocalityLbEndpoints
			return fields(b, func(num protowire.Number, b []byte, _ uint64) error {
				if num != 2 { // LocalityLbEndpoints.lb_endpoints
					return nil
				}
				return readLbEndpoint(b, fn)
			})
		}
		return nil
	})
	return name, err
}

func readLbEndpoint(b []byte, fn func(addr []byte, health int32)) error {
	var addr []byte
	var health int32
	err := fields(b, func(num protowire.Number, b []byte, x uint64) error {
		switch num {
		case 1: // LbEndpoint.endpoint
			return fields(b, func(num protowire.Number, b []byte, _ uint64) error {
				if num != 1 { // Endpoint.address
					return nil
				}
				return fields(b, func(num protowire.Number, b []byte, _ uint64) error {
					if num != 1 { // Address.socket_address
						return nil
					}
					return fields(b, func(num protowire.Number, b []byte, _ uint64) error {
						if num == 2 { // SocketAddress.address
							addr = b
						}
						return nil
					})
				})
			})
		case 2: // LbEndpoint.health_status
			health = int32(x)
		}
		return nil
	})
	if err == nil {
		fn(addr, health)
	}
	return err
}
