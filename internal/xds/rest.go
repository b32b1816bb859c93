package xds

import (
	"context"
	"fmt"
	"net/http"
	"path"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

// RESTHandler serves REST-JSON discovery as Envoy's REST API type expects:
// POST /v3/discovery:clusters, :endpoints, :listeners, :routes with a JSON
// DiscoveryRequest. It answers 304 when the request's version_info is
// current, 503 until the model is ready, 400 for a request beyond
// the limits (limits.go) or a body over MaxRequestBytes, and 403 under
// Options.RequireIdentity for a client whose certificate does not
// entitle it to its node, or that presents none.
func (s *Server) RESTHandler() http.Handler {
	gw := &serverv3.HTTPGateway{Server: s.xds}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST a DiscoveryRequest", http.StatusMethodNotAllowed)
			return
		}
		switch path.Clean(r.URL.Path) {
		case resource.FetchClusters, resource.FetchEndpoints, resource.FetchListeners, resource.FetchRoutes:
		default:
			http.NotFound(w, r)
			return
		}
		if !s.ready() {
			http.Error(w, "the service model is not synced yet", http.StatusServiceUnavailable)
			return
		}
		// The gateway reads the whole body: bound it as gRPC bounds a
		// request (a longer body fails as unreadable, 400).
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
		// The fetch callback reads the client's certificate from here
		// (identity.go).
		r = r.WithContext(withTLSState(r.Context(), r.TLS))
		body, code, err := gw.ServeHTTP(r)
		if err != nil {
			switch status.Code(err) {
			case codes.InvalidArgument:
				code = http.StatusBadRequest // a request beyond the limits
			case codes.PermissionDenied:
				code = http.StatusForbidden // a node its certificate does not allow
			}
			http.Error(w, err.Error(), code)
			return
		}
		if code != http.StatusOK {
			w.WriteHeader(code)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
}

// Fetch implements go-control-plane's cache.ConfigFetcher for REST: the
// named resources (everything, for a non-gRPC client naming none of a
// type that has a wildcard), with a version derived from their content.
func (s *Server) Fetch(_ context.Context, req *cache.Request) (cache.Response, error) {
	t, ok := s.typeOf(req.GetTypeUrl())
	if !ok {
		return nil, fmt.Errorf("meshpilot does not serve %q", req.GetTypeUrl())
	}
	c := s.client(req.GetNode())
	s.mu.Lock()
	defer s.mu.Unlock()
	names := req.GetResourceNames()
	if len(names) == 0 && isWildcard(s.types[t], &c, true) {
		names = s.cache.gens[t].AllNames()
	}
	var res []*anypb.Any
	returned := map[string]string{}
	sum := newVersionHash()
	for _, n := range names {
		e := s.resource(t, &c, n, nil)
		if e.exists() {
			res = append(res, e.any)
			returned[n] = e.version
			sum.add(n, e.version)
		}
	}
	version := s.prefix + "-" + sum.String()
	if req.GetVersionInfo() == version {
		return nil, &types.SkipFetchError{}
	}
	return &sotwResponse{
		req:      req,
		out:      &discovery.DiscoveryResponse{VersionInfo: version, Resources: res, TypeUrl: req.GetTypeUrl()},
		returned: returned,
	}, nil
}
