package xds

import (
	"context"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshpilot/meshpilot/internal/model"
)

// typeIndex numbers the four resource types.
type typeIndex int

const (
	tListener typeIndex = iota
	tRoute
	tCluster
	tEndpoint
	numTypes
)

var typeURLs = [numTypes]string{ListenerType, RouteType, ClusterType, EndpointType}

func typeOf(url string) (typeIndex, bool) {
	for i, u := range typeURLs {
		if u == url {
			return typeIndex(i), true
		}
	}
	return 0, false
}

func (t typeIndex) short() string { return [...]string{"LDS", "RDS", "CDS", "EDS"}[t] }

// absent is the version recorded in a client's returned resources for a
// name it asked for and that does not exist: it was answered (left out of
// a state-of-the-world response) and needs no answer again until it
// appears.
const absent = "-"

// entry is one generated resource, marshalled once and shared by every
// client that gets it. Its version is a hash of its bytes, so a
// regeneration that yields the same bytes yields the same version and
// nobody is sent anything.
type entry struct {
	key     entryKey // in Server.entries
	name    string
	host    model.Hostname
	version string
	any     *anypb.Any          // nil: the resource does not exist
	delta   *discovery.Resource // the delta form, shared too
}

func (e *entry) exists() bool { return e != nil && e.any != nil }

var deterministic = proto.MarshalOptions{Deterministic: true}

func newEntry(typeURL, name string, host model.Hostname, m proto.Message) (*entry, error) {
	e := &entry{name: name, host: host, version: absent}
	if m == nil {
		return e, nil
	}
	b, err := deterministic.Marshal(m)
	if err != nil {
		return nil, err
	}
	e.version = strconv.FormatUint(xxhash.Sum64(b), 36)
	e.any = &anypb.Any{TypeUrl: typeURL, Value: b}
	e.delta = &discovery.Resource{Name: name, Version: e.version, Resource: e.any}
	return e, nil
}

// sotwResponse is a state-of-the-world response whose resources are the
// shared, already marshalled entries.
type sotwResponse struct {
	req      *discovery.DiscoveryRequest
	out      *discovery.DiscoveryResponse
	returned map[string]string
	// change is when the model change that caused the response reached
	// meshpilot (zero if none); holds is every resource of the type the
	// client holds once it accepts the response. Both reach the send
	// callback through GetContext.
	change time.Time
	holds  []*anypb.Any
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
