// Package metrics holds meshpilot's Prometheus metrics. Each Metrics has a
// registry of its own, so several meshpilots in one process (tests) keep
// their figures apart; nothing is registered globally.
//
// The other stages do not import Prometheus: the xDS server reports to an
// Observer (Metrics is one), the Kubernetes registry takes a work queue
// metrics provider and an informer event hook, and the rest is read at
// scrape time through functions (registry sizes, connected clients).
//
// Names, all prefixed meshpilot_:
//
//	xds_clients{type}                      connected xDS streams, type "grpc" or "envoy"
//	xds_refused_streams_total{reason}      new xDS streams refused at once: reason "not_ready"
//	                                       (model not synced yet, or draining), "max_clients"
//	                                       (the replica serves --max-clients streams) or
//	                                       "rate_limited" (no turn within a second under
//	                                       --max-new-streams-per-second)
//	xds_shed_streams_total                 xDS streams ended (Unavailable) by closing their client's
//	                                       connection to balance the replicas (--balance)
//	xds_refused_requests_total             xDS requests beyond the limits (--max-request-names, the
//	                                       node's size), which end their stream (REST: 400)
//	xds_send_timeouts_total                xDS streams ended because a response could not be
//	                                       written within --stream-send-timeout
//	xds_permission_denied_total            xDS streams and REST requests refused because the client
//	                                       certificate's SPIFFE ID does not entitle it to its node
//	xds_certificate_expiry_timestamp_seconds{subject,serial}  when the certificate the xDS
//	                                       port serves new connections expires (--xds-cert)
//	xds_pushes_total{type}                 responses sent, by xDS type (LDS, RDS, CDS, EDS; SDS, RTDS
//	                                       and Envoy's other types by their short name; any other
//	                                       type URL a client sends is "other", see xdstypes.go)
//	xds_nacks_total{type}                  responses rejected by clients
//	xds_stale_streams{type},               streams whose latest response of the type is
//	xds_nacked_streams{type}               unanswered for over 10 s, or rejected (streams.go)
//	xds_convergence_sent_seconds{type}     from the change reaching meshpilot to the response sent
//	xds_convergence_acked_seconds{type}    from the change reaching meshpilot to the client's ACK
//	push_duration_seconds                  applying one debounced push to the xDS server
//	push_triggers_total{kind}              pushes by kind of model change carried (Service,
//	                                       Endpoints, MeshConfig, DestinationRule,
//	                                       VirtualService, Security; streams.go)
//	debounce_events_total                  model events received by the debouncer
//	debounce_pushes_total                  pushes the debouncer made of them
//	debounce_merged_events_total           events merged into a push another event started
//	registry_services{cluster},            what each cluster's registries hold (the local
//	registry_endpoints{cluster}            cluster's: its Kubernetes registry, ServiceEntries, files)
//	informer_events_total{cluster,kind,event}  Kubernetes informer events (add, update, delete)
//	workqueue_*{name,cluster}              client-go's work queue metrics (depth, adds,
//	                                       queue and work duration, retries, ...)
//	config_objects{kind,state}             Istio and Gateway API objects read, by kind and state (applied,
//	                                       partial: some fields not sent to a kind of client,
//	                                       refused: not applied, its last good version in force)
//	audit_differences{kind}                differences the last consistency audit found: a Kubernetes
//	                                       kind's informer cache against a fresh LIST, or the model
//	                                       (model.Service, model.Endpoint) against one rebuilt from it
//	audit_runs_total                       consistency audits run
//	audit_relists_total{kind}              relists of a kind whose difference outlived two audits
//
// plus the Go runtime (go_*) and process (process_*) collectors, the
// runtime's with go_gc_heap_live_bytes (the heap the last collection
// marked live), which tells the live heap from the garbage and headroom
// that go_memstats_heap_inuse_bytes also counts.
//
// cluster is a cluster's ID: --cluster-id for the local cluster, the
// remote Secret's key for a remote one.
package metrics

import (
	"net/http"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/util/workqueue"
)

const namespace = "meshpilot"

// Metrics is one meshpilot's set of metrics. Its methods are safe for
// concurrent use.
type Metrics struct {
	registry *prometheus.Registry

	pushes       *prometheus.CounterVec
	nacks        *prometheus.CounterVec
	convSent     *prometheus.HistogramVec
	convACKed    *prometheus.HistogramVec
	pushDuration prometheus.Histogram
	dbEvents     prometheus.Counter
	dbPushes     prometheus.Counter
	dbMerged     prometheus.Counter
	informer     *prometheus.CounterVec
	triggers     *prometheus.CounterVec
	queue        *workqueueMetrics
}

