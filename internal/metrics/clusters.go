package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshpilot/meshpilot/internal/multicluster/clusterstate"
)

// WatchRemoteClusters adds the gauge
//
//	remote_cluster_state{cluster,state}    per remote cluster, 1 for the state it is in
//	                                       and 0 for each other clusterstate.State
//
// read from current (multicluster.Controller.Clusters) at each scrape, so
// that an alert on "unreachable" or "timeout" sees the cluster come back,
// and a cluster removed goes. Call it once.
func (m *Metrics) WatchRemoteClusters(current func() []clusterstate.Cluster) {
	m.registry.MustRegister(&remoteClusters{
		desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "remote_cluster", "state"),
			"Remote clusters (from remote Secrets) by state: 1 for the state each is in, 0 for the others. syncing: its registry has not synced yet; synced: synced and its API server answers; timeout: not synced within --remote-sync-timeout (served as it fills); unreachable: synced once, its API server does not answer now (its last endpoints stay served).",
			[]string{"cluster", "state"}, nil),
		current: current,
	})
}

type remoteClusters struct {
	desc    *prometheus.Desc
	current func() []clusterstate.Cluster
}

func (r *remoteClusters) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

func (r *remoteClusters) Collect(ch chan<- prometheus.Metric) {
	for _, c := range r.current() {
		for _, s := range clusterstate.All {
			v := 0.0
			if s == c.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(r.desc, prometheus.GaugeValue, v, c.ID, string(s))
		}
	}
}
