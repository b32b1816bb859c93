package xds

import (
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// response is a response built for a stream, state of the world or
// delta, whose resources are the shared, already marshalled entries.
type response struct {
	sotw  *discovery.DiscoveryResponse
	delta *discovery.DeltaDiscoveryResponse
	// returned is what the stream holds of the type once it is sent
	// (name to version): the subscription's returned resources.
	returned versionMap
	// change is when the model change that caused the response reached
	// meshpilot (zero if none); holds is every resource of the type the
	// client holds once it accepts the response, which keeps them cached
	// while the response is on its way.
	change time.Time
	holds  []*entry
}

func (r *response) setNonce(n string) {
	if r.sotw != nil {
		r.sotw.Nonce = n
	} else {
		r.delta.Nonce = n
	}
}

func (r *response) version() string {
	if r.sotw != nil {
		return r.sotw.GetVersionInfo()
	}
	return r.delta.GetSystemVersionInfo()
}

func (r *response) message() any {
	if r.sotw != nil {
		return r.sotw
	}
	return r.delta
}

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
