package bench

import (
	"bytes"
	"strings"
	"testing"
)

func TestConnGroups(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		clients, streamsPerConn int
		perConn, conns          int
		lastID, lastConn        int // the last client and its connection
	}{
		{"one client", 1, 0, 1, 1, 0, 0},
		{"the default workload: a connection per client", 100, 0, 1, 100, 99, 99},
		{"up to the automatic limit", AutoConnections, 0, 1, AutoConnections, AutoConnections - 1, AutoConnections - 1},
		{"one past it: two to a connection", AutoConnections + 1, 0, 2, 501, AutoConnections, 500},
		{"ten thousand: ten to a connection", 10_000, 0, 10, 1000, 9999, 999},
		{"ten thousand and one: eleven", 10_001, 0, 11, 910, 10_000, 909},
		{"set: the last connection takes the rest", 7, 3, 3, 3, 6, 2},
		{"set: one per connection", 5, 1, 1, 5, 4, 4},
		{"set: more than there are clients", 4, 10, 10, 1, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newConnGroups(tc.clients, tc.streamsPerConn)
			if g.perConn != tc.perConn || g.conns(tc.clients) != tc.conns {
				t.Fatalf("%d streams per connection over %d connections, want %d over %d", g.perConn, g.conns(tc.clients), tc.perConn, tc.conns)
			}
			if got := g.conn(tc.lastID); got != tc.lastConn {
				t.Errorf("client %d on connection %d, want %d", tc.lastID, got, tc.lastConn)
			}
			// Every client has a connection, and every connection a client.
			used := make([]int, g.conns(tc.clients))
			for id := range tc.clients {
				used[g.conn(id)]++
			}
			for i, n := range used {
				if n == 0 || n > g.perConn {
					t.Errorf("connection %d carries %d streams, want 1 to %d", i, n, g.perConn)
				}
			}
		})
	}
}

// TestSmallRunSharesConnections runs the benchmark with three streams to
// a connection: six clients dial two connections, and each of them
// converges and sees the churn.
func TestSmallRunSharesConnections(t *testing.T) {
	cfg := smallConfig(4, "shared")
	cfg.Clients, cfg.StreamsPerConn = 6, 3
	res, log := runSmall(t, cfg)
	cv := res.Convergence
	if cv.Clients != 6 || cv.Connections != 2 {
		t.Errorf("%d clients over %d connections, want 6 over 2", cv.Clients, cv.Connections)
	}
	if cv.P50MS <= 0 || cv.MaxMS > cv.AllMS {
		t.Errorf("convergence figures out of order: %+v", cv)
	}
	// Each of the 3 changes reaches the clients of its service: with 6
	// clients of 2 services out of 4, at least one each.
	if ch := res.Churn; ch == nil || ch.Changes != 3 || ch.Misses != 0 || ch.Pairs < 3 {
		t.Errorf("churn: %+v, want 3 changes reaching at least one client each, no misses", ch)
	}
	if res.XDS.Responses["lds"] < 6 || res.XDS.Responses["eds"] < 6 {
		t.Errorf("responses %v, want an LDS and an EDS response per client at least", res.XDS.Responses)
	}
	for _, p := range res.Phases {
		if p.Harness.CPUSeconds <= 0 || p.HarnessCPUDelta < 0 || p.WallSeconds <= 0 || p.MachineBusyCores < 0 {
			t.Errorf("phase %s: implausible harness usage %+v, %v s in phase", p.Name, p.Harness, p.WallSeconds)
		}
	}
	var sum bytes.Buffer
	res.WriteSummary(&sum)
	for _, want := range []string{"6 ADS streams over 2 connections", "meshbench CPU s", "machine busy cores"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	if t.Failed() {
		t.Logf("progress:\n%s\nsummary:\n%s", log.String(), sum.String())
	}
}

// The machine's CPU comes from /proc/stat's first line: idle and iowait
// are idle, guest time is in user already; busy cores are busy time over
// wall time, which the cpuN lines share out.
func TestMachineCPU(t *testing.T) {
	const before = "cpu  1000 0 200 5000 100 0 0 0 50 0\ncpu0 500 0 100 2500 50 0 0 0 25 0\ncpu1 500 0 100 2500 50 0 0 0 25 0\nintr 1\n"
	// 2 s later: 3 of the 4 core-seconds busy (300 ticks of 400).
	const after = "cpu  1250 0 250 5080 120 0 0 0 90 0\ncpu0 600 0 150 2550 50 0 0 0 45 0\ncpu1 650 0 100 2530 70 0 0 0 45 0\n"
	b, err := parseMachineCPU(before)
	if err != nil {
		t.Fatal(err)
	}
	if b.busy != 12 || b.total != 63 || b.cpus != 2 {
		t.Fatalf("parsed %+v, want 12 s busy of 63, 2 cpus", b)
	}
	a, err := parseMachineCPU(after)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.busyCores(b); got != 1.5 {
		t.Errorf("busy cores %v, want 1.5 (3 s busy in 2 s of wall time)", got)
	}
	if got := a.busyCores(machineCPU{}); got != 0 {
		t.Errorf("busy cores from no reading %v, want 0", got)
	}
	for _, bad := range []string{"", "intr 1\n", "cpu 1 2 3\n", "cpu a b c d e f g h\n"} {
		if _, err := parseMachineCPU(bad); err == nil {
			t.Errorf("parsed %q without an error", bad)
		}
	}
	if _, err := readMachineCPU(); err != nil {
		t.Errorf("this machine's /proc/stat: %v", err)
	}
}
