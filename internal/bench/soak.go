package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A soak keeps every path of meshpilot busy for a long time and watches
// whether what it holds grows: endpoint churn at Config.Rate, a few
// clients closing and reopening their connections every half sample
// interval, and a service created and the previous one deleted every
// three sample intervals. Endpoint changes replace a service's oldest
// endpoint (and delete its Pod), so that the cluster itself stays the same
// size: any growth is meshpilot's.
const (
	// soakReconnects clients restart at a time.
	soakReconnects = 2
	// soakWarmup is the share of the soak, from its start, left out of
	// the slopes: caches, buffers and the heap's goal settle first.
	soakWarmup = 0.2
	// SoakLimitPct is the largest slope, in % of the series' mean per 10
	// minutes, of a flat series.
	SoakLimitPct = 1.0
)

// soakRun is what a soak works with.
type soakRun struct {
	churnRun
	proc       *process
	metricsURL string
	clients    *fleet
	newClient  func(id int) *adsClient
	logf       func(string, ...any)
}

// SoakResult is a soak's time series, their slopes and its changes.
type SoakResult struct {
	Seconds       float64 `json:"seconds"`
	SampleSeconds float64 `json:"sample_seconds"`
	// WarmupSeconds from the start are left out of the slopes.
	WarmupSeconds float64      `json:"warmup_seconds"`
	Samples       []SoakSample `json:"samples"`
	// Slopes of each series, least squares over the samples after the
	// warm-up, per 10 minutes, in % of the series' mean over the second
	// half of the soak.
	Slopes []SeriesSlope `json:"slopes"`
	// Changes are endpoint replacements; Pairs (subscribed client,
	// change); MissedChanges those some subscribed client did not hold
	// within the miss timeout, MissedPairs the pairs.
	Changes       int `json:"changes"`
	Pairs         int `json:"pairs"`
	MissedChanges int `json:"missed_changes"`
	MissedPairs   int `json:"missed_pairs"`
	// FromWriteStart is the latency of the pairs seen.
	FromWriteStart Percentiles `json:"from_write_start"`
	// Reconnects are client restarts (stream and connection).
	Reconnects      int `json:"reconnects"`
	ServicesCreated int `json:"services_created"`
	ServicesDeleted int `json:"services_deleted"`
	// SampleErrors are samples lost to an unanswered /metrics.
	SampleErrors int `json:"sample_errors"`
	// Pass: no missed change and RSS, goroutines and streams within
	// SoakLimitPct.
	Pass bool `json:"pass"`
}

// SoakSample is meshpilot at one moment of a soak.
type SoakSample struct {
	// T is seconds from the soak's start.
	T          float64 `json:"t_s"`
	RSS        int64   `json:"rss_bytes"`
	RSSAnon    int64   `json:"rss_anon_bytes"`
	RSSFile    int64   `json:"rss_file_bytes"`
	HeapInuse  int64   `json:"heap_inuse_bytes"`
	Goroutines int64   `json:"goroutines"`
	Streams    int64   `json:"streams"`
}

// SeriesSlope is one series' trend.
type SeriesSlope struct {
	Series string `json:"series"`
	// PctPer10Min is the slope in % of Mean per 10 minutes.
	PctPer10Min float64 `json:"pct_per_10min"`
	// Mean over the second half of the soak.
	Mean float64 `json:"mean"`
	// Samples fitted.
	Samples int `json:"samples"`
}

// soakSeries are the series of a sample, by name, in the order shown.
var soakSeries = []struct {
	name  string
	gates bool // part of Pass
	value func(SoakSample) float64
}{
	{"rss", true, func(s SoakSample) float64 { return float64(s.RSS) }},
	{"rss_anon", false, func(s SoakSample) float64 { return float64(s.RSSAnon) }},
	{"rss_file", false, func(s SoakSample) float64 { return float64(s.RSSFile) }},
	{"heap_inuse", false, func(s SoakSample) float64 { return float64(s.HeapInuse) }},
	{"goroutines", true, func(s SoakSample) float64 { return float64(s.Goroutines) }},
	{"streams", true, func(s SoakSample) float64 { return float64(s.Streams) }},
}

