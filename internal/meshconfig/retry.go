package meshconfig

import (
	"fmt"

	apinetworking "istio.io/api/networking/v1alpha3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// ConvertHTTPRetry converts an Istio retry policy (MeshConfig's
// defaultHttpRetryPolicy, a VirtualService route's retries) and refuses
// what Istio's validation (validateHTTPRetry) refuses; the error names
// the field under p.
func ConvertHTTPRetry(p *apinetworking.HTTPRetry) (*model.HTTPRetry, error) {
	r := &model.HTTPRetry{Attempts: p.GetAttempts(), RetryOn: p.GetRetryOn()}
	if r.Attempts < 0 {
		return nil, fmt.Errorf("attempts: %d is negative", r.Attempts)
	}
	if d := p.GetPerTryTimeout(); d != nil {
		if r.PerTryTimeout = d.AsDuration(); r.PerTryTimeout <= 0 {
			return nil, fmt.Errorf("perTryTimeout: %s is not positive", r.PerTryTimeout)
		}
	}
	if d := p.GetBackoff(); d != nil {
		if r.Backoff = d.AsDuration(); r.Backoff <= 0 {
			return nil, fmt.Errorf("backoff: %s is not positive", r.Backoff)
		}
	}
	if b := p.GetRetryIgnorePreviousHosts(); b != nil {
		v := b.GetValue()
		r.RetryIgnorePreviousHosts = &v
	}
	return r, nil
}
