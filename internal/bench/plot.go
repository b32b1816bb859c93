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
	plotHeight  = 440
	plotLeft    = 64  // room for the y tick labels and title
	plotRight   = 150 // room for the legend
	plotTop     = 64  // room for the title and the figures under it
	plotBottom  = 56  // room for the x tick labels and title
	plotLeadInS = 15  // seconds shown before the restart
)

// Line colours, one per replica, told apart in colour and in grey.
var plotColours = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

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
	x0, x1 := samples[0].S, samples[len(samples)-1].S
	ymax := res.FairShare * (1 + res.Tolerance)
	for _, s := range samples {
		for _, c := range s.Clients {
			ymax = max(ymax, float64(c))
		}
	}
	xStep, yStep := niceStep(x1-x0), niceStep(ymax)
	ymax = math.Ceil(ymax/yStep) * yStep
	pw, ph := float64(plotWidth-plotLeft-plotRight), float64(plotHeight-plotTop-plotBottom)
	px := func(s float64) float64 { return plotLeft + (s-x0)/(x1-x0)*pw }
	py := func(c float64) float64 { return plotTop + ph - c/ymax*ph }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		plotWidth, plotHeight, plotWidth, plotHeight)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotWidth, plotHeight)
	title := fmt.Sprintf("Clients per replica after %s restarts (%d clients, %d replicas, --balance)", res.Restarted, res.Clients, len(res.Replicas))
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", plotLeft, html.EscapeString(title))
	sub := "not balanced"
	if res.Balanced {
		sub = fmt.Sprintf("balanced %.0f s after it was ready", res.BalancedAfterS)
	}
	sub += fmt.Sprintf("; %d streams shed; %d clients needed a second reconnect to get their configuration back",
		res.Shed, res.Lives.Violations)
	fmt.Fprintf(&b, `<text x="%d" y="44" fill="#444">%s</text>`+"\n", plotLeft, html.EscapeString(sub))

	// The band, then the grid and axes, then the marks and the lines on top.
	lo, hi := res.FairShare*(1-res.Tolerance), res.FairShare*(1+res.Tolerance)
	fmt.Fprintf(&b, `<rect class="band" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#888" fill-opacity="0.18"/>`+"\n",
		px(x0), py(hi), pw, py(lo)-py(hi))
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#666" stroke-dasharray="6 4"/>`+"\n",
		px(x0), py(res.FairShare), px(x1), py(res.FairShare))
	for y := 0.0; y <= ymax+1e-9; y += yStep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", px(x0), py(y), px(x1), py(y))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", px(x0)-6, py(y)+4, tickLabel(y))
	}
	for x := math.Ceil(x0/xStep) * xStep; x <= x1+1e-9; x += xStep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", px(x), py(0), px(x), py(0)+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(x), py(0)+18, tickLabel(x))
	}
	fmt.Fprintf(&b, `<path d="M%.1f %.1f V%.1f H%.1f" fill="none" stroke="black"/>`+"\n", px(x0), py(ymax), py(0), px(x1))
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">seconds since %s was stopped (SIGTERM)</text>`+"\n",
		plotLeft+pw/2, plotHeight-14, html.EscapeString(res.Restarted))
	fmt.Fprintf(&b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">xDS clients</text>`+"\n", plotTop+ph/2)

	// Labels of marks one under the other, since stop and ready are
	// often seconds apart.
	marks := 0
	mark := func(s float64, label string) {
		if s < x0 || s > x1 {
			return
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#777" stroke-dasharray="3 3"/>`+"\n", px(s), py(ymax), px(s), py(0))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#555">%s</text>`+"\n", px(s)+3, py(ymax)+12+14*float64(marks), html.EscapeString(label))
		marks++
	}
	mark(0, "stop")
	mark(res.ReadyS, "ready")
	if res.Balanced {
		mark(res.BalancedS, "balanced")
	}

	for i, name := range res.Replicas {
		colour := plotColours[i%len(plotColours)]
		var seg []string
		flush := func() {
			if len(seg) > 0 {
				fmt.Fprintf(&b, `<polyline class="replica" data-replica="%s" points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n",
					html.EscapeString(name), strings.Join(seg, " "), colour)
			}
			seg = nil
		}
		for _, s := range samples {
			if i >= len(s.Clients) || s.Clients[i] < 0 {
				flush()
				continue
			}
			seg = append(seg, fmt.Sprintf("%.1f,%.1f", px(s.S), py(float64(s.Clients[i]))))
		}
		flush()
		ly := plotTop + 10 + 20*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n",
			plotWidth-plotRight+16, ly, plotWidth-plotRight+40, ly, colour)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", plotWidth-plotRight+46, ly+4, html.EscapeString(name))
	}
	ly := plotTop + 10 + 20*len(res.Replicas)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="24" height="10" fill="#888" fill-opacity="0.18"/>`+"\n", plotWidth-plotRight+16, ly-5)
	fmt.Fprintf(&b, `<text x="%d" y="%d">fair share ±%g %%</text>`+"\n", plotWidth-plotRight+46, ly+4, res.Tolerance*100)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
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
