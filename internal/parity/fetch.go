package parity

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/emptypb"

	// The extensions the two servers put in typed configs, so that they
	// print as fields rather than as opaque bytes.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/client_side_weighted_round_robin/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// ask is what a client asks of one type: names, or every resource.
type ask struct {
	typeURL  string
	names    []string
	wildcard bool
}

// fetched is what a server sent a client, as JSON, by type and name.
type fetched map[string]map[string]any

// fetch opens one ADS stream as node, asks for each type in turn and
// waits for its response (ACKing it), as a client that starts does.
func fetch(ctx context.Context, addr string, node *core.Node, asks []ask) (fetched, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := xdstest.Open(ctx, cc, xdstest.Options{Node: node, AutoACK: true})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	out := fetched{}
	for _, a := range asks {
		if len(a.names) == 0 && !a.wildcard {
			continue
		}
		if err := c.Subscribe(a.typeURL, a.names...); err != nil {
			return nil, err
		}
		got, err := await(ctx, c, a)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", typeFile(a.typeURL), err)
		}
		out[a.typeURL] = got
	}
	return out, nil
}

// await reads responses until one of the type arrives. A server that
// holds none of the names may send nothing (istiod does for a name it
// does not know): after a quiet second the answer is empty.
func await(ctx context.Context, c *xdstest.Client, a ask) (map[string]any, error) {
	for {
		wait, cancel := context.WithTimeout(ctx, 2*time.Second)
		r, err := c.Next(wait)
		cancel()
		if err != nil {
			if ctx.Err() == nil && wait.Err() != nil {
				return map[string]any{}, nil
			}
			return nil, err
		}
		if r.TypeURL != a.typeURL {
			continue
		}
		got := map[string]any{}
		for _, res := range r.Resources {
			if res.Message == nil {
				return nil, fmt.Errorf("resource %q: %v", res.Name, r.Err)
			}
			v, err := toJSON(res.Message)
			if err != nil {
				return nil, fmt.Errorf("resource %q: %w", res.Name, err)
			}
			got[res.Name] = v
		}
		return got, nil
	}
}

// typeFile names a type as reports do.
func typeFile(typeURL string) string {
	switch typeURL {
	case resource.ListenerType:
		return "listeners"
	case resource.RouteType:
		return "routes"
	case resource.ClusterType:
		return "clusters"
	case resource.EndpointType:
		return "endpoints"
	}
	return typeURL
}

// toJSON prints a resource with Envoy's field names, typed configs of
// types not linked here as their type URL alone.
func toJSON(m any) (any, error) {
	msg, ok := m.(interface{ ProtoReflect() protoreflect.Message })
	if !ok {
		return nil, fmt.Errorf("not a message: %T", m)
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true, Resolver: lenient{}}.Marshal(msg.ProtoReflect().Interface())
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// lenient resolves the types linked into the program, and any other as
// an empty message, whose fields protojson then leaves out.
type lenient struct{}

func (lenient) FindMessageByName(n protoreflect.FullName) (protoreflect.MessageType, error) {
	return protoregistry.GlobalTypes.FindMessageByName(n)
}

func (lenient) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	if t, err := protoregistry.GlobalTypes.FindMessageByURL(url); err == nil {
		return t, nil
	}
	return (&emptypb.Empty{}).ProtoReflect().Type(), nil
}

func (lenient) FindExtensionByName(n protoreflect.FullName) (protoreflect.ExtensionType, error) {
	return protoregistry.GlobalTypes.FindExtensionByName(n)
}

func (lenient) FindExtensionByNumber(m protoreflect.FullName, n protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	return protoregistry.GlobalTypes.FindExtensionByNumber(m, n)
}
