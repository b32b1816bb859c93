package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// workqueueMetrics is a client-go work queue metrics provider whose
// metrics carry the queue's name as label "name", under the names
// controller-runtime uses, prefixed meshpilot_.
type workqueueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
}

var _ workqueue.MetricsProvider = (*workqueueMetrics)(nil)

func newWorkqueueMetrics() *workqueueMetrics {
	const sub = "workqueue"
	name := []string{"name"}
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

func (w *workqueueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return w.depth.WithLabelValues(name)
}

func (w *workqueueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return w.adds.WithLabelValues(name)
}

func (w *workqueueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return w.latency.WithLabelValues(name)
}

func (w *workqueueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return w.workDuration.WithLabelValues(name)
}

func (w *workqueueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return w.unfinished.WithLabelValues(name)
}

func (w *workqueueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return w.longest.WithLabelValues(name)
}

func (w *workqueueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return w.retries.WithLabelValues(name)
}
