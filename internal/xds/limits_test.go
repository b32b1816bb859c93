package xds

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// names makes n distinct short resource names.
func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "n" + itoa(i)
	}
	return out
}

// bigNode is a node whose metadata holds size bytes.
func bigNode(id string, size int) *core.Node {
	return xdstest.EnvoyNode(xdstest.NodeOptions{ID: id, Metadata: map[string]string{"BLOB": strings.Repeat("x", size)}})
}

func TestRequestLimitsCheck(t *testing.T) {
	l := requestLimits{names: 3, nodeBytes: 100}
	small := &core.Node{Id: "a"}
	for _, tc := range []struct {
		name         string
		sub, unsub   []string
		node         *core.Node
		wantRefusal  string // a part of the error; empty: accepted
		wantInReason string
	}{
		{name: "nothing", wantRefusal: ""},
		{name: "at the name limit", sub: names(3), node: small},
		{name: "one name beyond", sub: names(4), wantRefusal: "4 resource names, more than the limit of 3 (--max-request-names)"},
		{name: "subscribe and unsubscribe count together", sub: names(2), unsub: names(2), wantRefusal: "4 resource names"},
		{name: "unsubscribe alone counts", unsub: names(4), wantRefusal: "4 resource names"},
		{name: "no node: nothing to measure", sub: names(1)},
		{name: "node at the limit", node: &core.Node{Id: strings.Repeat("i", 98)}},
		{name: "node beyond", node: &core.Node{Id: strings.Repeat("i", 99)}, wantRefusal: "101 bytes of node, more than the limit of 100"},
		{name: "metadata counts", node: bigNode("a", 200), wantRefusal: "bytes of node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := l.check(tc.sub, tc.unsub, tc.node)
			if tc.wantRefusal == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want %q", tc.wantRefusal)
			}
			if !strings.Contains(err.Error(), tc.wantRefusal) {
				t.Fatalf("error %q, want %q in it", err, tc.wantRefusal)
			}
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("code %v, want InvalidArgument", status.Code(err))
			}
		})
	}
	if err := l.checkSubscribed(3); err != nil {
		t.Fatalf("a subscription at the limit: %v", err)
	}
	if err := l.checkSubscribed(4); err == nil || !strings.Contains(err.Error(), "4 resource names subscribed on the stream") {
		t.Fatalf("a subscription beyond the limit: %v", err)
	}
	if d := (requestLimits{}).withDefaults(); d.names != DefaultMaxRequestNames || d.nodeBytes != DefaultMaxNodeBytes {
		t.Fatalf("defaults %+v", d)
	}
}

