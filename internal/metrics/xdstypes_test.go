package metrics

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMadeUpTypesShareOneLabel: a client that sends a thousand long
// made-up type URLs makes one series per metric, "other", not a thousand;
// the served types and Envoy's well-known ones keep their own.
func TestMadeUpTypesShareOneLabel(t *testing.T) {
	m := New()
	long := strings.Repeat("x", 200)
	for i := range 1000 {
		typ := "type.googleapis.com/made.up." + long + "." + strconv.Itoa(i)
		m.ResponseSent(typ, false, time.Millisecond)
		m.ACKed(typ, false, time.Millisecond)
		m.NACKed(typ, false)
	}
	for _, name := range []string{"meshpilot_xds_pushes_total", "meshpilot_xds_nacks_total",
		"meshpilot_xds_convergence_sent_seconds", "meshpilot_xds_convergence_acked_seconds"} {
		if n := testutil.CollectAndCount(m.Registry(), name); n != 1 {
			t.Errorf("%s: %d series for 1000 made-up types, want 1", name, n)
		}
	}
	if got := testutil.ToFloat64(m.pushes.WithLabelValues(OtherType)); got != 1000 {
		t.Errorf("pushes of other types: %v, want 1000", got)
	}

	m.ResponseSent("EDS", true, 0)
	m.ResponseSent("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", false, 0)
	m.ResponseSent("type.googleapis.com/envoy.config.cluster.v3.Cluster", false, 0)
	m.ResponseSent("", false, 0)
	for label, want := range map[string]float64{"EDS": 1, "SDS": 1, "CDS": 1, OtherType: 1001} {
		if got := testutil.ToFloat64(m.pushes.WithLabelValues(label)); got != want {
			t.Errorf("pushes labelled %s: %v, want %v", label, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.Registry(), "meshpilot_xds_pushes_total"); n != 4 {
		t.Errorf("%d push series, want 4 (EDS, SDS, CDS, other)", n)
	}
}
