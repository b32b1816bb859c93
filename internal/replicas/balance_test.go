package replicas

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBalancerStep drives the balancer tick by tick over a replica that
// holds more than its share: it sheds at the rate, the oldest streams
// first, stops at the fair share while a peer is under the band and at
// the fair share plus the tolerance otherwise, never touches a stream
// just accepted, is not misled by a peer's Lease that has not counted the
// shed clients yet, and sheds nothing while it cannot trust its view.
func TestBalancerStep(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		reachable bool
		fresh     int // streams just accepted, besides the 10 old ones
		// peers are the other replicas' counts; one with none when nil.
		peers []int
		// ownRenewed: this replica's Lease follows its count while the
		// peer's lags (the shed clients not in it yet).
		ownRenewed bool
		ticks      int
		wantShed   []int64
	}{
		{name: "one second at 2/s", reachable: true, ticks: 4, wantShed: []int64{1, 2}},
		{name: "a peer under the band: down to the fair share and no further", reachable: true, ticks: 40,
			wantShed: []int64{1, 2, 3, 4, 5}},
		// Fair share 22/3, band 5.9 to 8.8: 10 is 2 too many.
		{name: "no peer under the band: down to share plus tolerance and no further", reachable: true, peers: []int{6, 6},
			ticks: 40, wantShed: []int64{1, 2}},
		{name: "new streams are never shed, even while over the share", reachable: true, fresh: 20, ticks: 40,
			wantShed: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{name: "a peer's lagging Lease does not make it shed more", reachable: true, ownRenewed: true, peers: []int{6, 6},
			ticks: 40, wantShed: []int64{1, 2}},
		{name: "blind: nothing", reachable: false, ticks: 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var streams []Conn
			for i := range 10 + tt.fresh {
				opened := start.Add(-time.Hour + time.Duration(i)*time.Second)
				if i >= 10 {
					opened = start // accepted now: never old enough within the test
				}
				streams = append(streams, Conn{ID: int64(i + 1), Opened: opened})
			}
			var shed []int64
			var logs strings.Builder
			b := NewBalancer(BalancerOptions{
				Log:       slog.New(slog.NewTextHandler(&logs, nil)),
				Tolerance: DefaultTolerance,
				Self:      "a",
				View: func() View {
					own := 10 + tt.fresh
					if tt.ownRenewed {
						own = len(streams)
					}
					leases := []Replica{{Name: "a", Clients: own, Renewed: start}}
					peers := tt.peers
					if peers == nil {
						peers = []int{0}
					}
					for i, n := range peers {
						leases = append(leases, Replica{Name: string(rune('b' + i)), Clients: n, Renewed: start})
					}
					v := Compute(leases, start, time.Minute)
					v.Reachable = tt.reachable
					return v
				},
				Clients: func() int { return len(streams) },
				Conns:   func() []Conn { return streams },
				Shed: func(ids []int64) int {
					shed = append(shed, ids...)
					streams = slices.DeleteFunc(streams, func(s Conn) bool { return slices.Contains(ids, s.ID) })
					return len(ids)
				},
			})
			for i := range tt.ticks {
				b.step(start.Add(time.Duration(i+1) * balanceTick))
			}
			if !slices.Equal(shed, tt.wantShed) {
				t.Errorf("shed %v, want %v", shed, tt.wantShed)
			}
			// One line when shedding starts, not one per shed.
			want := 0
			if len(tt.wantShed) > 0 {
				want = 1
			}
			if n := strings.Count(logs.String(), "holding more than the fair share"); n != want {
				t.Errorf("%d lines on shedding, want %d:\n%s", n, want, logs.String())
			}
		})
	}
}
