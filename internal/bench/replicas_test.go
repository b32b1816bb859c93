package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestReplicaRestartBalances is the replica test: three real
// meshpilot processes with --balance against the package's API server and
// 90 clients through a Service that sends each new connection to a
// random ready replica. One replica restarts and comes back with no
// client; within 2 minutes every replica holds its fair share (30)
// within the tolerance (24 to 36) with every client connected, still
// does 5 s later, and no client needed more than one reconnect to hold
// its whole configuration again. The balance flags are shortened (--balance-interval
// 1s, --shed-min-age 2s) so that it takes seconds, not minutes.
func TestReplicaRestartBalances(t *testing.T) {
	cfg := smallConfig(6, "replicas")
	cfg.Clients, cfg.Changes = 90, 0
	cfg.Replicas = ReplicasConfig{Count: 3, Tolerance: 0.2, ShedRate: 10, Interval: time.Second, MinAge: 2 * time.Second,
		Within: 2 * time.Minute, Observe: 5 * time.Second}
	cfg.MeshpilotArgs = append(cfg.MeshpilotArgs, "--drain-duration=1s")
	res, log := runSmall(t, cfg)
	r := res.Replicas
	if r == nil {
		t.Fatalf("no replica result\n%s", log)
	}
	var summary strings.Builder
	res.WriteSummary(&summary)
	t.Logf("%s\n%s", summary.String(), log)
	if !r.Balanced || r.BalancedAfterS > 120 {
		t.Fatalf("not balanced within 2 minutes of the restart:\n%s\n%s", summary.String(), log)
	}
	// Still so at the end of --observe. A sample between (r.OutOfBandAfter)
	// may catch a client on its way between replicas: a lend decided on
	// a Lease a second old.
	last := r.Samples[len(r.Samples)-1].Clients
	if !inBand(last, 90, 0.2) {
		t.Errorf("the last sample %v, %s after the balance, is out of 24 to 36 per replica", last, cfg.Replicas.Observe)
	}
	l := r.Lives
	if l.Violations > 0 || l.IncompleteAtEnd > 0 {
		t.Errorf("%d streams lost before their client had its configuration back, %d clients without it at the end:\n%s",
			l.Violations, l.IncompleteAtEnd, summary.String())
	}
	// The restarted replica's clients reconnected (its drain), and each
	// stream shed to fill it up made its client reconnect.
	if r.Shed == 0 || l.Reconnects < r.Shed {
		t.Errorf("%d streams shed, %d reconnects: want some shed, a reconnect for each", r.Shed, l.Reconnects)
	}
	if len(r.Usage) != 3 || r.Usage[2].RSS == 0 {
		t.Errorf("usage per replica: %+v", r.Usage)
	}
	var svg bytes.Buffer
	if err := r.WritePlot(&svg); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, svg.Bytes(), 3)
}

// checkSVG parses an SVG and checks it has a title, the band and at
// least lines lines of replicas.
func checkSVG(t *testing.T, svg []byte, lines int) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	polylines, band, texts := 0, false, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, svg)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		for _, a := range se.Attr {
			switch {
			case se.Name.Local == "polyline" && a.Name.Local == "class" && a.Value == "replica":
				polylines++
			case se.Name.Local == "rect" && a.Name.Local == "class" && a.Value == "band":
				band = true
			}
		}
		if se.Name.Local == "text" {
			texts++
		}
	}
	if polylines < lines || !band || texts < 10 {
		t.Errorf("the SVG has %d replica lines (want at least %d), band %v, %d texts", polylines, lines, band, texts)
	}
}

func TestInBand(t *testing.T) {
	tests := []struct {
		counts  []int
		clients int
		want    bool
	}{
		{counts: []int{30, 30, 30}, clients: 90, want: true},
		{counts: []int{36, 30, 24}, clients: 90, want: true},
		{counts: []int{37, 30, 23}, clients: 90},
		{counts: []int{36, 36, 18}, clients: 90},
		{counts: []int{30, 30, 29}, clients: 90},  // a client not connected
		{counts: []int{45, 45, -1}, clients: 90},  // a replica not answering
		{counts: []int{30, 30, 30}, clients: 100}, // every client must be there
		{clients: 0},
	}
	for _, tt := range tests {
		if got := inBand(tt.counts, tt.clients, 0.2); got != tt.want {
			t.Errorf("inBand(%v, %d) = %v, want %v", tt.counts, tt.clients, got, tt.want)
		}
	}
}

