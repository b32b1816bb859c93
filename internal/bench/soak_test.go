package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLeastSquaresSlope(t *testing.T) {
	for _, tc := range []struct {
		name   string
		xs, ys []float64
		want   float64
	}{
		{"flat", []float64{0, 10, 20, 30}, []float64{5, 5, 5, 5}, 0},
		{"rising", []float64{0, 10, 20, 30}, []float64{1, 2, 3, 4}, 0.1},
		{"falling", []float64{0, 1, 2}, []float64{6, 4, 2}, -2},
		// Noise symmetric about a flat line has no slope.
		{"noise about a flat line", []float64{0, 1, 2, 3}, []float64{10, 12, 12, 10}, 0},
		{"one point", []float64{7}, []float64{3}, 0},
		{"no point", nil, nil, 0},
		{"one x", []float64{4, 4, 4}, []float64{1, 2, 3}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := leastSquaresSlope(tc.xs, tc.ys); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("slope = %g, want %g", got, tc.want)
			}
		})
	}
}

func TestPctPer10Min(t *testing.T) {
	for _, tc := range []struct {
		name            string
		perSecond, mean float64
		want            float64
	}{
		{"1 MiB per 10 min of 100 MiB", float64(1<<20) / 600, 100 << 20, 1},
		{"shrinking", -0.5 / 600, 100, -0.5},
		{"flat", 0, 100, 0},
		{"zero mean", 3, 0, 0},
		{"rounded to 0.01", 0.001234 / 600, 1, 0.12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pctPer10Min(tc.perSecond, tc.mean); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("pctPer10Min(%g, %g) = %g, want %g", tc.perSecond, tc.mean, got, tc.want)
			}
		})
	}
}

// soakSamples is a 30-minute soak sampled every 10 s whose RSS grows by
// grow bytes per 10 minutes from 100 MiB and whose goroutines and streams
// are flat, with a warm-up spike in every series.
func soakSamples(grow float64) []SoakSample {
	var out []SoakSample
	for t := 0.0; t <= 1800; t += 10 {
		s := SoakSample{T: t, RSS: int64(100<<20 + grow*t/600), RSSAnon: 60 << 20, RSSFile: 40 << 20,
			HeapInuse: 30 << 20, Goroutines: 500, Streams: 100}
		if t < 300 {
			// Warm-up: far above the rest, and left out of the slopes.
			s.RSS *= 2
			s.Goroutines *= 2
		}
		out = append(out, s)
	}
	return out
}

