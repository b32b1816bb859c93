package metrics

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshpilot/meshpilot/internal/model"
)

// StaleAfter is how long a response may go unanswered before its stream
// counts as stale: clients ACK within milliseconds, so a response older
// than this is not on its way but stuck (a client that stopped reading or
// processing), and a scrape during a push never counts the streams that
// are about to ACK.
const StaleAfter = 10 * time.Second

// SyncCounts is what the stream state gauges read: by xDS type, the
// streams whose latest response is unanswered for longer than
// staleAfter at now, and those whose latest response was rejected.
type SyncCounts func(now time.Time, staleAfter time.Duration) (stale, nacked map[string]int)

// servedTypes always have a series in the stream state gauges, 0 when no
// stream is in that state, so that an alert sees the count go back to 0.
var servedTypes = []string{"LDS", "RDS", "CDS", "EDS"}

// WatchSyncStates adds the gauges
//
//	xds_stale_streams{type}    streams whose latest response of the type has gone
//	                           unanswered for more than StaleAfter
//	xds_nacked_streams{type}   streams whose latest response of the type the client
//	                           rejected (it holds an older version until the next change)
//
// read from counts at each scrape. Call it once.
func (m *Metrics) WatchSyncStates(counts SyncCounts) {
	m.registry.MustRegister(&syncStates{
		stale: prometheus.NewDesc(prometheus.BuildFQName(namespace, "xds", "stale_streams"),
			"xDS streams whose latest response of the type has gone unanswered (neither ACK nor NACK) for more than 10 s: STALE on /debug/syncz, and too old to be on its way.",
			[]string{"type"}, nil),
		nacked: prometheus.NewDesc(prometheus.BuildFQName(namespace, "xds", "nacked_streams"),
			"xDS streams whose latest response of the type the client rejected (NACKED on /debug/syncz): the client keeps its previous configuration of the type until a change is accepted.",
			[]string{"type"}, nil),
		counts: counts,
	})
}

type syncStates struct {
	stale, nacked *prometheus.Desc
	counts        SyncCounts
}

func (c *syncStates) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.stale
	ch <- c.nacked
}

func (c *syncStates) Collect(ch chan<- prometheus.Metric) {
	stale, nacked := c.counts(time.Now(), StaleAfter)
	for desc, byType := range map[*prometheus.Desc]map[string]int{c.stale: stale, c.nacked: nacked} {
		// Labels go through typeLabel like the other xDS metrics', so
		// that no client's text becomes a series.
		labelled := map[string]int{}
		for _, typ := range servedTypes {
			labelled[typ] = 0
		}
		for typ, n := range byType {
			labelled[typeLabel(typ)] += n
		}
		types := make([]string, 0, len(labelled))
		for typ := range labelled {
			types = append(types, typ)
		}
		sort.Strings(types)
		for _, typ := range types {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(labelled[typ]), typ)
		}
	}
}

// triggerKinds are the kinds of model change a push can carry
// (push.Request.Kinds); each has a series from the start.
var triggerKinds = []model.KeyKind{model.KindService, model.KindEndpoints, model.KindMeshConfig,
	model.KindDestinationRule, model.KindVirtualService, model.KindSecurity}

func newTriggers() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "push", Name: "triggers_total",
		Help: "Debounced pushes by the kind of model change they carried: Service (a service's definition, existence or ports), Endpoints (endpoints alone), MeshConfig, DestinationRule, VirtualService (Gateway API routes included), Security (PeerAuthentications, AuthorizationPolicies); a push carrying several kinds counts once for each.",
	}, []string{"kind"})
	for _, k := range triggerKinds {
		c.WithLabelValues(k.String())
	}
	return c
}

// Triggered counts one push under each kind of change it carried. The
// label is the kind's name, a closed set (model.KeyKind.String), never a
// name from the model.
func (m *Metrics) Triggered(kinds []model.KeyKind) {
	for _, k := range kinds {
		m.triggers.WithLabelValues(k.String()).Inc()
	}
}
