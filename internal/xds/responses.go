package xds

import (
	"context"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// sotwResponse is a state-of-the-world response whose resources are the
// shared, already marshalled entries.
type sotwResponse struct {
	req      *discovery.DiscoveryRequest
	out      *discovery.DiscoveryResponse
	returned map[string]string
	// change is when the model change that caused the response reached
	// meshpilot (zero if none); holds is every resource of the type the
	// client holds once it accepts the response, which keeps them cached
	// while the response is on its way. Both reach the send callback
	// through GetContext.
	change time.Time
	holds  []*entry
}

var _ cache.Response = (*sotwResponse)(nil)

func (r *sotwResponse) GetDiscoveryResponse() (*discovery.DiscoveryResponse, error) {
	return r.out, nil
}
func (r *sotwResponse) GetRequest() *discovery.DiscoveryRequest { return r.req }
func (r *sotwResponse) GetVersion() (string, error)             { return r.out.GetVersionInfo(), nil }
func (r *sotwResponse) GetResponseVersion() string              { return r.out.GetVersionInfo() }
func (r *sotwResponse) GetReturnedResources() map[string]string { return r.returned }
func (r *sotwResponse) GetContext() context.Context {
	return context.WithValue(context.Background(), responseKey{}, r)
}

// deltaResponse is an incremental response made of shared entries.
type deltaResponse struct {
	req      *discovery.DeltaDiscoveryRequest
	out      *discovery.DeltaDiscoveryResponse
	returned map[string]string
}

var _ cache.DeltaResponse = (*deltaResponse)(nil)

func (r *deltaResponse) GetDeltaDiscoveryResponse() (*discovery.DeltaDiscoveryResponse, error) {
	return r.out, nil
}
func (r *deltaResponse) GetDeltaRequest() *discovery.DeltaDiscoveryRequest { return r.req }
func (r *deltaResponse) GetSystemVersion() (string, error)                 { return r.out.GetSystemVersionInfo(), nil }
func (r *deltaResponse) GetResponseVersion() string                        { return r.out.GetSystemVersionInfo() }
func (r *deltaResponse) GetNextVersionMap() map[string]string              { return r.returned }
func (r *deltaResponse) GetReturnedResources() map[string]string           { return r.returned }
func (r *deltaResponse) GetContext() context.Context                       { return context.Background() }

// versionHash digests (name, version) pairs into a REST version.
type versionHash struct{ d *xxhash.Digest }

func newVersionHash() versionHash { return versionHash{xxhash.New()} }

func (v versionHash) add(name, version string) {
	_, _ = v.d.WriteString(name)
	_, _ = v.d.WriteString("\x00")
	_, _ = v.d.WriteString(version)
	_, _ = v.d.WriteString("\x00")
}

func (v versionHash) String() string { return strconv.FormatUint(v.d.Sum64(), 36) }
