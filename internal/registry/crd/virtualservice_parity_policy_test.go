package crd

import (
	"testing"
)

// TestRetriesValidatedAsIstio: a route's retries are refused where
// Istio's validation (ValidateHTTPRetry) refuses them, with the field and
// why: a retryOn entry that is neither an HTTP status code nor a
// condition Envoy knows (split on commas as written), retry settings
// with attempts 0, durations under a millisecond or finer than one.
func TestRetriesValidatedAsIstio(t *testing.T) {
	for _, tc := range []struct {
		retries string
		field   string // "": applied
	}{
		{`{attempts: 3, retryOn: "5xx,gateway-error,reset,connect-failure,retriable-4xx,refused-stream,retriable-status-codes"}`, ""},
		{`{attempts: 3, retryOn: "cancelled,deadline-exceeded,internal,resource-exhausted,unavailable,503,429"}`, ""},
		{`{attempts: 2, retryOn: "reset-before-request,retriable-headers,envoy-ratelimited,http3-post-connect-failure"}`, ""},
		{`{attempts: 0}`, ""},
		{`{attempts: 2, perTryTimeout: 1ms, backoff: 25ms}`, ""},
		{`{attempts: 3, retryOn: "unavailable,server-error"}`, "spec.http[0].retries.retryOn"},
		{`{attempts: 3, retryOn: "unavailable, cancelled"}`, "spec.http[0].retries.retryOn"},
		{`{attempts: 3, retryOn: "999"}`, "spec.http[0].retries.retryOn"},
		{`{attempts: 3, retryOn: "unavailable,"}`, "spec.http[0].retries.retryOn"},
		{`{attempts: 0, retryOn: "unavailable"}`, "spec.http[0].retries.attempts"},
		{`{attempts: 0, perTryTimeout: 1s}`, "spec.http[0].retries.attempts"},
		{`{attempts: 0, retryRemoteLocalities: true}`, "spec.http[0].retries.attempts"},
		{`{attempts: -1}`, "spec.http[0].retries.attempts"},
		{`{attempts: 2, perTryTimeout: 0.5ms}`, "spec.http[0].retries.perTryTimeout"},
		{`{attempts: 2, perTryTimeout: 1.5ms}`, "spec.http[0].retries.perTryTimeout"},
		{`{attempts: 2, backoff: 0s}`, "spec.http[0].retries.backoff"},
	} {
		vs := vsFromYAML(t, "reviews", `
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews}
    retries: `+tc.retries)
		_, status := ConvertVirtualService(vs, ConvertOptions{})
		switch {
		case tc.field == "" && status.Refused != nil:
			t.Errorf("%s: refused at %s: %s", tc.retries, status.Refused.Path, status.Refused.Why)
		case tc.field != "" && (status.Refused == nil || status.Refused.Path != tc.field || status.Refused.Why == ""):
			t.Errorf("%s: status %+v, want refused at %s", tc.retries, status, tc.field)
		}
	}
}