func TestClientLog(t *testing.T) {
	start := time.Unix(1000, 0)
	type ev struct {
		id           string
		after        time.Duration // since start
		wantLog      bool
		wantUnlogged int
	}
	for _, tc := range []struct {
		name string
		max  int
		evs  []ev
	}{
		{name: "once per client and interval", max: 10, evs: []ev{
			{"a", 0, true, 0}, {"a", time.Second, false, 0}, {"b", time.Second, true, 0},
			{"a", 59 * time.Second, false, 0}, {"a", time.Minute, true, 2}, {"a", time.Minute + time.Second, false, 0},
		}},
		{name: "beyond max, new clients share one line", max: 2, evs: []ev{
			{"a", 0, true, 0}, {"b", 0, true, 0}, {"c", 0, true, 0}, {"d", time.Second, false, 0},
			{"a", time.Second, false, 0},
			// a and b are forgotten once their interval is over, which
			// makes room for e; f is in the shared line again, whose
			// interval is over too (d went unlogged), g is not.
			{"e", time.Minute, true, 0}, {"f", time.Minute, true, 1}, {"g", time.Minute, false, 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newClientLog(time.Minute, tc.max)
			for i, e := range tc.evs {
				ok, unlogged := l.event(e.id, start.Add(e.after))
				if ok != e.wantLog || unlogged != e.wantUnlogged {
					t.Fatalf("event %d (%s at %v): log %v with %d unlogged, want %v with %d", i, e.id, e.after, ok, unlogged, e.wantLog, e.wantUnlogged)
				}
			}
			if len(l.last) > tc.max+1 {
				t.Fatalf("remembers %d clients, max %d and the shared line", len(l.last), tc.max)
			}
		})
	}
	if got := logID(strings.Repeat("x", 1000)); len(got) > logIDMax+32 || !strings.HasSuffix(got, "(1000 bytes)") {
		t.Fatalf("logID of a long id: %q", got)
	}
}

// TestRequestLimits: over a real gRPC server, a request with 100 000
// resource names, a delta request whose lists together go beyond the
// limit or whose subscriptions add up beyond it, and a node of 1 MiB of
// metadata each end their stream, state of the world and delta, with
// InvalidArgument naming the limit (a request beyond MaxRequestBytes,
// with ResourceExhausted); a client that repeats the refused
// request on new streams is logged once; a request within the limits on
// the same server is served.
func TestRequestLimits(t *testing.T) {
	ts := startServer(t, baseStore())
	cc := dial(t, ts.addr)

	expectRefused := func(c *xdstest.TestClient, want string) {
		t.Helper()
		err := c.ExpectEnd(wait)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), want) {
			t.Fatalf("stream ended with %v, want InvalidArgument with %q", err, want)
		}
	}
	many := names(100_000)
	for range 3 { // the same client, reconnecting
		c := openADS(t, cc, envoyNode("hostile-names"))
		// The request may find the stream already ended.
		_ = c.Client.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: many})
		expectRefused(c, "100000 resource names, more than the limit of 10000 (--max-request-names)")
	}
	d := openDelta(t, cc, envoyNode("hostile-delta-lists"))
	_ = d.Client.SendDelta(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType,
		ResourceNamesSubscribe: many[:6000], ResourceNamesUnsubscribe: many[6000:12000]})
	expectRefused(d, "12000 resource names")

	d = openDelta(t, cc, envoyNode("hostile-delta-adds-up"))
	d.SendDelta(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: many[:6000]})
	// None of them exists, which the server says (removed_resources).
	if r := d.Next(); len(r.Removed) != 6000 {
		t.Fatalf("the first 6000 names: %d reported removed, want all", len(r.Removed))
	}
	_ = d.Client.SendDelta(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: many[6000:12000]})
	expectRefused(d, "12000 resource names subscribed on the stream")

	for _, delta := range []bool{false, true} {
		c := xdstest.Connect(t, cc, xdstest.Options{Node: bigNode(fmt.Sprint("hostile-node-", delta), 1<<20), Delta: delta, Wait: wait})
		_ = c.Client.Subscribe(resource.ClusterType, reviews)
		expectRefused(c, "bytes of node, more than the limit of 65536")
	}

	// A request longer than MaxRequestBytes (100 000 names as long as
	// real ones) is refused by gRPC before it is parsed.
	long := make([]string, 100_000)
	for i := range long {
		long[i] = fmt.Sprintf("outbound|9080||service-%d.namespace-%d.svc.cluster.local", i, i%100)
	}
	c := openADS(t, cc, envoyNode("hostile-bytes"))
	_ = c.Client.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: long})
	if err := c.ExpectEnd(wait); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), fmt.Sprint(MaxRequestBytes)) {
		t.Fatalf("a request of more than %d bytes: %v, want ResourceExhausted naming the limit", MaxRequestBytes, err)
	}

	// Well-behaved clients are served: at the limit, and beside the
	// refused ones.
	ok := openADS(t, cc, envoyNode("fine"))
	ok.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: append(many[:DefaultMaxRequestNames-1:DefaultMaxRequestNames-1], reviews)})
	if got := ok.Next().Names(); !slices.Equal(got, []string{reviews}) {
		t.Fatalf("a request at the limit got %v", got)
	}

	logs := ts.logs.String()
	for client, n := range map[string]int{"hostile-names": 1, "hostile-delta-lists": 1, "hostile-delta-adds-up": 1, "hostile-node-false": 1, "hostile-node-true": 1, "fine": 0} {
		if got := strings.Count(logs, `refusing a request beyond the limits" client=`+client+" "); got != n {
			t.Errorf("%s: %d refusal lines, want %d:\n%s", client, got, n, logs)
		}
	}
	if got := ts.RefusedRequests(); got != 7 {
		t.Errorf("%d requests refused, want 7", got)
	}
}

// TestRESTRequestLimits: over REST the same limits answer 400.
func TestRESTRequestLimits(t *testing.T) {
	ts := startServer(t, baseStore())
	hs := httptest.NewServer(ts.RESTHandler())
	defer hs.Close()
	post := func(req *discovery.DiscoveryRequest) (int, string) {
		t.Helper()
		b, err := protojson.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(hs.URL+"/v3/discovery:clusters", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, tc := range []struct {
		name     string
		req      *discovery.DiscoveryRequest
		wantCode int
		want     string
	}{
		{"100 000 names", &discovery.DiscoveryRequest{Node: envoyNode("rest-names"), ResourceNames: names(100_000)},
			http.StatusBadRequest, "100000 resource names, more than the limit of 10000 (--max-request-names)"},
		{"1 MiB of node metadata", &discovery.DiscoveryRequest{Node: bigNode("rest-node", 1<<20)},
			http.StatusBadRequest, "bytes of node, more than the limit of 65536"},
		{"a body beyond MaxRequestBytes", &discovery.DiscoveryRequest{Node: bigNode("rest-huge", MaxRequestBytes)},
			http.StatusBadRequest, "cannot read body"},
		{"within the limits", &discovery.DiscoveryRequest{Node: envoyNode("rest-fine"), ResourceNames: []string{reviews}},
			http.StatusOK, reviews},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(tc.req)
			if code != tc.wantCode || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %.300s, want %d with %q", code, body, tc.wantCode, tc.want)
			}
		})
	}
	logs := ts.logs.String()
	for _, client := range []string{"rest-names", "rest-node"} {
		if got := strings.Count(logs, `refusing a request beyond the limits" client=`+client+" "); got != 1 {
			t.Errorf("%s: %d refusal lines, want 1", client, got)
		}
	}
}
