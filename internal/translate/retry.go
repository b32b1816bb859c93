package translate

import (
	"net/http"
	"strconv"
	"strings"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	previoushosts "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
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
// connection failures, UNAVAILABLE and CANCELLED, on another host when
// there is one. Users of Istio count on it: a gRPC client retries a
// server's UNAVAILABLE once or twice without asking for it. It names
// retriable-status-codes but no code: Istio 1.24 stopped retrying HTTP
// 503 by default (a 503 may come from an application that did the work).
// A new message each time: callers may change it.
func defaultRetryPolicy() *route.RetryPolicy {
	return &route.RetryPolicy{
		NumRetries:                    wrapperspb.UInt32(2),
		RetryOn:                       defaultRetryOn,
		HostSelectionRetryMaxAttempts: 5,
		RetryHostPredicate:            []*route.RetryPolicy_RetryHostPredicate{previousHosts},
	}
}

// retryPolicy converts a retry setting as istiod does: nil is the default
// policy, zero attempts no policy, anything else the default with the
// setting's fields over it. grpc-go NACKs num_retries 0, so a policy is
// sent with at least one retry or not at all.
func retryPolicy(in *model.HTTPRetry) *route.RetryPolicy {
	out := defaultRetryPolicy()
	if in == nil {
		return out
	}
	if in.Attempts <= 0 {
		return nil
	}
	out.NumRetries = wrapperspb.UInt32(uint32(in.Attempts))
	if in.RetryOn != "" {
		out.RetryOn, out.RetriableStatusCodes = splitRetryOn(in.RetryOn)
		if len(out.RetriableStatusCodes) > 0 && !strings.Contains(out.RetryOn, "retriable-status-codes") {
			out.RetryOn += ",retriable-status-codes"
		}
	}
	if in.PerTryTimeout > 0 {
		out.PerTryTimeout = durationpb.New(in.PerTryTimeout)
	}
	if in.RetryIgnorePreviousHosts != nil && !*in.RetryIgnorePreviousHosts {
		out.RetryHostPredicate = nil
	}
	if in.Backoff > 0 {
		out.RetryBackOff = &route.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(in.Backoff)}
	}
	return out
}

// splitRetryOn separates HTTP status codes (what parses as one) from the
// named conditions of an Istio retryOn list.
func splitRetryOn(retryOn string) (conditions string, codes []uint32) {
	var names []string
	for part := range strings.SplitSeq(retryOn, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if code, err := strconv.Atoi(part); err == nil && http.StatusText(code) != "" {
			codes = append(codes, uint32(code))
			continue
		}
		names = append(names, part)
	}
	return strings.Join(names, ","), codes
}