// convergenceBuckets span 1 ms to about 33 s.
var convergenceBuckets = prometheus.ExponentialBuckets(0.001, 2, 16)

// New returns a set of metrics with its own registry, holding the Go
// runtime and process collectors.
func New() *Metrics {
	m := &Metrics{registry: prometheus.NewRegistry()}
	m.pushes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "xds", Name: "pushes_total",
		Help: "xDS responses sent to clients, by xDS type.",
	}, []string{"type"})
	m.nacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "xds", Name: "nacks_total",
		Help: "xDS responses rejected by clients (NACKs), by xDS type.",
	}, []string{"type"})
	m.convSent = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "xds", Name: "convergence_sent_seconds",
		Help:    "Time from a change reaching meshpilot (the Kubernetes informer event) to the xDS response it caused being sent, by xDS type.",
		Buckets: convergenceBuckets,
	}, []string{"type"})
	m.convACKed = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "xds", Name: "convergence_acked_seconds",
		Help:    "Time from a change reaching meshpilot (the Kubernetes informer event) to the client's ACK of the xDS response it caused, by xDS type.",
		Buckets: convergenceBuckets,
	}, []string{"type"})
	m.pushDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "push", Name: "duration_seconds",
		Help:    "Time to apply one debounced push to the xDS server: regenerate what changed and hand responses to the streams.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	})
	m.dbEvents = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "debounce", Name: "events_total",
		Help: "Model change events received by the debouncer.",
	})
	m.dbPushes = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "debounce", Name: "pushes_total",
		Help: "Pushes the debouncer made of the events.",
	})
	m.dbMerged = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "debounce", Name: "merged_events_total",
		Help: "Events merged into a push that another event started (events minus pushes).",
	})
	m.informer = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "informer", Name: "events_total",
		Help: "Kubernetes informer events, by cluster, kind of object and event (add, update, delete); updates that change nothing included.",
	}, []string{"cluster", "kind", "event"})
	m.triggers = newTriggers()
	m.queue = newWorkqueueMetrics()
	m.registry.MustRegister(
		m.pushes, m.nacks, m.convSent, m.convACKed, m.pushDuration,
		m.dbEvents, m.dbPushes, m.dbMerged, m.informer, m.triggers,
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.queue.register(m.registry)
	return m
}

// Registry is the Prometheus registry, for tests and further collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// ResponseSent implements xds.Observer.
func (m *Metrics) ResponseSent(typ string, _ bool, sinceChange time.Duration) {
	typ = typeLabel(typ)
	m.pushes.WithLabelValues(typ).Inc()
	if sinceChange > 0 {
		m.convSent.WithLabelValues(typ).Observe(sinceChange.Seconds())
	}
}

// ACKed implements xds.Observer.
func (m *Metrics) ACKed(typ string, _ bool, sinceChange time.Duration) {
	if sinceChange > 0 {
		m.convACKed.WithLabelValues(typeLabel(typ)).Observe(sinceChange.Seconds())
	}
}

// NACKed implements xds.Observer.
func (m *Metrics) NACKed(typ string, _ bool) { m.nacks.WithLabelValues(typeLabel(typ)).Inc() }

// Pushed records one debounced push of events model events that took
// took to apply.
func (m *Metrics) Pushed(events int, took time.Duration) {
	m.pushDuration.Observe(took.Seconds())
	m.dbPushes.Inc()
	m.dbEvents.Add(float64(events))
	if events > 1 {
		m.dbMerged.Add(float64(events - 1))
	}
}

// InformerEventsFor returns what counts the informer events of one
// cluster's registry; it fits kube.Options.OnInformerEvent.
func (m *Metrics) InformerEventsFor(cluster string) func(kind, event string) {
	return func(kind, event string) { m.informer.WithLabelValues(cluster, kind, event).Inc() }
}

// WorkqueueProviderFor returns the work queue metrics provider of one
// cluster's registries, for kube.Options.QueueMetrics and
// crd.Options.QueueMetrics. client-go (v0.31 and later) takes a provider
// per queue, so these stay in this registry and the process-wide
// workqueue.SetProvider is never needed.
func (m *Metrics) WorkqueueProviderFor(cluster string) workqueue.MetricsProvider {
	return m.queue.provider(cluster)
}

// Size is what the registries of one cluster hold.
type Size struct{ Services, Endpoints int }

// Sizes is what the registry size gauges read: by cluster ID, what the
// cluster's registries hold.
type Sizes func() map[string]Size