func TestSoakSlopes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		grow     float64 // RSS bytes per 10 minutes
		wantRSS  float64 // % per 10 min
		wantMean float64 // RSS over the second half
	}{
		{"flat", 0, 0, 100 << 20},
		// 1 MiB per 10 min, mean over 900..1800 s: 100 MiB + 2.25 MiB.
		{"growing", 1 << 20, math.Round(100/102.25*100) / 100, (100 + 2.25) * (1 << 20)},
		{"shrinking", -2 << 20, math.Round(-200/95.5*100) / 100, (100 - 4.5) * (1 << 20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slopes := soakSlopes(soakSamples(tc.grow), 360, 1800)
			if len(slopes) != len(soakSeries) {
				t.Fatalf("%d slopes, want one per series (%d)", len(slopes), len(soakSeries))
			}
			for _, sl := range slopes {
				// 360..1800 s every 10 s.
				if sl.Samples != 145 {
					t.Errorf("%s: %d samples fitted, want 145 (after the warm-up)", sl.Series, sl.Samples)
				}
				switch sl.Series {
				case "rss":
					if math.Abs(sl.PctPer10Min-tc.wantRSS) > 0.011 || math.Abs(sl.Mean-tc.wantMean) > 1<<10 {
						t.Errorf("rss: %+v, want %g %%/10 min of a mean of %g", sl, tc.wantRSS, tc.wantMean)
					}
				default:
					if sl.PctPer10Min != 0 {
						t.Errorf("%s: %+v, want flat (its warm-up spike left out)", sl.Series, sl)
					}
				}
			}
		})
	}
}

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 512
go_goroutines_other 7
go_memstats_heap_inuse_bytes 3.2505856e+07
meshpilot_xds_clients{type="grpc"} 98
meshpilot_xds_clients{type="envoy"} 2
meshpilot_xds_clients_total 1000
`)
	}))
	defer srv.Close()
	got, err := scrape(t.Context(), srv.Client(), srv.URL, goroutinesMetric, heapInuseMetric, streamsMetric)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{goroutinesMetric: 512, heapInuseMetric: 32505856, streamsMetric: 100}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %g, want %g (every series summed, no metric whose name it prefixes)", k, got[k], v)
		}
	}
	if _, err := scrape(t.Context(), srv.Client(), srv.URL, "meshpilot_absent"); err == nil || !strings.Contains(err.Error(), "meshpilot_absent") {
		t.Errorf("scraping a missing metric: %v, want an error naming it", err)
	}
	if v, err := gauge(t.Context(), srv.Client(), srv.URL, goroutinesMetric); err != nil || v != 512 {
		t.Errorf("gauge = %g, %v; want 512", v, err)
	}
}

// svgSeries parses an SVG and returns the number of polylines of each
// data-series and of text elements.
func svgSeries(t *testing.T, svg []byte) (series map[string]int, texts int) {
	t.Helper()
	series = map[string]int{}
	for _, el := range svgElements(t, svg) {
		if el.name == "text" {
			texts++
		}
		if el.name == "polyline" && el.attrs["data-series"] != "" {
			series[el.attrs["data-series"]]++
		}
	}
	return series, texts
}

// svgElement is an element of an SVG: its name and attributes.
type svgElement struct {
	name  string
	attrs map[string]string
}

// svgElements parses an SVG, failing the test when it is not well-formed,
// and returns its elements in order.
func svgElements(t *testing.T, svg []byte) []svgElement {
	t.Helper()
	var out []svgElement
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, svg)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		el := svgElement{name: se.Name.Local, attrs: map[string]string{}}
		for _, a := range se.Attr {
			el.attrs[a.Name.Local] = a.Value
		}
		out = append(out, el)
	}
}

func TestSoakPlot(t *testing.T) {
	s := &SoakResult{Seconds: 1800, SampleSeconds: 10, WarmupSeconds: 360, Samples: soakSamples(1 << 20), Changes: 9000, Pass: true}
	s.Slopes = soakSlopes(s.Samples, s.WarmupSeconds, s.Seconds)
	var b bytes.Buffer
	if err := s.WritePlot(&b); err != nil {
		t.Fatal(err)
	}
	series, texts := svgSeries(t, b.Bytes())
	for _, name := range []string{"rss", "rss_anon", "heap_inuse", "goroutines", "streams"} {
		if series[name] != 1 {
			t.Errorf("series %s drawn %d times, want once", name, series[name])
		}
	}
	if texts < 20 {
		t.Errorf("%d texts: the axes lack ticks or titles", texts)
	}
	for _, want := range []string{"minutes since the soak began", "warm-up ends (6 min)", "RSS +0.98 %", "memory (MiB)", "xDS streams", "30m0s soak", "PASS"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the plot has no %q", want)
		}
	}
	if err := (&SoakResult{}).WritePlot(io.Discard); err == nil {
		t.Error("a plot of no samples: no error")
	}
}

// TestShortSoak soaks a tiny workload for 20 s, sampling every second:
// every sample reads meshpilot's memory, goroutines and streams, clients
// restart and services come and go, and no change is missed. It asserts
// nothing of the slopes but that they are computed: 20 s says nothing of
// a trend.
func TestShortSoak(t *testing.T) {
	cfg := smallConfig(5, "soak")
	cfg.Soak, cfg.SoakSample, cfg.Rate = 20*time.Second, time.Second, 5
	res, log := runSmall(t, cfg)
	s := res.Soak
	if s == nil {
		t.Fatalf("no soak result\n%s", log)
	}
	if res.Churn != nil {
		t.Errorf("a soak replaces churn, yet churn ran: %+v", res.Churn)
	}
	// One at the start, one a second, one at the end; a loaded machine
	// may lose a few.
	if len(s.Samples) < 15 || s.SampleErrors > 2 {
		t.Errorf("%d samples, %d lost; want about 22", len(s.Samples), s.SampleErrors)
	}
	maxStreams := int64(0)
	for i, x := range s.Samples {
		if x.RSS <= 0 || x.RSSAnon <= 0 || x.RSSFile <= 0 || x.HeapInuse <= 0 || x.Goroutines <= 0 || x.Streams < 0 {
			t.Errorf("sample %d implausible: %+v", i, x)
		}
		if i > 0 && x.T <= s.Samples[i-1].T {
			t.Errorf("sample %d at %g s, not after %g s", i, x.T, s.Samples[i-1].T)
		}
		maxStreams = max(maxStreams, x.Streams)
	}
	// A restarting client may be between streams at a sample.
	if maxStreams != int64(cfg.Clients) {
		t.Errorf("at most %d streams open, want %d", maxStreams, cfg.Clients)
	}
	if len(s.Slopes) != len(soakSeries) {
		t.Fatalf("slopes %+v, want one per series", s.Slopes)
	}
	for _, sl := range s.Slopes {
		if sl.Samples < 10 || sl.Mean <= 0 || math.IsNaN(sl.PctPer10Min) {
			t.Errorf("slope %+v: want at least 10 samples after the 4 s warm-up and a positive mean", sl)
		}
	}
	if s.WarmupSeconds != 4 {
		t.Errorf("warm-up %g s, want 20 %% of 20 s", s.WarmupSeconds)
	}
	// About 100 changes at 5/s; a loaded API server may slow the ticks.
	if s.Changes < 20 || s.Pairs < s.Changes || s.MissedChanges != 0 || s.MissedPairs != 0 {
		t.Errorf("changes %d, pairs %d, missed %d (%d pairs): want at least 20 changes, each to one client or more, none missed",
			s.Changes, s.Pairs, s.MissedChanges, s.MissedPairs)
	}
	// Restarts of 2 clients every 0.5 s; a service every 3 s.
	if s.Reconnects < 10 || s.ServicesCreated < 3 || s.ServicesDeleted != s.ServicesCreated-1 {
		t.Errorf("%d client restarts, %d services created, %d deleted: want at least 10 and 3, and all but the last deleted",
			s.Reconnects, s.ServicesCreated, s.ServicesDeleted)
	}
	// Each change replaced an endpoint and deleted its Pod: the cluster
	// holds as many Pods as at the start, so that any growth is
	// meshpilot's.
	pods := 0
	for i := range cfg.Namespaces {
		list, err := env.Client.CoreV1().Pods(fmt.Sprintf("%s-%d", cfg.Prefix, i)).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods += len(list.Items)
	}
	if want := cfg.Services * cfg.Endpoints; pods != want {
		t.Errorf("%d Pods after the soak, want %d: replaced endpoints' Pods are left behind", pods, want)
	}
	var sum bytes.Buffer
	res.WriteSummary(&sum)
	for _, want := range []string{"RSS ", "goroutines ", "streams ", "heap in use ", "0 misses of ", "client restarts"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	var svg bytes.Buffer
	if err := s.WritePlot(&svg); err != nil {
		t.Fatal(err)
	}
	if series, _ := svgSeries(t, svg.Bytes()); series["rss"] != 1 || series["streams"] != 1 {
		t.Errorf("plotted series %v", series)
	}
	if t.Failed() {
		t.Logf("progress:\n%s\nsummary:\n%s", log, sum.String())
	}
}