// The metrics a sample reads from meshpilot's /metrics.
const (
	goroutinesMetric = "go_goroutines"
	heapInuseMetric  = "go_memstats_heap_inuse_bytes"
	streamsMetric    = "meshpilot_xds_clients"
)

// soakTally adds up the soak's changes as they finish.
type soakTally struct {
	mu         sync.Mutex // guards every field
	changes    int
	pairs      int
	missedCh   int
	missedPair int
	fromStart  []time.Duration
	err        error // the first failed write
}

func (t *soakTally) add(pairs, missed int, lat []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.changes++
	t.pairs += pairs
	t.missedPair += missed
	if missed > 0 {
		t.missedCh++
	}
	t.fromStart = append(t.fromStart, lat...)
}

func (t *soakTally) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
}

func (t *soakTally) failed() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// runSoak churns for cfg.Soak and samples meshpilot every cfg.SoakSample.
// Each activity draws from a generator of its own seeded from cfg.Seed, so
// that the same seed makes the same changes whatever the timing.
func runSoak(ctx context.Context, r soakRun) (*SoakResult, error) {
	cfg := r.cfg
	rngFor := func(k uint64) *rand.Rand { return rand.New(rand.NewPCG(cfg.Seed, k)) }
	res := &SoakResult{SampleSeconds: cfg.SoakSample.Seconds(), WarmupSeconds: soakWarmup * cfg.Soak.Seconds()}
	tally := &soakTally{}
	r.logf("soak for %s: endpoint replacements at %g/s, %d client restarts every %s, a service created and one deleted every %s; samples every %s",
		cfg.Soak, cfg.Rate, min(soakReconnects, cfg.Clients), cfg.SoakSample/2, 3*cfg.SoakSample, cfg.SoakSample)

	start := time.Now()
	soakCtx, stop := context.WithDeadline(ctx, start.Add(cfg.Soak))
	defer stop()
	var loops, changes sync.WaitGroup
	// every runs fn every d until the soak ends.
	every := func(d time.Duration, fn func()) {
		loops.Go(func() {
			t := time.NewTicker(d)
			defer t.Stop()
			for {
				select {
				case <-soakCtx.Done():
					return
				case <-t.C:
					fn()
				}
			}
		})
	}

	churnRng := rngFor(1)
	every(time.Duration(float64(time.Second)/cfg.Rate), func() {
		svc := r.workload.services[r.subscribed[churnRng.IntN(len(r.subscribed))]]
		// Changes outlive the soak's end by at most the miss timeout, so
		// that the last ones count.
		changes.Go(func() { r.replaceEndpoint(ctx, svc, tally) })
	})
	restartRng := rngFor(2)
	every(cfg.SoakSample/2, func() {
		for range min(soakReconnects, cfg.Clients) {
			if err := r.clients.restart(r.newClient(restartRng.IntN(cfg.Clients))); err != nil {
				tally.fail(err)
				return
			}
			res.Reconnects++
		}
	})
	var lastSvc *service
	every(3*cfg.SoakSample, func() {
		n := res.ServicesCreated
		svc := &service{idx: -1, name: fmt.Sprintf("soak-%d", n), ns: r.workload.namespace(n % cfg.Namespaces)}
		svc.hostname = svc.name + "." + svc.ns + ".svc.cluster.local"
		if err := r.workload.createBareService(ctx, svc); err != nil {
			tally.fail(err)
			return
		}
		res.ServicesCreated++
		if lastSvc != nil {
			if err := r.workload.deleteBareService(ctx, lastSvc); err != nil {
				tally.fail(err)
				return
			}
			res.ServicesDeleted++
		}
		lastSvc = svc
	})

	client := &http.Client{Timeout: cfg.SoakSample}
	sample := func() {
		s, err := r.sample(soakCtx, client, time.Since(start))
		if err != nil {
			if soakCtx.Err() == nil {
				res.SampleErrors++
				r.logf("soak sample: %v", err)
			}
			return
		}
		res.Samples = append(res.Samples, s)
		tally.mu.Lock()
		n, missed := tally.changes, tally.missedCh
		tally.mu.Unlock()
		r.logf("soak %4.0fs: RSS %.1f MiB (anon %.1f), heap in use %.1f MiB, %d goroutines, %d streams; %d changes, %d missed",
			s.T, mib(s.RSS), mib(s.RSSAnon), mib(s.HeapInuse), s.Goroutines, s.Streams, n, missed)
	}
	sample()
	tick := time.NewTicker(cfg.SoakSample)
	var err error
wait:
	for {
		select {
		case <-tick.C:
			sample()
			if err = tally.failed(); err != nil {
				break wait
			}
			if err = r.proc.alive(); err != nil {
				break wait
			}
		case err = <-r.clientErrs:
			err = fmt.Errorf("during the soak: %w", err)
			break wait
		case <-soakCtx.Done():
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			break wait
		}
	}
	tick.Stop()
	if err == nil {
		// The last sample, at the end.
		sample()
	}
	stop()
	loops.Wait()
	changes.Wait()
	if err == nil {
		err = tally.failed()
	}
	if err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	res.Changes, res.Pairs, res.MissedChanges, res.MissedPairs = tally.changes, tally.pairs, tally.missedCh, tally.missedPair
	res.FromWriteStart = percentiles(tally.fromStart)
	res.Slopes = soakSlopes(res.Samples, res.WarmupSeconds, cfg.Soak.Seconds())
	res.Pass = res.MissedChanges == 0 && len(res.Samples) > 1
	for i, s := range soakSeries {
		if s.gates && !(math.Abs(res.Slopes[i].PctPer10Min) < SoakLimitPct) {
			res.Pass = false
		}
	}
	return res, nil
}

