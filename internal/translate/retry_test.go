package translate

import (
	"testing"
	"time"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
)

func TestRetryPolicy(t *testing.T) {
	no := false
	withDefault := func(change func(p *route.RetryPolicy)) *route.RetryPolicy {
		p := defaultRetryPolicy()
		change(p)
		return p
	}
	for _, tc := range []struct {
		desc string
		in   *model.HTTPRetry
		want *route.RetryPolicy
	}{
		{"none: istiod's default", nil, defaultRetryPolicy()},
		{"zero attempts: no policy", &model.HTTPRetry{}, nil},
		{"attempts only: the default's conditions", &model.HTTPRetry{Attempts: 5}, withDefault(func(p *route.RetryPolicy) {
			p.NumRetries = wrapperspb.UInt32(5)
		})},
		{
			"every field; HTTP codes in retryOn become retriable status codes",
			&model.HTTPRetry{Attempts: 1, RetryOn: "unavailable, 502,gateway-error", PerTryTimeout: time.Second, Backoff: 50 * time.Millisecond, RetryIgnorePreviousHosts: &no},
			withDefault(func(p *route.RetryPolicy) {
				p.NumRetries = wrapperspb.UInt32(1)
				p.RetryOn = "unavailable,gateway-error,retriable-status-codes"
				p.RetriableStatusCodes = []uint32{502}
				p.PerTryTimeout = durationpb.New(time.Second)
				p.RetryBackOff = &route.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(50 * time.Millisecond)}
				p.RetryHostPredicate = nil
			}),
		},
		{"gRPC names only: no status codes", &model.HTTPRetry{Attempts: 2, RetryOn: "cancelled,deadline-exceeded"}, withDefault(func(p *route.RetryPolicy) {
			p.RetryOn = "cancelled,deadline-exceeded"
			p.RetriableStatusCodes = nil
		})},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := retryPolicy(tc.in); !proto.Equal(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}
