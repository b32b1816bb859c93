package model

import "time"

// MeshSettings are the mesh-wide settings generators read (Istio's
// MeshConfig, the fields meshpilot honours). The zero value is Istio's
// default mesh. A MeshSettings is never changed once published: a change
// is a new one.
type MeshSettings struct {
	// DefaultHTTPRetry is the retry policy of a route without one of its
	// own; nil means Istio's default policy, Attempts 0 no retries.
	DefaultHTTPRetry *HTTPRetry
}

// HTTPRetry is a retry policy as Istio's HTTPRetry states it.
type HTTPRetry struct {
	// Attempts is the number of retries; 0 turns retries off.
	Attempts int32
	// RetryOn lists the conditions, comma separated (Envoy's names and
	// gRPC status names; integers are HTTP status codes). Empty keeps
	// the default's.
	RetryOn string
	// PerTryTimeout, when not zero, bounds each attempt.
	PerTryTimeout time.Duration
	// Backoff, when not zero, is the base interval between retries.
	Backoff time.Duration
	// RetryIgnorePreviousHosts, when set, says whether a retry avoids
	// the hosts already tried; unset keeps the default (it does).
	RetryIgnorePreviousHosts *bool
}

// MeshWatcher publishes the mesh settings in force. Mesh must be cheap
// and safe for concurrent use; a change is reported as an event of kind
// ConfigChanged with MeshConfigKey.
type MeshWatcher interface {
	Mesh() *MeshSettings
}

// MeshConfigKey is the key of the mesh-wide settings: what reads them
// (every route, for its default retry policy) depends on it.
var MeshConfigKey = ConfigKey{Kind: KindMeshConfig}