// replaceEndpoint adds a new ready endpoint (and Pod) to svc and drops its
// oldest (and deletes its Pod), follows the new one to every subscribed
// client and counts the change.
func (r *soakRun) replaceEndpoint(ctx context.Context, svc *service, tally *soakTally) {
	w := r.workload
	ep, err := w.newEndpoint(ctx, svc)
	if err != nil {
		tally.fail(err)
		return
	}
	var dropped *discoveryv1.Endpoint
	ch, err := r.tracker.track(ctx, svc.idx, r.cfg.MissTimeout, func(expect func(string)) (time.Time, error) {
		var written time.Time
		var err error
		written, dropped, err = w.rotateEndpoint(ctx, svc, ep, r.cfg.Endpoints, func() { expect(ep.Addresses[0]) })
		return written, err
	})
	if err != nil {
		tally.fail(err)
		return
	}
	if dropped != nil && dropped.TargetRef != nil {
		// At once, as the kubelet confirms a deletion: with no kubelet, a
		// graceful deletion only marks the Pod, which would stay in the
		// cluster and in meshpilot's caches for ever.
		err := w.client.CoreV1().Pods(svc.ns).Delete(ctx, dropped.TargetRef.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
		w.writes.Add(1)
		if err != nil && ctx.Err() == nil {
			tally.fail(wrap(err, "deleting pod %s/%s", svc.ns, dropped.TargetRef.Name))
			return
		}
	}
	pairs, missed, lat := r.tracker.settle(ch, r.cfg.MissTimeout)
	tally.add(pairs, missed, lat)
}

// settle counts a followed change's pairs and misses, returns the
// latencies from its write's start of the pairs seen, and forgets it.
func (t *tracker) settle(ch *change, missTimeout time.Duration) (pairs, missed int, fromStart []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, ch.addr)
	for _, c := range ch.expected {
		pairs++
		at, ok := ch.seen[c]
		if !ok || at.Sub(ch.writeDone) > missTimeout {
			missed++
			continue
		}
		fromStart = append(fromStart, at.Sub(ch.writeStart))
	}
	return pairs, missed, fromStart
}

