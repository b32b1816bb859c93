package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// rssRun is a result of services services with shape cfg whose meshpilot
// peaked at peakMiB (in Result.Peak when newFormat, else only in the
// phases, as results written before Peak existed) and held convMiB once
// converged.
func rssRun(cfg Config, services int, peakMiB, convMiB int64, newFormat bool) *Result {
	cfg.Services = services
	r := &Result{Config: cfg, Phases: []Phase{
		{Name: "sync", Usage: Usage{RSS: 10 << 20, HWM: 10 << 20}},
		{Name: "converged", Usage: Usage{RSS: convMiB << 20, HWM: peakMiB << 20}},
		{Name: "churn", Usage: Usage{RSS: convMiB << 20, HWM: peakMiB << 20}},
	}}
	if newFormat {
		r.Peak = PeakUsage{HWM: peakMiB << 20}
		r.Phases[1].HWM = convMiB << 20 // the peak came later
	}
	return r
}

// svgDot is a dot of a plotted line: its data and its position.
type svgDot struct {
	x, y   float64 // data
	cx, cy float64 // position
}

// svgDots returns the dots of an SVG, and the data-series of its
// polylines counted by group.
func svgDots(t *testing.T, svg []byte) (dots []svgDot, lines map[string]int) {
	t.Helper()
	lines = map[string]int{}
	for _, el := range svgElements(t, svg) {
		switch {
		case el.name == "polyline" && el.attrs["class"] == "rss":
			lines[el.attrs["data-group"]+" "+el.attrs["data-series"]]++
		case el.name == "circle" && el.attrs["class"] == "dot":
			var d svgDot
			for p, s := range map[*float64]string{&d.x: "data-x", &d.y: "data-y", &d.cx: "cx", &d.cy: "cy"} {
				var err error
				if *p, err = strconv.ParseFloat(el.attrs[s], 64); err != nil {
					t.Fatalf("dot attribute %s=%q: %v", s, el.attrs[s], err)
				}
			}
			dots = append(dots, d)
		}
	}
	return dots, lines
}

func TestRSSPlot(t *testing.T) {
	big := Defaults()
	big.Endpoints, big.Clients, big.PerClient = 10, 1000, 10
	small := Defaults()
	runs := []*Result{
		rssRun(big, 10000, 300, 250, true),
		rssRun(big, 1000, 80, 60, false),
		rssRun(small, 200, 50, 40, true),
		// Three runs of one size: drawn as their median peak, 110.
		rssRun(big, 5000, 100, 90, true),
		rssRun(big, 5000, 130, 90, true),
		rssRun(big, 5000, 110, 90, true),
	}
	// Through the JSON that meshbench --json writes, as plot-rss reads it.
	var read []*Result
	dir := t.TempDir()
	for i, r := range runs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, strconv.Itoa(i)+".json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		rr, err := ReadResult(path)
		if err != nil {
			t.Fatal(err)
		}
		read = append(read, rr)
	}
	var svg bytes.Buffer
	if err := WriteRSSPlot(&svg, read); err != nil {
		t.Fatal(err)
	}
	dots, lines := svgDots(t, svg.Bytes())

	// A solid and a dashed line per workload shape.
	for _, want := range []string{"E=10 C=1000 K=10 peak", "E=10 C=1000 K=10 converged", "E=5 C=100 K=5 peak", "E=5 C=100 K=5 converged"} {
		if lines[want] != 1 {
			t.Errorf("polylines %v: want one %q", lines, want)
		}
	}
	// A dot per shape and size, at the peak: the old result's from its
	// phases, the repeated runs' their median.
	want := []svgDot{{x: 1000, y: 80}, {x: 5000, y: 110}, {x: 10000, y: 300}, {x: 200, y: 50}}
	if len(dots) != len(want) {
		t.Fatalf("dots %+v, want %d", dots, len(want))
	}
	for i, w := range want {
		if dots[i].x != w.x || dots[i].y != w.y {
			t.Errorf("dot %d at (%g, %g), want (%g, %g)", i, dots[i].x, dots[i].y, w.x, w.y)
		}
	}
	// Drawn where their data says: more services further right, more
	// memory higher up (smaller y), all inside the figure.
	for i := 1; i < 3; i++ {
		if dots[i].cx <= dots[i-1].cx || dots[i].cy >= dots[i-1].cy {
			t.Errorf("dot %+v not right of and above %+v", dots[i], dots[i-1])
		}
	}
	for _, d := range dots {
		if d.cx < plotLeft || d.cx > plotWidth-plotRight || d.cy < plotTop || d.cy > plotHeight-plotBottom {
			t.Errorf("dot %+v outside the plotting area", d)
		}
	}
	for _, text := range []string{"VmHWM", "6 runs", ">300<", "services (S)"} {
		if !strings.Contains(svg.String(), text) {
			t.Errorf("the plot lacks %q", text)
		}
	}
}

func TestRSSPlotRefusesRunsWithoutMemoryFigures(t *testing.T) {
	replicas := &Result{Config: Defaults()}
	err := WriteRSSPlot(io.Discard, []*Result{replicas})
	if err == nil || !strings.Contains(err.Error(), "no memory figures") {
		t.Errorf("a run without phases: %v, want an error saying it has no memory figures", err)
	}
	if err := WriteRSSPlot(io.Discard, nil); err == nil {
		t.Error("no runs: no error")
	}
}
