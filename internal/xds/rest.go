package xds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// restPaths are Envoy's REST-JSON discovery paths and their types.
var restPaths = map[string]string{
	"/v3/discovery:clusters":  resource.ClusterType,
	"/v3/discovery:endpoints": resource.EndpointType,
	"/v3/discovery:listeners": resource.ListenerType,
	"/v3/discovery:routes":    resource.RouteType,
}

// RESTHandler serves REST-JSON discovery as Envoy's REST API type expects:
// POST /v3/discovery:clusters, :endpoints, :listeners, :routes with a JSON
// DiscoveryRequest, answered with the DiscoveryResponse in JSON (proto
// field names). It answers 304 when the request's version_info is
// current, 503 until the model is ready, 400 for a body that is not a
// DiscoveryRequest, a request beyond the limits (limits.go) or a body
// over MaxRequestBytes, and 403 under Options.RequireIdentity for a
// client whose certificate does not entitle it to its node, or that
// presents none.
func (s *Server) RESTHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST a DiscoveryRequest", http.StatusMethodNotAllowed)
			return
		}
		typeURL, ok := restPaths[path.Clean(r.URL.Path)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if !s.ready() {
			http.Error(w, "the service model is not synced yet", http.StatusServiceUnavailable)
			return
		}
		// Bound the body as gRPC bounds a request (a longer body fails as
		// unreadable, 400).
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
		if err != nil {
			http.Error(w, "cannot read body", http.StatusBadRequest)
			return
		}
		req := &discovery.DiscoveryRequest{}
		if err := protojson.Unmarshal(body, req); err != nil {
			http.Error(w, "cannot parse JSON body: "+err.Error(), http.StatusBadRequest)
			return
		}
		req.TypeUrl = typeURL
		// The identity check reads the client's certificate from here
		// (identity.go).
		out, err := s.fetch(withTLSState(r.Context(), r.TLS), req)
		if errors.Is(err, errNotModified) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if err != nil {
			code := http.StatusInternalServerError
			switch status.Code(err) {
			case codes.InvalidArgument:
				code = http.StatusBadRequest // a request beyond the limits
			case codes.PermissionDenied:
				code = http.StatusForbidden // a node its certificate does not allow
			}
			http.Error(w, "fetch error: "+err.Error(), code)
			return
		}
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(out)
		if err != nil {
			http.Error(w, "marshal error: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
}

// errNotModified answers a fetch whose version is current.
var errNotModified = errors.New("meshpilot: the version is current")

// fetchAs serves a per-type service's unary fetch.
func (s *Server) fetchAs(ctx context.Context, req *discovery.DiscoveryRequest, typeURL string) (*discovery.DiscoveryResponse, error) {
	if req == nil {
		return nil, status.Error(codes.Unavailable, "empty request")
	}
	req.TypeUrl = typeURL
	return s.fetch(ctx, req)
}

// fetch answers a REST request or a unary fetch: the named resources
// (everything, for a non-gRPC client naming none of a type that has a
// wildcard), with a version derived from their content, or
// errNotModified when that is the request's version.
func (s *Server) fetch(ctx context.Context, req *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	if !s.ready() {
		return nil, errNotReady
	}
	if err := s.limits.check(req.GetResourceNames(), nil, req.GetNode()); err != nil {
		return nil, s.refuse("rest", req.GetNode().GetId(), req.GetTypeUrl(), err)
	}
	if err := s.authorizeFetch(ctx, req.GetNode()); err != nil {
		return nil, err
	}
	t, ok := s.typeOf(req.GetTypeUrl())
	if !ok {
		return nil, fmt.Errorf("meshpilot does not serve %q", req.GetTypeUrl())
	}
	c := s.client(req.GetNode())
	names := req.GetResourceNames()
	if len(names) == 0 && isWildcard(s.types[t], &c, true) {
		names = s.cache.gens[t].AllNames()
	}
	// The server's lock only to take what the cache holds current: what
	// it lacks is built outside it, so that REST requests, however many,
	// never hold up a push or a stream's watch while they generate.
	entries := make([]*entry, len(names))
	s.mu.Lock()
	for i, n := range names {
		entries[i] = s.cache.peek(t, &c, n)
	}
	s.mu.Unlock()
	var res []*anypb.Any
	sum := newVersionHash()
	for i, n := range names {
		e := entries[i]
		if e == nil {
			e = s.cache.build(t, &c, n)
		}
		if e.exists() {
			res = append(res, e.any)
			sum.add(n, e.version)
		}
	}
	version := s.prefix + "-" + sum.String()
	if req.GetVersionInfo() == version {
		return nil, errNotModified
	}
	return &discovery.DiscoveryResponse{VersionInfo: version, Resources: res, TypeUrl: req.GetTypeUrl()}, nil
}