// sample reads meshpilot's memory from /proc and its goroutines, heap and
// open streams from its metrics.
func (r *soakRun) sample(ctx context.Context, client *http.Client, at time.Duration) (SoakSample, error) {
	u, err := readUsage(r.proc.pid())
	if err != nil {
		return SoakSample{}, err
	}
	m, err := scrape(ctx, client, r.metricsURL, goroutinesMetric, heapInuseMetric, streamsMetric)
	if err != nil {
		return SoakSample{}, err
	}
	return SoakSample{
		T:   math.Round(at.Seconds()*1000) / 1000,
		RSS: u.RSS, RSSAnon: u.RSSAnon, RSSFile: u.RSSFile,
		HeapInuse: int64(m[heapInuseMetric]), Goroutines: int64(m[goroutinesMetric]), Streams: int64(m[streamsMetric]),
	}, nil
}

// soakSlopes fits each series over the samples after warmup seconds and
// scales its slope by its mean over the second half of a soak of length
// seconds.
func soakSlopes(samples []SoakSample, warmup, length float64) []SeriesSlope {
	out := make([]SeriesSlope, 0, len(soakSeries))
	for _, s := range soakSeries {
		var ts, ys, late []float64
		for _, x := range samples {
			v := s.value(x)
			if x.T >= warmup {
				ts = append(ts, x.T)
				ys = append(ys, v)
			}
			if x.T >= length/2 {
				late = append(late, v)
			}
		}
		sl := SeriesSlope{Series: s.name, Samples: len(ts), Mean: mean(late)}
		sl.PctPer10Min = pctPer10Min(leastSquaresSlope(ts, ys), sl.Mean)
		out = append(out, sl)
	}
	return out
}

// pctPer10Min turns a slope per second into % of mean per 10 minutes,
// rounded to 0.01; 0 when the mean is 0.
func pctPer10Min(perSecond, mean float64) float64 {
	if mean == 0 {
		return 0
	}
	return math.Round(perSecond*600/mean*100*100) / 100
}