// WatchRegistry adds the registry size gauges, read from sizes once per
// scrape. Call it once.
func (m *Metrics) WatchRegistry(sizes Sizes) {
	m.registry.MustRegister(&registrySizes{
		services: prometheus.NewDesc(prometheus.BuildFQName(namespace, "registry", "services"),
			"Services the registries of each cluster hold; a service several clusters define counts in each.",
			[]string{"cluster"}, nil),
		endpoints: prometheus.NewDesc(prometheus.BuildFQName(namespace, "registry", "endpoints"),
			"Endpoints the registries of each cluster hold, each address and port of each service port counted once.",
			[]string{"cluster"}, nil),
		sizes: sizes,
	})
}

// registrySizes are the registry size gauges: both read from one call
// of sizes, so that a scrape counts the registries once.
type registrySizes struct {
	services, endpoints *prometheus.Desc
	sizes               Sizes
}

func (c *registrySizes) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.services
	ch <- c.endpoints
}

func (c *registrySizes) Collect(ch chan<- prometheus.Metric) {
	for cluster, s := range c.sizes() {
		ch <- prometheus.MustNewConstMetric(c.services, prometheus.GaugeValue, float64(s.Services), cluster)
		ch <- prometheus.MustNewConstMetric(c.endpoints, prometheus.GaugeValue, float64(s.Endpoints), cluster)
	}
}

// ClientCounts is what the client gauge reads: connected streams of gRPC
// clients and of other (Envoy) clients.
type ClientCounts func() (grpcClients, envoyClients int)

// WatchClients adds the connected clients gauge, read from counts at each
// scrape. Call it once.
func (m *Metrics) WatchClients(counts ClientCounts) {
	m.registry.MustRegister(&labelledFunc{
		desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "xds", "clients"),
			"Connected xDS streams, by type of client: grpc (proxyless gRPC) or envoy (everything else).",
			[]string{"type"}, nil),
		kind: prometheus.GaugeValue, labels: []string{"grpc", "envoy"},
		values: func() []float64 { g, e := counts(); return []float64{float64(g), float64(e)} },
	})
}

// labelledFunc is a metric of one label whose values are read from a
// function at each scrape: values()[i] is the value for labels[i].
type labelledFunc struct {
	desc   *prometheus.Desc
	kind   prometheus.ValueType
	labels []string
	values func() []float64
}

func (c *labelledFunc) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *labelledFunc) Collect(ch chan<- prometheus.Metric) {
	for i, v := range c.values() {
		ch <- prometheus.MustNewConstMetric(c.desc, c.kind, v, c.labels[i])
	}
}

// RefusedStreams is what the refused streams counter reads: new streams
// refused because the server was not ready (or draining), because it
// served its maximum of clients, and because they came faster than the
// rate of new streams it takes.
type RefusedStreams func() (notReady, maxClients, rateLimited uint64)

// WatchHostileClients adds the counters of requests refused for going
// beyond the limits and of streams ended by the send timeout, read at
// each scrape. Call it once.
func (m *Metrics) WatchHostileClients(refusedRequests, sendTimeouts func() uint64) {
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "xds", Name: "refused_requests_total",
		Help: "xDS requests refused with InvalidArgument (REST: 400) for more resource names than --max-request-names or a node over 64 KiB; each ends its stream, and is logged once per client per 10 minutes.",
	}, func() float64 { return float64(refusedRequests()) }))
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "xds", Name: "send_timeouts_total",
		Help: "xDS streams ended with DeadlineExceeded because a response could not be written within --stream-send-timeout: the client does not read its stream.",
	}, func() float64 { return float64(sendTimeouts()) }))
}

// WatchShedStreams adds the shed streams counter, read from count at
// each scrape. Call it once.
func (m *Metrics) WatchShedStreams(count func() uint64) {
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "xds", Name: "shed_streams_total",
		Help: "xDS streams ended with Unavailable because this replica closed their client's connection to balance the replicas (--balance): it held more than its fair share of clients, or more than the share while a peer held too few; the clients reconnect through the Service.",
	}, func() float64 { return float64(count()) }))
}

// WatchRefusedStreams adds the refused streams counter, read from counts
// at each scrape. Call it once.
func (m *Metrics) WatchRefusedStreams(counts RefusedStreams) {
	m.registry.MustRegister(&labelledFunc{
		desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "xds", "refused_streams_total"),
			"New xDS streams refused at once, by reason: not_ready (the model is not synced yet, or the server is draining; Unavailable), max_clients (the replica serves its --max-clients streams; ResourceExhausted) or rate_limited (more new streams than --max-new-streams-per-second, and no turn within a second; ResourceExhausted).",
			[]string{"reason"}, nil),
		kind: prometheus.CounterValue, labels: []string{"not_ready", "max_clients", "rate_limited"},
		values: func() []float64 { n, m, r := counts(); return []float64{float64(n), float64(m), float64(r)} },
	})
}
