package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshpilot/meshpilot/internal/configstatus"
)

// WatchConfigObjects adds the gauge config_objects{kind,state}: the Istio
// objects of status by kind and state, recounted on each change of
// status. Once a kind has been seen, each of its states has a series (0
// when none), so that an alert on refused objects sees them go. Call it
// once.
func (m *Metrics) WatchConfigObjects(status *configstatus.Reporter) {
	c := &configObjects{
		status: status,
		kinds:  map[string]bool{},
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "config", Name: "objects",
			Help: "Istio and Gateway API objects read, by kind and state: applied; partial (applied, some fields not sent to a kind of client); refused (not applied: its last good version stays in force).",
		}, []string{"kind", "state"}),
	}
	m.registry.MustRegister(c.gauge)
	status.OnChange(c.recount)
	// Objects recorded before the gauge existed.
	c.recount()
}

type configObjects struct {
	status *configstatus.Reporter
	gauge  *prometheus.GaugeVec
	// mu guards kinds and makes recounts one at a time: Reporter calls
	// OnChange functions from several goroutines, and the last recount
	// to take mu reads the status after every change before it.
	mu    sync.Mutex
	kinds map[string]bool
}

func (c *configObjects) recount() {
	c.mu.Lock()
	defer c.mu.Unlock()
	type kindState struct{ kind, state string }
	counts := map[kindState]int{}
	for _, e := range c.status.List() {
		c.kinds[e.Kind] = true
		counts[kindState{e.Kind, e.State()}]++
	}
	for kind := range c.kinds {
		for _, state := range configstatus.States {
			c.gauge.WithLabelValues(kind, state).Set(float64(counts[kindState{kind, state}]))
		}
	}
}
