package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// The plot's geometry, in SVG user units.
const (
	plotWidth   = 820
	plotHeight  = 440 // of a figure of one panel
	plotLeft    = 64  // room for the y tick labels and title
	plotRight   = 150 // room for the legend
	plotTop     = 64  // room for the title and the figures under it
	plotBottom  = 56  // room for the x tick labels and title
	plotGap     = 36  // between panels: room for their x tick labels
	plotLeadInS = 15  // seconds shown before the restart
)

// Line colours, one per replica or series, told apart in colour and in
// grey.
var plotColours = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// plotFigure is an SVG of panels stacked over one x axis.
type plotFigure struct {
	title string
	// subtitle, under the title, gives the figures that matter.
	subtitle string
	xLabel   string // under the last panel
	// panelHeight of each panel's plotting area; 0 fills a figure of
	// plotHeight with one panel.
	panelHeight float64
	panels      []plotPanel
}

// plotPanel is one plotting area: y from 0 to ymax, grid, ticks, an
// optional band, vertical marks and lines, with a legend at its right.
type plotPanel struct {
	yLabel       string
	x0, x1, ymax float64
	band         *plotBand
	marks        []plotMark
	lines        []plotLine
	// caption is a line of text just above the plotting area.
	caption string
}

// plotBand is a shaded range of y with a dashed line at its centre.
type plotBand struct {
	lo, centre, hi float64
	legend         string
}

type plotMark struct {
	x     float64
	label string
}

// plotLine is a series drawn as polylines, broken at NaN values.
type plotLine struct {
	// legend is its entry in the legend; empty leaves it out.
	legend string
	// attrs are the polylines' own attributes, such as a class.
	attrs  string
	colour string
	xs, ys []float64
	// dots marks each point with a dot and its value, for lines of few
	// points; each dot carries its data as data-x and data-y.
	dots bool
}

