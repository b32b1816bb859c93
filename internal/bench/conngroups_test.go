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
		if p.Harness.CPUSeconds <= 0 || p.HarnessCPUDelta < 0 || p.WallSeconds <= 0 {
			t.Errorf("phase %s: implausible harness usage %+v, %v s in phase", p.Name, p.Harness, p.WallSeconds)
		}
	}
	var sum bytes.Buffer
	res.WriteSummary(&sum)
	for _, want := range []string{"6 ADS streams over 2 connections", "meshbench CPU s"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	if t.Failed() {
		t.Logf("progress:\n%s\nsummary:\n%s", log.String(), sum.String())
	}
}
