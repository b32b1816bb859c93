package testenv

import (
	"sync/atomic"

	"k8s.io/client-go/util/workqueue"
)

// QueueProbe is a work queue's metrics provider for tests that wait for
// the queue to be idle rather than for a fixed time: it counts the keys
// queued and not yet done. The queue counts an add when the key is not
// already waiting (an add while a worker holds the key included, since
// the key is then worked again), and a done for each key a worker got.
type QueueProbe struct{ pending atomic.Int64 }

// Pending is the number of keys queued or in work.
func (p *QueueProbe) Pending() int64 { return p.pending.Load() }

func (p *QueueProbe) NewDepthMetric(string) workqueue.GaugeMetric { return noMetric{} }
func (p *QueueProbe) NewAddsMetric(string) workqueue.CounterMetric {
	return countMetric{func() { p.pending.Add(1) }}
}
func (p *QueueProbe) NewLatencyMetric(string) workqueue.HistogramMetric { return noMetric{} }
func (p *QueueProbe) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return countMetric{func() { p.pending.Add(-1) }}
}
func (p *QueueProbe) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}
func (p *QueueProbe) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}
func (p *QueueProbe) NewRetriesMetric(string) workqueue.CounterMetric { return noMetric{} }

var _ workqueue.MetricsProvider = (*QueueProbe)(nil)

type noMetric struct{}

func (noMetric) Inc()            {}
func (noMetric) Dec()            {}
func (noMetric) Set(float64)     {}
func (noMetric) Observe(float64) {}

// countMetric calls f on Inc or Observe.
type countMetric struct{ f func() }

func (m countMetric) Inc()            { m.f() }
func (m countMetric) Observe(float64) { m.f() }
