package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestSyncStates: the gauges read the counts at each scrape with the
// stale threshold, keep a series at 0 for each served type, and name any
// other type only through the bounded type labels.
func TestSyncStates(t *testing.T) {
	m := New()
	var gotAfter time.Duration
	stale := map[string]int{"EDS": 2, "type.googleapis.com/made.up.Type": 5}
	nacked := map[string]int{"CDS": 1, "other": 1, "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret": 3}
	m.WatchSyncStates(func(_ time.Time, after time.Duration) (map[string]int, map[string]int) {
		gotAfter = after
		return stale, nacked
	})
	want := `
# HELP meshpilot_xds_nacked_streams xDS streams whose latest response of the type the client rejected (NACKED on /debug/syncz): the client keeps its previous configuration of the type until a change is accepted.
# TYPE meshpilot_xds_nacked_streams gauge
meshpilot_xds_nacked_streams{type="CDS"} 1
meshpilot_xds_nacked_streams{type="EDS"} 0
meshpilot_xds_nacked_streams{type="LDS"} 0
meshpilot_xds_nacked_streams{type="RDS"} 0
meshpilot_xds_nacked_streams{type="SDS"} 3
meshpilot_xds_nacked_streams{type="other"} 1
# HELP meshpilot_xds_stale_streams xDS streams whose latest response of the type has gone unanswered (neither ACK nor NACK) for more than 10 s: STALE on /debug/syncz, and too old to be on its way.
# TYPE meshpilot_xds_stale_streams gauge
meshpilot_xds_stale_streams{type="CDS"} 0
meshpilot_xds_stale_streams{type="EDS"} 2
meshpilot_xds_stale_streams{type="LDS"} 0
meshpilot_xds_stale_streams{type="RDS"} 0
meshpilot_xds_stale_streams{type="other"} 5
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "meshpilot_xds_stale_streams", "meshpilot_xds_nacked_streams"); err != nil {
		t.Fatal(err)
	}
	if gotAfter != StaleAfter {
		t.Fatalf("read with threshold %v, want %v", gotAfter, StaleAfter)
	}
	// The next scrape reads afresh: a stream that answered leaves.
	stale, nacked = map[string]int{}, map[string]int{}
	if n := testutil.CollectAndCount(m.Registry(), "meshpilot_xds_stale_streams"); n != 4 {
		t.Fatalf("%d stale series with no stale stream, want the 4 served types at 0", n)
	}
}

// TestPushTriggers: every kind a push can carry has a series from the
// start, and a push counts once under each kind it carried.
func TestPushTriggers(t *testing.T) {
	m := New()
	m.Triggered([]model.KeyKind{model.KindService, model.KindVirtualService})
	m.Triggered([]model.KeyKind{model.KindEndpoints})
	m.Triggered([]model.KeyKind{model.KindEndpoints})
	want := `
# HELP meshpilot_push_triggers_total Debounced pushes by the kind of model change they carried: Service (a service's definition, existence or ports), Endpoints (endpoints alone), MeshConfig, DestinationRule, VirtualService (Gateway API routes included), Security (PeerAuthentications, AuthorizationPolicies); a push carrying several kinds counts once for each.
# TYPE meshpilot_push_triggers_total counter
meshpilot_push_triggers_total{kind="DestinationRule"} 0
meshpilot_push_triggers_total{kind="Endpoints"} 2
meshpilot_push_triggers_total{kind="MeshConfig"} 0
meshpilot_push_triggers_total{kind="Security"} 0
meshpilot_push_triggers_total{kind="Service"} 1
meshpilot_push_triggers_total{kind="VirtualService"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "meshpilot_push_triggers_total"); err != nil {
		t.Fatal(err)
	}
}
