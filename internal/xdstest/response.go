package xdstest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	// The HttpConnectionManager inside API listeners decodes with them.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

// wrapperType is the type URL of discovery.Resource, in which a state of
// the world response may wrap each resource (client feature
// xds.config.resource-in-sotw).
const wrapperType = resourcev3.APITypePrefix + "envoy.service.discovery.v3.Resource"

// Response is one response of either stream kind, decoded.
type Response struct {
	TypeURL string
	// Version is version_info, or a delta response's system_version_info.
	Version string
	Nonce   string
	// Resources in the order of the response.
	Resources []Resource
	// Removed lists the names a delta response removes.
	Removed []string
	// Err says why a resource could not be decoded, or why it is not of
	// the response's type; nil when all are fine. AutoACK NACKs such a
	// response.
	Err error
	// Received is when the client read it.
	Received time.Time

	// SotW is the response as received on a state of the world stream,
	// Delta on a delta stream; the other is nil.
	SotW  *discovery.DiscoveryResponse
	Delta *discovery.DeltaDiscoveryResponse
}

// Resource is one resource of a response.
type Resource struct {
	Name string
	// Version is the resource's own version (delta only).
	Version string
	// Message is the decoded resource; nil when its type is unknown to
	// this process or it did not decode (see Response.Err).
	Message proto.Message
	// Raw is the resource as it came, wrapper included.
	Raw *anypb.Any
}

// Reset drops what r refers to and keeps its storage for ReceiveInto, so
// that a reused response keeps nothing of the last one alive.
func (r *Response) Reset() {
	clear(r.Resources)
	*r = Response{Resources: r.Resources[:0]}
}

// Names lists the names of the response's resources, in its order.
func (r *Response) Names() []string {
	out := make([]string, 0, len(r.Resources))
	for _, res := range r.Resources {
		out = append(out, res.Name)
	}
	return out
}

// Get returns the resource called name, if the response has it.
func (r *Response) Get(name string) (Resource, bool) {
	for _, res := range r.Resources {
		if res.Name == name {
			return res, true
		}
	}
	return Resource{}, false
}

// LoadAssignment is the response's ClusterLoadAssignment called name, or
// nil.
func (r *Response) LoadAssignment(name string) *endpoint.ClusterLoadAssignment {
	return typed[*endpoint.ClusterLoadAssignment](r.Get(name))
}

// Listener is the response's listener called name, or nil.
func (r *Response) Listener(name string) *listener.Listener {
	return typed[*listener.Listener](r.Get(name))
}

// Cluster is the response's cluster called name, or nil.
func (r *Response) Cluster(name string) *cluster.Cluster {
	return typed[*cluster.Cluster](r.Get(name))
}

// RouteConfiguration is the response's route configuration called name,
// or nil.
func (r *Response) RouteConfiguration(name string) *route.RouteConfiguration {
	return typed[*route.RouteConfiguration](r.Get(name))
}

func typed[T proto.Message](res Resource, _ bool) T {
	m, _ := res.Message.(T)
	return m
}

// decodeSotW makes r the decoded m, read at now, reusing r's storage;
// raw leaves the resources undecoded (Options.Raw).
func decodeSotW(r *Response, m *discovery.DiscoveryResponse, now time.Time, raw bool) {
	*r = Response{TypeURL: m.GetTypeUrl(), Version: m.GetVersionInfo(), Nonce: m.GetNonce(), SotW: m, Received: now,
		Resources: slices.Grow(r.Resources[:0], len(m.GetResources()))}
	if raw {
		for _, a := range m.GetResources() {
			r.Resources = append(r.Resources, Resource{Raw: a})
		}
		return
	}
	var errs []error
	for _, a := range m.GetResources() {
		res, err := decode(r.TypeURL, "", a)
		if err != nil {
			errs = append(errs, err)
		}
		res.Raw = a
		r.Resources = append(r.Resources, res)
	}
	r.Err = errors.Join(errs...)
}

// decodeDelta is decodeSotW for a delta response. A delta resource's
// name and version come apart from its bytes: raw keeps them.
func decodeDelta(r *Response, m *discovery.DeltaDiscoveryResponse, now time.Time, raw bool) {
	*r = Response{TypeURL: m.GetTypeUrl(), Version: m.GetSystemVersionInfo(), Nonce: m.GetNonce(), Delta: m, Received: now,
		Removed: m.GetRemovedResources(), Resources: slices.Grow(r.Resources[:0], len(m.GetResources()))}
	var errs []error
	for _, dr := range m.GetResources() {
		res := Resource{Name: dr.GetName(), Version: dr.GetVersion(), Raw: dr.GetResource()}
		if dr.GetResource() != nil && !raw {
			d, err := decode(r.TypeURL, dr.GetName(), dr.GetResource())
			if err != nil {
				errs = append(errs, err)
			}
			res.Message = d.Message
		}
		r.Resources = append(r.Resources, res)
	}
	r.Err = errors.Join(errs...)
}

// decode unwraps and decodes a resource of a typeURL response; name is
// the name the response gives it, if any. A resource of a type this
// process does not know is kept undecoded without an error.
func decode(typeURL, name string, a *anypb.Any) (Resource, error) {
	res := Resource{Name: name}
	if a.GetTypeUrl() == wrapperType {
		var w discovery.Resource
		if err := proto.Unmarshal(a.GetValue(), &w); err != nil {
			return res, fmt.Errorf("%s: decoding a Resource wrapper: %w", shortType(typeURL), err)
		}
		if res.Name == "" {
			res.Name = w.GetName()
		}
		res.Version = w.GetVersion()
		a = w.GetResource()
	}
	if a.GetTypeUrl() != typeURL {
		return res, fmt.Errorf("%s: a %s response holds a %s", shortType(typeURL), typeURL, a.GetTypeUrl())
	}
	m, err := a.UnmarshalNew()
	if errors.Is(err, protoregistry.NotFound) {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("%s: decoding %s: %w", shortType(typeURL), nameOr(res.Name, "a resource"), err)
	}
	res.Message = m
	if res.Name == "" {
		res.Name = resourceName(m)
	}
	return res, nil
}

func nameOr(name, otherwise string) string {
	if name == "" {
		return otherwise
	}
	return name
}

// resourceName is the name a resource goes by: a ClusterLoadAssignment
// its cluster name, anything else its name.
func resourceName(m proto.Message) string {
	switch m := m.(type) {
	case *endpoint.ClusterLoadAssignment:
		return m.GetClusterName()
	case interface{ GetName() string }:
		return m.GetName()
	}
	return ""
}

// shortType is LDS, RDS, CDS or EDS for their type URLs, the URL itself
// otherwise.
func shortType(typeURL string) string {
	switch typeURL {
	case resourcev3.ListenerType:
		return "LDS"
	case resourcev3.RouteType:
		return "RDS"
	case resourcev3.ClusterType:
		return "CDS"
	case resourcev3.EndpointType:
		return "EDS"
	}
	return typeURL
}

// fullState says whether a state of the world response of typeURL carries
// every resource the client holds of that type (the xDS protocol's rule
// for listeners and clusters), so that a name missing from it is gone.
func fullState(typeURL string) bool {
	return typeURL == resourcev3.ListenerType || typeURL == resourcev3.ClusterType
}
