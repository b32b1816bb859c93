package replicas

import (
	"reflect"
	"testing"
	"time"
)

func TestComputeAndExcess(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ttl := 15 * time.Second
	fresh, old := now.Add(-2*time.Second), now.Add(-16*time.Second)
	rep := func(name string, clients int, renewed time.Time) Replica {
		return Replica{Name: name, Clients: clients, Renewed: renewed}
	}
	tests := []struct {
		name      string
		leases    []Replica
		reachable bool
		mine      int
		tolerance float64
		wantLive  []string
		wantStale []string
		wantFair  float64
		wantShed  int
	}{
		{name: "alone: nothing to shed", leases: []Replica{rep("a", 100, fresh)}, reachable: true,
			mine: 100, tolerance: 0.2, wantLive: []string{"a"}, wantFair: 100},
		{name: "even within tolerance", reachable: true, mine: 55, tolerance: 0.2,
			leases:   []Replica{rep("a", 55, fresh), rep("b", 45, fresh)},
			wantLive: []string{"a", "b"}, wantFair: 50},
		{name: "exactly at the limit sheds nothing", reachable: true, mine: 60, tolerance: 0.2,
			leases:   []Replica{rep("a", 60, fresh), rep("b", 40, fresh)},
			wantLive: []string{"a", "b"}, wantFair: 50},
		{name: "after a restart the old replica sheds down to share plus tolerance", reachable: true,
			mine: 90, tolerance: 0.2, leases: []Replica{rep("a", 90, fresh), rep("b", 0, fresh), rep("c", 90, fresh)},
			wantLive: []string{"a", "b", "c"}, wantFair: 60, wantShed: 18},
		{name: "a fraction over rounds up to one stream", reachable: true, mine: 7, tolerance: 0.2,
			leases:   []Replica{rep("a", 7, fresh), rep("b", 3, fresh)},
			wantLive: []string{"a", "b"}, wantFair: 5, wantShed: 1},
		{name: "zero tolerance", reachable: true, mine: 6, tolerance: 0,
			leases:   []Replica{rep("a", 6, fresh), rep("b", 4, fresh)},
			wantLive: []string{"a", "b"}, wantFair: 5, wantShed: 1},
		{name: "a stale replica counts for nothing", reachable: true, mine: 50, tolerance: 0.2,
			leases:   []Replica{rep("a", 50, fresh), rep("b", 50, fresh), rep("gone", 500, old)},
			wantLive: []string{"a", "b"}, wantStale: []string{"gone"}, wantFair: 50},
		{name: "a never renewed Lease is stale", reachable: true, mine: 10, tolerance: 0.2,
			leases:   []Replica{rep("a", 10, fresh), rep("new", 0, time.Time{})},
			wantLive: []string{"a"}, wantStale: []string{"new"}, wantFair: 10},
		{name: "out of reach of the API server: never sheds", reachable: false, mine: 90, tolerance: 0.2,
			leases:   []Replica{rep("a", 90, fresh), rep("b", 0, fresh)},
			wantLive: []string{"a", "b"}, wantFair: 45},
		{name: "own count moved since the Lease: the live count decides", reachable: true, mine: 80, tolerance: 0.2,
			leases:   []Replica{rep("a", 50, fresh), rep("b", 50, fresh)},
			wantLive: []string{"a", "b"}, wantFair: 50, wantShed: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Compute(tt.leases, now, ttl)
			v.Reachable = tt.reachable
			var live []string
			for _, r := range v.Live {
				live = append(live, r.Name)
			}
			if !reflect.DeepEqual(live, tt.wantLive) || !reflect.DeepEqual(v.Stale, tt.wantStale) {
				t.Errorf("live %v stale %v, want %v and %v", live, v.Stale, tt.wantLive, tt.wantStale)
			}
			if got := v.FairShare(); got != tt.wantFair {
				t.Errorf("fair share %v, want %v", got, tt.wantFair)
			}
			if got := Excess(tt.mine, v, tt.tolerance); got != tt.wantShed {
				t.Errorf("excess %d, want %d", got, tt.wantShed)
			}
		})
	}
}

