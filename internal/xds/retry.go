package xds

import (
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	previoushosts "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// defaultRetryOn is istiod's retry_on for a route without a retry policy
// of its own. grpc-go reads only the gRPC status names in it
// (unavailable, cancelled) and ignores the others, which are for Envoy.
const defaultRetryOn = "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"

// previousHosts makes Envoy prefer, on a retry, a host not tried yet, as
// istiod's default policy does; grpc-go ignores host predicates.
var previousHosts = func() *route.RetryPolicy_RetryHostPredicate {
	a, err := anypb.New(&previoushosts.PreviousHostsPredicate{})
	if err != nil {
		panic(err) // an empty message always marshals
	}
	return &route.RetryPolicy_RetryHostPredicate{
		Name:       "envoy.retry_host_predicates.previous_hosts",
		ConfigType: &route.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: a},
	}
}()

// defaultRetryPolicy is istiod's default retry policy: 2 retries on
// connection failures, UNAVAILABLE, CANCELLED and HTTP 503, on another
// host when there is one. Users of Istio count on it: a gRPC client
// retries a server's UNAVAILABLE once or twice without asking for it.
// A new message each time: callers may change it.
func defaultRetryPolicy() *route.RetryPolicy {
	return &route.RetryPolicy{
		NumRetries:                    wrapperspb.UInt32(2),
		RetryOn:                       defaultRetryOn,
		RetriableStatusCodes:          []uint32{503},
		HostSelectionRetryMaxAttempts: 5,
		RetryHostPredicate:            []*route.RetryPolicy_RetryHostPredicate{previousHosts},
	}
}
