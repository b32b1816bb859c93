package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// workqueueMetrics are the work queue metrics of every cluster, under
// the names controller-runtime uses, prefixed meshpilot_, labelled with
// the queue's name and its cluster: each cluster's registry has a queue
// of the same name. A provider gives them to the queues of one
// cluster.
type workqueueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
}

func newWorkqueueMetrics() *workqueueMetrics {
	const sub = "workqueue"
	name := []string{"name", "cluster"}
	buckets := prometheus.ExponentialBuckets(1e-6, 10, 10) // 1 µs to 1000 s
	return &workqueueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: sub, Name: "depth",
			Help: "Items waiting in the work queue.",
		}, name),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: sub, Name: "adds_total",
			Help: "Items added to the work queue.",
		}, name),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: sub, Name: "queue_duration_seconds",
			Help: "Time an item waits in the work queue before a worker takes it.", Buckets: buckets,
		}, name),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: sub, Name: "work_duration_seconds",
			Help: "Time a worker takes to process an item.", Buckets: buckets,
		}, name),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: sub, Name: "unfinished_work_seconds",
			Help: "Seconds of work in progress not yet observed by work_duration; large values mean stuck workers.",
		}, name),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: sub, Name: "longest_running_processor_seconds",
			Help: "How long the longest running worker has been processing its item.",
		}, name),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: sub, Name: "retries_total",
			Help: "Items re-queued with rate limiting.",
		}, name),
	}
}

func (w *workqueueMetrics) register(r prometheus.Registerer) {
	r.MustRegister(w.depth, w.adds, w.latency, w.workDuration, w.unfinished, w.longest, w.retries)
}

// provider returns the provider of the queues of one cluster.
func (w *workqueueMetrics) provider(cluster string) workqueue.MetricsProvider {
	return clusterQueues{w, cluster}
}

// clusterQueues is the work queue metrics provider of one cluster's
// queues. While a cluster's registry is replaced, the old and the new
// queue, of one name, count in the same series.
type clusterQueues struct {
	*workqueueMetrics
	cluster string
}

var _ workqueue.MetricsProvider = clusterQueues{}

func (q clusterQueues) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.depth.WithLabelValues(name, q.cluster)
}

func (q clusterQueues) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name, q.cluster)
}

func (q clusterQueues) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name, q.cluster)
}

func (q clusterQueues) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.workDuration.WithLabelValues(name, q.cluster)
}

func (q clusterQueues) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name, q.cluster)
}

func (q clusterQueues) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(name, q.cluster)
}

func (q clusterQueues) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name, q.cluster)
}