func TestToShed(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	// One stream each (Streams 0 counts as 1).
	streams := []Conn{
		{ID: 1, Opened: ago(time.Minute)},
		{ID: 2, Opened: ago(10 * time.Second)}, // just accepted
		{ID: 3, Opened: ago(time.Hour)},
		{ID: 4, Opened: ago(30 * time.Second)}, // exactly the minimum age
		{ID: 5, Opened: ago(time.Hour)},
	}
	// An Envoy on per-type streams: one connection of four, the oldest.
	envoy := append([]Conn{{ID: 6, Opened: ago(2 * time.Hour), Streams: 4}}, streams...)
	tests := []struct {
		name  string
		conns []Conn // streams when nil
		n     int
		want  []int64
	}{
		{name: "none asked", n: 0},
		{name: "the oldest first, ties by id", n: 2, want: []int64{3, 5}},
		{name: "never one just accepted", n: 10, want: []int64{3, 5, 1, 4}},
		{name: "an Envoy's four streams count as four", conns: envoy, n: 4, want: []int64{6}},
		{name: "a connection of several streams is taken while short of n", conns: envoy, n: 1, want: []int64{6}},
		{name: "the next one only while still short", conns: envoy, n: 5, want: []int64{6, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conns := streams
			if tt.conns != nil {
				conns = tt.conns
			}
			got := ToShed(conns, tt.n, now, 30*time.Second)
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ToShed(%d) = %v, want %v", tt.n, got, tt.want)
			}
		})
	}
}

func TestBudget(t *testing.T) {
	tests := []struct {
		name     string
		rate     float64
		elapsed  time.Duration
		carry    float64
		wantN    int
		wantLeft float64
	}{
		{name: "a second at 2/s", rate: 2, elapsed: time.Second, wantN: 2},
		{name: "a quarter second at 2/s carries half a stream", rate: 2, elapsed: 250 * time.Millisecond, wantLeft: 0.5},
		{name: "the carry completes a stream", rate: 2, elapsed: 250 * time.Millisecond, carry: 0.5, wantN: 1},
		{name: "a long pause saves no burst", rate: 2, elapsed: time.Minute, wantN: 3},
		{name: "rate 0 sheds nothing", rate: 0, elapsed: time.Second},
		{name: "a slow rate", rate: 0.5, elapsed: time.Second, wantLeft: 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, left := Budget(tt.rate, tt.elapsed, tt.carry)
			if n != tt.wantN || left != tt.wantLeft {
				t.Errorf("Budget = %d, %v; want %d, %v", n, left, tt.wantN, tt.wantLeft)
			}
		})
	}
}

