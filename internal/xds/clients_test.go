package xds

import (
	"slices"
	"sync"
	"testing"
	"time"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// recordingObserver counts what the server reports.
type recordingObserver struct {
	mu                sync.Mutex
	sent, acks, nacks map[string]int
	sentConv, ackConv map[string][]time.Duration
}

func newRecordingObserver() *recordingObserver {
	return &recordingObserver{sent: map[string]int{}, acks: map[string]int{}, nacks: map[string]int{},
		sentConv: map[string][]time.Duration{}, ackConv: map[string][]time.Duration{}}
}

func (o *recordingObserver) ResponseSent(typ string, _ bool, since time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent[typ]++
	if since > 0 {
		o.sentConv[typ] = append(o.sentConv[typ], since)
	}
}

func (o *recordingObserver) ACKed(typ string, _ bool, since time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.acks[typ]++
	if since > 0 {
		o.ackConv[typ] = append(o.ackConv[typ], since)
	}
}

func (o *recordingObserver) NACKed(typ string, _ bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.nacks[typ]++
}

func (o *recordingObserver) snapshot() (sent, acks, nacks map[string]int, sentConv, ackConv map[string][]time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return clone(o.sent), clone(o.acks), clone(o.nacks), cloneD(o.sentConv), cloneD(o.ackConv)
}

func clone(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func cloneD(m map[string][]time.Duration) map[string][]time.Duration {
	out := map[string][]time.Duration{}
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}

// awaitClient waits until the only client's state satisfies ok.
func awaitClient(t *testing.T, s *Server, what string, ok func(ClientInfo) bool) ClientInfo {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		cs := s.Clients()
		if len(cs) == 1 && ok(cs[0]) {
			return cs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened; clients %+v", what, cs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSyncState follows one stream's per-type state through a response,
// its ACK, a pushed change, its NACK and the next change, and checks what
// the observer and the config dump report.
func TestSyncState(t *testing.T) {
	obs := newRecordingObserver()
	ts := startServer(t, baseStore(), func(o *Options) { o.Observer = obs })
	a := openADS(t, dial(t, ts.addr), grpcNode("watcher", "default"))

	a.Subscribe(resource.EndpointType, reviews)
	r1 := a.Next()
	ci := awaitClient(t, ts.Server, "first response recorded", func(c ClientInfo) bool { return c.Types["EDS"] != nil && c.Types["EDS"].LastSent != nil })
	eds := ci.Types["EDS"]
	if eds.Status != Stale || eds.LastSent.Version != r1.Version || eds.LastSent.Nonce != r1.Nonce ||
		!slices.Equal(eds.Subscribed, []string{reviews}) || eds.Wildcard {
		t.Fatalf("before the ACK: %+v", eds)
	}
	if ci.NodeID != "watcher" || ci.Namespace != "default" || !ci.GRPC || ci.Kind() != "grpc" {
		t.Fatalf("client %+v", ci)
	}
	if dump := ts.ConfigDump("watcher"); len(dump) != 1 || len(dump[0].Resources["EDS"]) != 0 {
		t.Fatalf("nothing is held before the ACK; dump %+v", dump)
	}

	a.ACK(r1)
	ci = awaitClient(t, ts.Server, "ACK recorded", func(c ClientInfo) bool { return c.Types["EDS"].Status == Synced })
	if eds := ci.Types["EDS"]; eds.LastACK.Version != r1.Version || eds.LastACK.Nonce != r1.Nonce {
		t.Fatalf("after the ACK: %+v", eds)
	}
	dump := ts.ConfigDump("watcher")
	if len(dump) != 1 || len(dump[0].Resources["EDS"]) != 1 {
		t.Fatalf("dump after the ACK: %+v", dump)
	}
	var cla endpoint.ClusterLoadAssignment
	if err := dump[0].Resources["EDS"][0].UnmarshalTo(&cla); err != nil || cla.GetClusterName() != reviews {
		t.Fatalf("dumped %v (%v)", cla.GetClusterName(), err)
	}
	if len(ts.ConfigDump("nobody")) != 0 {
		t.Fatal("a dump for a node that is not connected")
	}

	// A pushed change: sent and NACKed.
	ts.store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.7"))
	r2 := a.Next()
	// The NACK repeats r1's version, the last ACKed.
	a.NACK(r2, "no thanks")
	ci = awaitClient(t, ts.Server, "NACK recorded", func(c ClientInfo) bool { return c.Types["EDS"].Status == NACKed })
	eds = ci.Types["EDS"]
	if eds.LastNACK.Version != r2.Version || eds.LastNACK.Nonce != r2.Nonce || eds.LastNACK.Error != "no thanks" ||
		eds.LastACK.Version != r1.Version || ci.NACKs != 1 {
		t.Fatalf("after the NACK: %+v", eds)
	}
	// What the client holds is still the first version.
	if dump := ts.ConfigDump("watcher"); len(dump[0].Resources["EDS"]) != 1 {
		t.Fatalf("dump after the NACK: %+v", dump)
	}

	// The next change is sent and ACKed: synced again.
	ts.store.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.8"))
	r3 := a.Next()
	a.ACK(r3)
	awaitClient(t, ts.Server, "synced again", func(c ClientInfo) bool {
		return c.Types["EDS"].Status == Synced && c.Types["EDS"].LastACK.Version == r3.Version
	})

	sent, acks, nacks, sentConv, ackConv := obs.snapshot()
	if sent["EDS"] != 3 || acks["EDS"] != 2 || nacks["EDS"] != 1 {
		t.Fatalf("observer: sent %v acks %v nacks %v", sent, acks, nacks)
	}
	// The first response answered a subscription, not a change: only the
	// two pushed responses and the one ACKed push carry a convergence time.
	if len(sentConv["EDS"]) != 2 || len(ackConv["EDS"]) != 1 {
		t.Fatalf("convergence observations: sent %v acked %v", sentConv, ackConv)
	}
	for _, d := range append(sentConv["EDS"], ackConv["EDS"]...) {
		if d <= 0 || d > wait {
			t.Fatalf("implausible convergence %v", d)
		}
	}
	if g, e := ts.ClientCounts(); g != 1 || e != 0 {
		t.Fatalf("ClientCounts = %d, %d", g, e)
	}
}

// TestDeltaSyncState: a delta stream's subscriptions follow subscribe and
// unsubscribe, and its ACKs and held resources are recorded.
func TestDeltaSyncState(t *testing.T) {
	ts := startServer(t, baseStore())
	d := openDelta(t, dial(t, ts.addr), envoyNode("delta-envoy"))
	d.Subscribe(resource.ClusterType, reviews, ratings)
	r := d.Next()
	// An ACK that unsubscribes too, in one request.
	d.SendDelta(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesUnsubscribe: []string{ratings}, ResponseNonce: r.Nonce})
	ci := awaitClient(t, ts.Server, "delta ACK", func(c ClientInfo) bool { return c.Types["CDS"] != nil && c.Types["CDS"].Status == Synced })
	cds := ci.Types["CDS"]
	if !ci.Delta || ci.GRPC || ci.Kind() != "envoy" || !slices.Equal(cds.Subscribed, []string{reviews}) ||
		cds.LastACK.Version != r.Version || cds.LastACK.Nonce != r.Nonce {
		t.Fatalf("delta client %+v, CDS %+v", ci, cds)
	}
	// The unsubscribed cluster is no longer held: the dump shows the
	// other alone.
	if dump := ts.ConfigDump("delta-envoy"); len(dump) != 1 ||
		!slices.Equal(resourceNames(t, &discovery.DiscoveryResponse{Resources: dump[0].Resources["CDS"]}), []string{reviews}) {
		t.Fatalf("dump %+v", dump)
	}
}

// TestClientInfoCluster: a stream's ClientInfo names the cluster its node
// metadata CLUSTER_ID gives, and none when the node names none (the
// local cluster), as /debug/syncz shows them.
func TestClientInfoCluster(t *testing.T) {
	for _, tc := range []struct {
		desc, clusterID string
	}{
		{"CLUSTER_ID given", "cluster-b"},
		{"no CLUSTER_ID: the local cluster", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ts := startServer(t, baseStore())
			o := xdstest.NodeOptions{ID: "c", Namespace: "default"}
			if tc.clusterID != "" {
				o.Metadata = map[string]string{"CLUSTER_ID": tc.clusterID}
			}
			a := openADS(t, dial(t, ts.addr), xdstest.GRPCNode(o))
			a.Subscribe(resource.EndpointType, reviews)
			a.Next()
			ci := awaitClient(t, ts.Server, "the node recorded", func(c ClientInfo) bool { return c.NodeID == "c" })
			if ci.Cluster != tc.clusterID {
				t.Fatalf("Cluster %q, want %q", ci.Cluster, tc.clusterID)
			}
		})
	}
}
