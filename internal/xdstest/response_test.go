package xdstest

import (
	"strings"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestDecodeSotW: resources are named as their type names them, wrapped
// or not; what a client would reject is an error, a type this process
// does not know is not.
func TestDecodeSotW(t *testing.T) {
	c := mustAny(t, &cluster.Cluster{Name: "c"})
	for _, tc := range []struct {
		name    string
		typeURL string
		res     *anypb.Any
		want    string // the resource's name
		decoded bool
		err     string // in Response.Err; none when empty
	}{
		{"cluster", resourcev3.ClusterType, c, "c", true, ""},
		{"load assignment by cluster name", resourcev3.EndpointType, mustAny(t, &endpoint.ClusterLoadAssignment{ClusterName: "e"}), "e", true, ""},
		{"wrapped", resourcev3.ClusterType, mustAny(t, &discovery.Resource{Name: "w", Version: "1", Resource: c}), "w", true, ""},
		{"another type", resourcev3.EndpointType, c, "", false, "a " + resourcev3.EndpointType + " response holds a " + resourcev3.ClusterType},
		{"bad bytes", resourcev3.ClusterType, &anypb.Any{TypeUrl: resourcev3.ClusterType, Value: []byte{0xff}}, "", false, "CDS: decoding a resource"},
		{"unknown type", "type.googleapis.com/no.such.Type", &anypb.Any{TypeUrl: "type.googleapis.com/no.such.Type"}, "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Response{}
			m := &discovery.DiscoveryResponse{TypeUrl: tc.typeURL, Resources: []*anypb.Any{tc.res}}
			decodeSotW(r, m, time.Now(), false)
			res := r.Resources[0]
			if res.Name != tc.want || (res.Message != nil) != tc.decoded || res.Raw != tc.res {
				t.Errorf("resource %+v, want name %q, decoded %v", res, tc.want, tc.decoded)
			}
			switch {
			case tc.err == "" && r.Err != nil:
				t.Errorf("error %v", r.Err)
			case tc.err != "" && (r.Err == nil || !strings.Contains(r.Err.Error(), tc.err)):
				t.Errorf("error %v, want one saying %q", r.Err, tc.err)
			}
			// Raw: every resource as it came, nothing decoded, no error.
			decodeSotW(r, m, time.Now(), true)
			if len(r.Resources) != 1 || r.Resources[0] != (Resource{Raw: tc.res}) || r.Err != nil || r.TypeURL != tc.typeURL {
				t.Errorf("raw: %+v, want the resource as it came alone and no error", r)
			}
		})
	}
}