// leastSquaresSlope is b of the line y = a + b·x closest to the points in
// least squares; 0 for fewer than two distinct x.
func leastSquaresSlope(xs, ys []float64) float64 {
	mx, my := mean(xs), mean(ys)
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0
	}
	return sxy / sxx
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// createBareService creates svc with one ready endpoint, no Pod and no
// client: the soak's service churn, which every client's listeners and
// clusters leave out.
func (w *workload) createBareService(ctx context.Context, svc *service) error {
	if err := w.createService(ctx, svc); err != nil {
		return err
	}
	_, err := w.createSlice(ctx, svc, []discoveryv1.Endpoint{{Addresses: []string{w.newAddr()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}})
	return err
}

// deleteBareService deletes a service made by createBareService and its
// slice.
func (w *workload) deleteBareService(ctx context.Context, svc *service) error {
	err1 := w.client.DiscoveryV1().EndpointSlices(svc.ns).Delete(ctx, svc.name+"-0", metav1.DeleteOptions{})
	err2 := w.client.CoreV1().Services(svc.ns).Delete(ctx, svc.name, metav1.DeleteOptions{})
	w.writes.Add(2)
	return wrap(errors.Join(err1, err2), "deleting service %s", svc.hostname)
}

// subscribedServices are the indexes of the services some client
// watches: only they change.
func subscribedServices(byService [][]int) []int {
	var out []int
	for s, cs := range byService {
		if len(cs) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// writeSummary prints the slopes, misses and verdict.
func (s *SoakResult) writeSummary(out io.Writer) {
	label := map[string]string{"rss": "RSS", "rss_anon": "anon", "rss_file": "file", "heap_inuse": "heap in use", "goroutines": "goroutines", "streams": "streams"}
	var parts []string
	for _, sl := range s.Slopes {
		parts = append(parts, fmt.Sprintf("%s %+.1f %%/10 min", label[sl.Series], sl.PctPer10Min))
	}
	verdict := "PASS"
	if !s.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(out, "soak %.0f s, %d samples every %g s, slopes over the samples after the first %.0f s (%.0f %%): %s; %d misses of %d changes (%d of %d client pairs); %s (RSS, goroutines and streams under %g %%/10 min, no miss)\n",
		s.Seconds, len(s.Samples), s.SampleSeconds, s.WarmupSeconds, soakWarmup*100, strings.Join(parts, ", "),
		s.MissedChanges, s.Changes, s.MissedPairs, s.Pairs, verdict, SoakLimitPct)
	fmt.Fprintf(out, "soak: %d client restarts, %d services created and %d deleted; a change reached its clients p50 %.1f ms, p99 %.1f ms from its write's start\n",
		s.Reconnects, s.ServicesCreated, s.ServicesDeleted, s.FromWriteStart.P50MS, s.FromWriteStart.P99MS)
	if s.SampleErrors > 0 {
		fmt.Fprintf(out, "soak: %d samples lost to an unanswered /metrics\n", s.SampleErrors)
	}
}

// WritePlot draws the soak as an SVG: meshpilot's RSS, anonymous RSS and
// heap in use, its goroutines and its open xDS streams over time, each
// panel from zero so that a slope shows at its true size, the warm-up
// left out of the slopes marked, each series' slope in its legend.
func (s *SoakResult) WritePlot(w io.Writer) error {
	if len(s.Samples) < 2 {
		return fmt.Errorf("%d samples: too few to plot", len(s.Samples))
	}
	unit, per, xLabel := "s", 1.0, "seconds since the soak began"
	if s.Seconds >= 180 {
		unit, per, xLabel = "min", 60, "minutes since the soak began"
	}
	slope := map[string]float64{}
	for _, sl := range s.Slopes {
		slope[sl.Series] = sl.PctPer10Min
	}
	var xs []float64
	for _, x := range s.Samples {
		xs = append(xs, x.T/per)
	}
	panel := func(yLabel string, series []string, legends []string, scale float64) plotPanel {
		p := plotPanel{yLabel: yLabel, x0: 0, x1: max(xs[len(xs)-1], s.Seconds/per),
			marks: []plotMark{{s.WarmupSeconds / per, fmt.Sprintf("warm-up ends (%.0f %s)", s.WarmupSeconds/per, unit)}}}
		var slopes []string
		for i, name := range series {
			l := plotLine{legend: legends[i], attrs: fmt.Sprintf(`class="series" data-series="%s"`, name),
				colour: plotColours[i%len(plotColours)], xs: xs}
			for _, x := range s.Samples {
				v := soakValue(name, x) / scale
				l.ys = append(l.ys, v)
				p.ymax = max(p.ymax, v)
			}
			p.lines = append(p.lines, l)
			slopes = append(slopes, fmt.Sprintf("%s %+.2f %%", legends[i], slope[name]))
		}
		p.ymax = max(p.ymax*1.1, 1)
		p.caption = "slope after the warm-up, per 10 min: " + strings.Join(slopes, ", ")
		return p
	}
	mem := panel("memory (MiB)", []string{"rss", "rss_anon", "heap_inuse"}, []string{"RSS", "RSS anon", "heap in use"}, 1<<20)
	verdict := "PASS"
	if !s.Pass {
		verdict = "FAIL"
	}
	f := plotFigure{
		title: fmt.Sprintf("meshpilot over a %s soak: flat under %g %% per 10 min? %s",
			time.Duration(s.Seconds*float64(time.Second)).Round(time.Second), SoakLimitPct, verdict),
		subtitle: fmt.Sprintf("%d endpoint changes, %d missed; %d client restarts; %d services created, %d deleted; a sample every %g s",
			s.Changes, s.MissedChanges, s.Reconnects, s.ServicesCreated, s.ServicesDeleted, s.SampleSeconds),
		xLabel:      xLabel,
		panelHeight: 170,
		panels: []plotPanel{
			mem,
			panel("goroutines", []string{"goroutines"}, []string{"goroutines"}, 1),
			panel("xDS streams", []string{"streams"}, []string{"streams"}, 1),
		},
	}
	return f.write(w)
}

// soakValue is the named series' value in a sample.
func soakValue(name string, x SoakSample) float64 {
	for _, s := range soakSeries {
		if s.name == name {
			return s.value(x)
		}
	}
	return math.NaN()
}