func TestWithOwn(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	v := Compute([]Replica{{Name: "a", Clients: 10, Renewed: now}, {Name: "b", Clients: 0, Renewed: now}}, now, time.Minute)
	v.Reachable = true
	tests := []struct {
		name           string
		self           string
		mine, inFlight int
		wantOK         bool
		wantTotal      int
		wantExcess     int
	}{
		{name: "as published", self: "a", mine: 10, wantOK: true, wantTotal: 10, wantExcess: 4},
		{name: "after shedding 4 not yet counted by b: no more to shed", self: "a", mine: 6, inFlight: 4, wantOK: true, wantTotal: 10},
		{name: "without the shed clients the share would shrink and it would shed again", self: "a", mine: 6, wantOK: true, wantTotal: 6, wantExcess: 3},
		{name: "own Lease not among the live ones: no share", self: "c", mine: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := WithOwn(v, tt.self, tt.mine, tt.inFlight)
			if ok != tt.wantOK {
				t.Fatalf("ok %v, want %v", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			if got.Total != tt.wantTotal {
				t.Errorf("total %d, want %d", got.Total, tt.wantTotal)
			}
			if e := Excess(tt.mine, got, DefaultTolerance); e != tt.wantExcess {
				t.Errorf("excess %d, want %d", e, tt.wantExcess)
			}
		})
	}
	if v.Live[0].Clients != 10 || v.Total != 10 {
		t.Errorf("WithOwn changed the view it was given: %+v", v)
	}
}

// TestLend: while a peer is below the fair share minus the tolerance,
// those above the fair share let go of every client above it (only one
// in N of them lands on the short peer), never below the share; once no
// peer is under the band, nothing.
func TestLend(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	view := func(counts ...int) View {
		var reps []Replica
		for i, c := range counts {
			reps = append(reps, Replica{Name: string(rune('a' + i)), Clients: c, Renewed: now})
		}
		v := Compute(reps, now, time.Minute)
		v.Reachable = true
		return v
	}
	tests := []struct {
		name string
		v    View
		mine int // what a holds now; its entry in v when 0
		want int
	}{
		// Fair share 100, band 80 to 120: c lacks 40 up to the share, and
		// a third of what a and b shed lands on it.
		{name: "a restarted replica under the band: all above the share", v: view(120, 120, 60), want: 20},
		{name: "a fraction of a client above the share is kept", v: view(121, 120, 60), want: 20},
		// a's entry counts the clients it shed that peers do not show
		// yet (WithOwn): the share counts them, a holds 105 now.
		{name: "the clients in flight count in the share, not as a's", v: view(120, 120, 60), mine: 105, want: 5},
		{name: "never below the fair share", v: view(120, 120, 60), mine: 99},
		{name: "every peer within the band: nothing", v: view(110, 110, 80)},
		{name: "a peer just under the band", v: view(111, 110, 79), want: 11},
		{name: "at or below the fair share: nothing to lend", v: view(100, 140, 60)},
		{name: "only a itself under the band: nothing", v: view(60, 120, 120)},
		{name: "four replicas, one restarted", v: view(140, 130, 130, 0), want: 40},
		{name: "alone: nothing", v: view(100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mine := tt.mine
			if mine == 0 {
				mine = tt.v.Live[0].Clients
			}
			if got := Lend("a", mine, tt.v, 0.2); got != tt.want {
				t.Errorf("Lend = %d, want %d", got, tt.want)
			}
		})
	}
	blind := view(120, 120, 60)
	blind.Reachable = false
	if got := Lend("a", 120, blind, 0.2); got != 0 {
		t.Errorf("out of reach of the API server, Lend = %d, want 0", got)
	}
}

// TestSettled: a shed client stops counting as its old replica's once
// every live peer renewed its Lease ReconnectGrace after the shed, when
// it is in one of them, or after the settle window whatever the peers do.
func TestSettled(t *testing.T) {
	shed := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	after := func(d time.Duration) time.Time { return shed.Add(d) }
	settle := 10 * time.Second
	view := func(renewed ...time.Time) View {
		v := View{Live: []Replica{{Name: "a", Renewed: shed.Add(-time.Hour)}}, Reachable: true}
		for i, r := range renewed {
			v.Live = append(v.Live, Replica{Name: string(rune('b' + i)), Renewed: r})
		}
		return v
	}
	tests := []struct {
		name string
		now  time.Time
		v    View
		want bool
	}{
		{name: "just shed", now: after(time.Second), v: view(after(-time.Second), after(-2*time.Second))},
		{name: "a peer renewed before the client could reconnect", now: after(3 * time.Second),
			v: view(after(time.Second), after(2*time.Second))},
		{name: "one peer renewed since, the other not yet", now: after(5 * time.Second),
			v: view(after(4*time.Second), after(time.Second))},
		{name: "every peer renewed since", now: after(7 * time.Second), v: view(after(4*time.Second), after(2*time.Second)), want: true},
		{name: "a slow peer: the settle window ends it", now: after(settle + time.Millisecond),
			v: view(after(4*time.Second), after(-3*time.Second)), want: true},
		{name: "no peer: its own count holds it", now: after(time.Second), v: view(), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Settled(shed, tt.now, tt.v, "a", settle); got != tt.want {
				t.Errorf("Settled = %v, want %v", got, tt.want)
			}
		})
	}
}