// write draws the figure.
func (f *plotFigure) write(w io.Writer) error {
	ph := f.panelHeight
	if ph == 0 {
		ph = plotHeight - plotTop - plotBottom
	}
	n := float64(len(f.panels))
	height := int(plotTop + n*ph + (n-1)*plotGap + plotBottom)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		plotWidth, height, plotWidth, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotWidth, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", plotLeft, html.EscapeString(f.title))
	if f.subtitle != "" {
		fmt.Fprintf(&b, `<text x="%d" y="44" fill="#444">%s</text>`+"\n", plotLeft, html.EscapeString(f.subtitle))
	}
	for i := range f.panels {
		f.panels[i].draw(&b, plotTop+float64(i)*(ph+plotGap), ph)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
		plotLeft+float64(plotWidth-plotLeft-plotRight)/2, height-14, html.EscapeString(f.xLabel))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// draw draws the panel with its plotting area from top, ph high.
func (p *plotPanel) draw(b *strings.Builder, top, ph float64) {
	x0, x1 := p.x0, p.x1
	xStep, yStep := niceStep(x1-x0), niceStep(p.ymax)
	ymax := math.Ceil(p.ymax/yStep) * yStep
	pw := float64(plotWidth - plotLeft - plotRight)
	px := func(x float64) float64 { return plotLeft + (x-x0)/(x1-x0)*pw }
	py := func(y float64) float64 { return top + ph - y/ymax*ph }

	// The band, then the grid and axes, then the marks and the lines on top.
	if bd := p.band; bd != nil {
		fmt.Fprintf(b, `<rect class="band" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#888" fill-opacity="0.18"/>`+"\n",
			px(x0), py(bd.hi), pw, py(bd.lo)-py(bd.hi))
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#666" stroke-dasharray="6 4"/>`+"\n",
			px(x0), py(bd.centre), px(x1), py(bd.centre))
	}
	for y := 0.0; y <= ymax+1e-9; y += yStep {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", px(x0), py(y), px(x1), py(y))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", px(x0)-6, py(y)+4, tickLabel(y))
	}
	for x := math.Ceil(x0/xStep) * xStep; x <= x1+1e-9; x += xStep {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", px(x), py(0), px(x), py(0)+5)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(x), py(0)+18, tickLabel(x))
	}
	fmt.Fprintf(b, `<path d="M%.1f %.1f V%.1f H%.1f" fill="none" stroke="black"/>`+"\n", px(x0), py(ymax), py(0), px(x1))
	fmt.Fprintf(b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", top+ph/2, html.EscapeString(p.yLabel))

	// Labels of marks one under the other, since marks are often close.
	drawn := 0
	for _, m := range p.marks {
		if m.x < x0 || m.x > x1 {
			continue
		}
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#777" stroke-dasharray="3 3"/>`+"\n", px(m.x), py(ymax), px(m.x), py(0))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#555">%s</text>`+"\n", px(m.x)+3, py(ymax)+12+14*float64(drawn), html.EscapeString(m.label))
		drawn++
	}

	ly := int(top) + 10
	for _, l := range p.lines {
		var seg []string
		flush := func() {
			if len(seg) > 0 {
				fmt.Fprintf(b, `<polyline %s points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", l.attrs, strings.Join(seg, " "), l.colour)
			}
			seg = nil
		}
		for i, x := range l.xs {
			if math.IsNaN(l.ys[i]) {
				flush()
				continue
			}
			seg = append(seg, fmt.Sprintf("%.1f,%.1f", px(x), py(l.ys[i])))
		}
		flush()
		for i, x := range l.xs {
			if !l.dots || math.IsNaN(l.ys[i]) {
				continue
			}
			fmt.Fprintf(b, `<circle class="dot" data-x="%g" data-y="%.1f" cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n",
				x, l.ys[i], px(x), py(l.ys[i]), l.colour)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s">%.0f</text>`+"\n", px(x), py(l.ys[i])-9, l.colour, l.ys[i])
		}
		if l.legend == "" {
			continue
		}
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n",
			plotWidth-plotRight+16, ly, plotWidth-plotRight+40, ly, l.colour)
		// A legend of several lines takes a line each, under its
		// sample.
		fmt.Fprintf(b, `<text x="%d" y="%d">`, plotWidth-plotRight+46, ly+4)
		for i, text := range strings.Split(l.legend, "\n") {
			if i > 0 {
				ly += 14
			}
			fmt.Fprintf(b, `<tspan x="%d" y="%d">%s</tspan>`, plotWidth-plotRight+46, ly+4, html.EscapeString(text))
		}
		b.WriteString("</text>\n")
		ly += 20
	}
	if bd := p.band; bd != nil {
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="24" height="10" fill="#888" fill-opacity="0.18"/>`+"\n", plotWidth-plotRight+16, ly-5)
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", plotWidth-plotRight+46, ly+4, html.EscapeString(bd.legend))
		ly += 20
	}
	if p.caption != "" {
		fmt.Fprintf(b, `<text x="%d" y="%.1f" fill="#555">%s</text>`+"\n", plotLeft, top-6, html.EscapeString(p.caption))
	}
}

// WritePlot draws clients per replica over time around the restart as an
// SVG: a line per replica (broken while it does not answer), the fair
// share and its tolerance band shaded, the stop, ready and balanced
// times marked, axes with ticks, and a title.
func (res *ReplicasResult) WritePlot(w io.Writer) error {
	var samples []ReplicaSample
	for _, s := range res.Samples {
		if s.S >= -plotLeadInS {
			samples = append(samples, s)
		}
	}
	if len(samples) < 2 {
		return fmt.Errorf("%d samples from %d s before the restart on: too few to plot", len(samples), plotLeadInS)
	}
	p := plotPanel{
		yLabel: "xDS clients",
		x0:     samples[0].S, x1: samples[len(samples)-1].S,
		ymax: res.FairShare * (1 + res.Tolerance),
		band: &plotBand{lo: res.FairShare * (1 - res.Tolerance), centre: res.FairShare, hi: res.FairShare * (1 + res.Tolerance),
			legend: fmt.Sprintf("fair share ±%g %%", res.Tolerance*100)},
		marks: []plotMark{{0, "stop"}, {res.ReadyS, "ready"}},
	}
	if res.Balanced {
		p.marks = append(p.marks, plotMark{res.BalancedS, "balanced"})
	}
	for i, name := range res.Replicas {
		l := plotLine{legend: name, attrs: fmt.Sprintf(`class="replica" data-replica="%s"`, html.EscapeString(name)),
			colour: plotColours[i%len(plotColours)]}
		for _, s := range samples {
			y := math.NaN()
			if i < len(s.Clients) && s.Clients[i] >= 0 {
				y = float64(s.Clients[i])
				p.ymax = max(p.ymax, y)
			}
			l.xs, l.ys = append(l.xs, s.S), append(l.ys, y)
		}
		p.lines = append(p.lines, l)
	}
	sub := "not balanced"
	if res.Balanced {
		sub = fmt.Sprintf("balanced %.0f s after it was ready", res.BalancedAfterS)
	}
	sub += fmt.Sprintf("; %d streams shed; %d clients needed a second reconnect to get their configuration back",
		res.Shed, res.Lives.Violations)
	f := plotFigure{
		title:    fmt.Sprintf("Clients per replica after %s restarts (%d clients, %d replicas, --balance)", res.Restarted, res.Clients, len(res.Replicas)),
		subtitle: sub,
		xLabel:   fmt.Sprintf("seconds since %s was stopped (SIGTERM)", res.Restarted),
		panels:   []plotPanel{p},
	}
	return f.write(w)
}

// niceStep is a tick step of 1, 2 or 5 times a power of ten giving about
// five to ten ticks over span.
func niceStep(span float64) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / 6
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return max(m*p, 1)
		}
	}
	return 10 * p
}

func tickLabel(v float64) string {
	if v == 0 {
		return "0" // not "-0"
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%g", v)
}