// TestClientLives: a client's gap runs from losing a stream on which it
// was complete to being complete on a new one; a stream lost before that
// is a violation and the gap goes on; a client still without its config
// at the end counts its gap so far.
func TestClientLives(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := func(sec float64) time.Time { return at.Add(time.Duration(sec * float64(time.Second))) }
	l := newClientLives(3)
	for id := range 3 {
		l.converged(id, s(0))
	}
	select {
	case <-l.allDone:
	default:
		t.Fatal("allDone not closed with every client complete")
	}
	// Client 0: one clean reconnect, 0.2 s without its config.
	l.ended(0, s(10), true, "Unavailable")
	l.converged(0, s(10.2))
	// Client 1: lost, then lost again before complete: a violation; the
	// gap runs from the first loss to the completion on the third stream.
	l.ended(1, s(10), true, "Unavailable")
	l.ended(1, s(10.1), false, "Unavailable")
	l.converged(1, s(11.5))
	// Client 2: lost at 20 s, not complete at the end (22 s).
	l.ended(2, s(20), true, "EOF")
	got := l.summary(s(22))
	want := []ClientLife{{Reconnects: 1, LongestGapMS: 200}, {Reconnects: 2, LongestGapMS: 1500, Violations: 1}, {Reconnects: 1, LongestGapMS: 2000}}
	for i := range want {
		if got.PerClient[i] != want[i] {
			t.Errorf("client %d: %+v, want %+v", i, got.PerClient[i], want[i])
		}
	}
	if got.Reconnects != 4 || got.Reconnected != 3 || got.MostReconnects != 2 || got.Violations != 1 || got.IncompleteAtEnd != 1 ||
		got.EndedBy["Unavailable"] != 3 || got.EndedBy["EOF"] != 1 || got.LongestGap.MaxMS != 2000 {
		t.Errorf("summary %+v", got)
	}
}

func TestSampleLine(t *testing.T) {
	tests := []struct {
		line  string
		name  string
		value float64
		ok    bool
	}{
		{line: `meshpilot_xds_clients{type="grpc"} 12`, name: "meshpilot_xds_clients", value: 12, ok: true},
		{line: `meshpilot_xds_shed_streams_total 3`, name: "meshpilot_xds_shed_streams_total", value: 3, ok: true},
		{line: `# HELP meshpilot_xds_clients connected`},
		{line: ``},
		{line: `garbage`},
	}
	for _, tt := range tests {
		name, value, ok := sampleLine(tt.line)
		if name != tt.name || value != tt.value || ok != tt.ok {
			t.Errorf("sampleLine(%q) = %q %g %v, want %q %g %v", tt.line, name, value, ok, tt.name, tt.value, tt.ok)
		}
	}
}

// TestWritePlot draws a made-up run: a line per replica, the restarted
// one's broken while it does not answer, the band, ticks and labels.
func TestWritePlot(t *testing.T) {
	res := &ReplicasResult{Replicas: []string{"meshpilot-0", "meshpilot-1", "meshpilot-2"}, Clients: 90, Restarted: "meshpilot-2",
		ReadyS: 3, FairShare: 30, Tolerance: 0.2, Balanced: true, BalancedS: 20}
	for s := -20; s <= 40; s++ {
		c := []int{30, 30, 30}
		switch {
		case s >= 0 && s < 3:
			c = []int{45, 45, -1}
		case s >= 3 && s < 20:
			c = []int{45 - s/2, 45 - s/2, s}
		}
		res.Samples = append(res.Samples, ReplicaSample{S: float64(s), Clients: c})
	}
	var b bytes.Buffer
	if err := res.WritePlot(&b); err != nil {
		t.Fatal(err)
	}
	// Two lines for the restarted replica: before the stop and after.
	checkSVG(t, b.Bytes(), 4)
	for _, want := range []string{"meshpilot-2 restarts", "fair share ±20 %", ">stop<", ">ready<", ">balanced<", "xDS clients"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the plot has no %q", want)
		}
	}
	if err := (&ReplicasResult{}).WritePlot(io.Discard); err == nil {
		t.Error("a plot of no samples: no error")
	}
}

// The replica run's clients reconnect as grpc-go's do: at once after a
// stream that got a response, else after a growing backoff.
func TestReconnectBackoff(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	prev := time.Duration(0)
	for failures := 1; failures <= 20; failures++ {
		d := reconnectBackoff(failures, rng)
		if d < time.Duration(float64(prev)*0.6) || d > time.Duration(float64(backoffMax)*1.2) {
			t.Fatalf("backoff after %d failures: %s (previous %s)", failures, d, prev)
		}
		prev = d
	}
	if d := reconnectBackoff(1, rng); d < 800*time.Millisecond || d > 1200*time.Millisecond {
		t.Errorf("first backoff %s, want 1 s ± 20 %%", d)
	}
	if d := reconnectBackoff(50, rng); d < time.Duration(float64(backoffMax)*0.8) {
		t.Errorf("backoff after 50 failures %s, want about %s", d, backoffMax)
	}
}
