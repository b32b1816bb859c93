package bench

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// ReadResult reads a Result that meshbench --json wrote.
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not a meshbench --json result: %w", path, err)
	}
	return &r, nil
}

// rssPoint is one run's memory figures, in MiB.
type rssPoint struct {
	services  int
	peak      float64 // VmHWM over the run
	converged float64 // RSS once every client converged
}

// rssPointOf reads a run's figures: results written before Result.Peak
// existed still carry each phase's VmHWM.
func rssPointOf(r *Result) (rssPoint, error) {
	p := rssPoint{services: r.Config.Services, peak: mib(r.Peak.HWM), converged: math.NaN()}
	for _, ph := range r.Phases {
		p.peak = max(p.peak, mib(ph.HWM))
		if ph.Name == "converged" {
			p.converged = mib(ph.RSS)
		}
	}
	if len(r.Phases) == 0 || p.peak == 0 {
		return p, fmt.Errorf("the run of %d services has no memory figures of meshpilot (a --replicas run keeps them per replica)", p.services)
	}
	return p, nil
}

// rssGroup is the runs of one workload shape but for the number of
// services: they make one pair of lines.
type rssGroup struct {
	key    string // rssGroupKey
	points []rssPoint
	runs   int
}

// rssGroupKey names a workload shape as the issue's tables do: "E=10
// C=1000 K=10", endpoints per service (per cluster times clusters when
// there are several), clients, services per client.
func rssGroupKey(c Config) string {
	e := fmt.Sprint(c.Endpoints)
	if c.Clusters > 1 {
		e = fmt.Sprintf("%dx%d", c.Clusters, c.Endpoints)
	}
	return fmt.Sprintf("E=%s C=%d K=%d", e, c.Clients, c.PerClient)
}

// groupRSS sorts runs into groups by workload shape, in the order each
// shape first appears, each group's points by services; runs of the same
// shape and services become one point of their median figures.
func groupRSS(results []*Result) ([]rssGroup, error) {
	var groups []rssGroup
	byKey := map[string][][]rssPoint{} // group key -> runs by services, in order
	var keys []string
	var errs []error
	for _, r := range results {
		p, err := rssPointOf(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		k := rssGroupKey(r.Config)
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		runs := byKey[k]
		i := slices.IndexFunc(runs, func(same []rssPoint) bool { return same[0].services == p.services })
		if i < 0 {
			runs = append(runs, nil)
			i = len(runs) - 1
		}
		runs[i] = append(runs[i], p)
		byKey[k] = runs
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, k := range keys {
		g := rssGroup{key: k}
		for _, same := range byKey[k] {
			g.runs += len(same)
			g.points = append(g.points, rssPoint{
				services:  same[0].services,
				peak:      median(same, func(p rssPoint) float64 { return p.peak }),
				converged: median(same, func(p rssPoint) float64 { return p.converged }),
			})
		}
		slices.SortFunc(g.points, func(a, b rssPoint) int { return cmp.Compare(a.services, b.services) })
		groups = append(groups, g)
	}
	return groups, nil
}

// median of f over xs, NaN values left out (NaN when all are).
func median[T any](xs []T, f func(T) float64) float64 {
	var v []float64
	for _, p := range xs {
		if x := f(p); !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// WriteRSSPlot draws meshpilot's memory against the number of services
// from several runs as an SVG: per workload shape (endpoints per service,
// clients), a solid line of its peak RSS over the run (VmHWM) and a
// dashed line of its RSS once every client converged, a dot with its
// value at each run's services; runs of the same shape and services are
// drawn as their median.
func WriteRSSPlot(w io.Writer, results []*Result) error {
	groups, err := groupRSS(results)
	if err != nil {
		return err
	}
	npoints := 0
	p := plotPanel{yLabel: "meshpilot RSS (MiB)"}
	for gi, g := range groups {
		colour := plotColours[gi%len(plotColours)]
		// The legend names the shape; the subtitle says which line is
		// which, so that the legend stays narrow.
		peak := plotLine{legend: strings.Replace(g.key, " K=", "\nK=", 1), colour: colour, dots: true,
			attrs: fmt.Sprintf(`class="rss" data-series="peak" data-group="%s"`, html.EscapeString(g.key))}
		conv := plotLine{colour: colour,
			attrs: fmt.Sprintf(`class="rss" data-series="converged" data-group="%s" stroke-dasharray="6 4"`, html.EscapeString(g.key))}
		for _, pt := range g.points {
			x := float64(pt.services)
			peak.xs, peak.ys = append(peak.xs, x), append(peak.ys, pt.peak)
			conv.xs, conv.ys = append(conv.xs, x), append(conv.ys, pt.converged)
			p.x1 = max(p.x1, x)
			p.ymax = max(p.ymax, pt.peak)
			npoints++
		}
		p.lines = append(p.lines, peak, conv)
	}
	if npoints == 0 {
		return errors.New("no runs to plot")
	}
	p.ymax *= 1.1
	runs := 0
	for _, g := range groups {
		runs += g.runs
	}
	f := plotFigure{
		title: "meshpilot's memory against the services it serves",
		subtitle: fmt.Sprintf("solid: peak RSS over the run (VmHWM); dashed: RSS once every client converged; %d runs, repeats drawn as their median",
			runs),
		xLabel: "services (S)",
		panels: []plotPanel{p},
	}
	return f.write(w)
}
