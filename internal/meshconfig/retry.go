package meshconfig

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	apinetworking "istio.io/api/networking/v1alpha3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// ConvertHTTPRetry converts an Istio retry policy (MeshConfig's
// defaultHttpRetryPolicy, a VirtualService route's retries) and refuses
// what Istio's validation (ValidateHTTPRetry) refuses; the error names
// the field under p.
func ConvertHTTPRetry(p *apinetworking.HTTPRetry) (*model.HTTPRetry, error) {
	r := &model.HTTPRetry{Attempts: p.GetAttempts(), RetryOn: p.GetRetryOn()}
	if r.Attempts < 0 {
		return nil, fmt.Errorf("attempts: %d is negative", r.Attempts)
	}
	if r.Attempts == 0 && (p.GetPerTryTimeout() != nil || r.RetryOn != "" || p.GetRetryRemoteLocalities() != nil) {
		return nil, fmt.Errorf("attempts: 0 turns retries off, yet perTryTimeout, retryOn or retryRemoteLocalities is set")
	}
	if d := p.GetPerTryTimeout(); d != nil {
		r.PerTryTimeout = d.AsDuration()
		if err := checkDuration(r.PerTryTimeout); err != nil {
			return nil, fmt.Errorf("perTryTimeout: %w", err)
		}
	}
	if r.RetryOn != "" {
		// Split as Istio's validation splits: " 5xx" is no condition.
		for part := range strings.SplitSeq(r.RetryOn, ",") {
			code, _ := strconv.Atoi(part)
			if http.StatusText(code) == "" && !slices.Contains(retryOnConditions, part) {
				return nil, fmt.Errorf("retryOn: %q is neither an HTTP status code nor one of %s", part, strings.Join(retryOnConditions, ", "))
			}
		}
	}
	if d := p.GetBackoff(); d != nil {
		r.Backoff = d.AsDuration()
		if err := checkDuration(r.Backoff); err != nil {
			return nil, fmt.Errorf("backoff: %w", err)
		}
	}
	if b := p.GetRetryIgnorePreviousHosts(); b != nil {
		v := b.GetValue()
		r.RetryIgnorePreviousHosts = &v
	}
	return r, nil
}

// retryOnConditions are the retryOn conditions Istio's validation
// accepts: Envoy's x-envoy-retry-on and x-envoy-retry-grpc-on values.
var retryOnConditions = []string{
	"5xx", "gateway-error", "reset", "reset-before-request", "connect-failure", "retriable-4xx",
	"refused-stream", "retriable-status-codes", "retriable-headers", "envoy-ratelimited",
	"http3-post-connect-failure",
	"cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable",
}

// checkDuration refuses a duration as Istio's ValidateDuration does:
// under 1 ms, or finer than milliseconds.
func checkDuration(d time.Duration) error {
	if d < time.Millisecond {
		return fmt.Errorf("%s is under 1ms", d)
	}
	if d%time.Millisecond != 0 {
		return fmt.Errorf("%s is finer than milliseconds", d)
	}
	return nil
}
