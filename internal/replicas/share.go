// Package replicas lets the replicas of one Deployment see how many xDS
// clients each of them holds: each publishes its count in a Lease of its
// own namespace and reads everyone's, so that a replica can tell its fair
// share of the clients (total / live replicas) from its own count.
package replicas

import (
	"math"
	"slices"
	"sort"
	"time"
)

// Replica is what one replica's Lease says.
type Replica struct {
	Name    string
	Clients int
	Renewed time.Time
}

// View is the replicas' counts as one replica sees them at one time.
type View struct {
	// Live are the replicas whose Lease was renewed within the liveness
	// window, by name; Stale the names of the others, which count for
	// nothing (a crashed replica's clients have reconnected elsewhere).
	Live  []Replica
	Stale []string
	// Total is the sum of the live replicas' clients.
	Total int
	// Reachable is false when this replica could not renew its own Lease
	// at its last try: the view is then the last one it could trust, and
	// shedding is off (a replica cut off from the API server cannot tell
	// a dead peer from its own blindness).
	Reachable bool
}

// FairShare is the clients each live replica would hold if they were
// spread evenly; 0 with no live replica.
func (v View) FairShare() float64 {
	if len(v.Live) == 0 {
		return 0
	}
	return float64(v.Total) / float64(len(v.Live))
}

// Compute builds the view at now from the Leases read: a Lease renewed
// more than ttl before now (or never) is stale.
func Compute(leases []Replica, now time.Time, ttl time.Duration) View {
	var v View
	for _, r := range leases {
		if r.Renewed.IsZero() || now.Sub(r.Renewed) > ttl {
			v.Stale = append(v.Stale, r.Name)
			continue
		}
		v.Live = append(v.Live, r)
		v.Total += r.Clients
	}
	sort.Slice(v.Live, func(i, j int) bool { return v.Live[i].Name < v.Live[j].Name })
	sort.Strings(v.Stale)
	return v
}

// WithOwn is the view as this replica (self) should judge it now: its
// own Lease's count replaced by what it holds now plus the clients it
// shed recently (inFlight). Peers' Leases lag by up to a renew period,
// and a shed client may not be in any of them yet: without counting it
// here the total would shrink as this replica sheds, its fair share with
// it, and it would shed more than its excess. Counting a client twice
// for a moment errs the safe way: it sheds a little less, later. ok is
// false when self is not among the live replicas (its Lease not written
// yet, or judged stale), when no share can be told.
func WithOwn(v View, self string, mine, inFlight int) (View, bool) {
	i := slices.IndexFunc(v.Live, func(r Replica) bool { return r.Name == self })
	if i < 0 {
		return v, false
	}
	live := slices.Clone(v.Live)
	v.Total += mine + inFlight - live[i].Clients
	live[i].Clients = mine + inFlight
	v.Live = live
	return v, true
}

// Excess is how many of its clients a replica holding mine should let
// go: those above fair share × (1 + tolerance), rounded up to whole
// streams. It is 0 when the view cannot be trusted, when this replica
// is the only live one, or within the tolerance; the tolerance keeps
// replicas from passing clients back and forth over a handful of
// streams.
func Excess(mine int, v View, tolerance float64) int {
	if !v.Reachable || len(v.Live) < 2 || tolerance < 0 {
		return 0
	}
	limit := v.FairShare() * (1 + tolerance)
	over := float64(mine) - limit
	if over <= 0 {
		return 0
	}
	return int(math.Ceil(over - 1e-9))
}

// Lend is how many clients a replica should let go, beyond its Excess,
// while a peer holds fewer than fair share × (1 - tolerance): every
// client it holds above the fair share. Shedding the excess alone stops
// once every replica is under its upper limit, and a replica restarted
// among two full ones would stay at fair share × (1 - 2 × tolerance).
// Lending only the peer's shortfall would not do either: a shed client
// reconnects through the Service to any ready replica, this one
// included, so only one in N (the live replicas) lands on the short
// peer, and its shortfall up to the fair share, times N, split among the
// replicas above the share, is at least what each holds above it (the
// clients above the share are those below it). So each lends down to
// the fair share, never below, at the shed rate; the clients that land
// on replicas above the share count in their next view and are lent
// again once old enough; and lending stops as soon as the view shows no
// peer under the band, which leaves the last round's clients in flight
// to take the peer towards the fair share rather than just over the
// band's edge. v is WithOwn's view (the fair share counts the clients in
// flight), self this replica's name and mine what it holds now. It is 0
// when the view cannot be trusted or with one replica.
func Lend(self string, mine int, v View, tolerance float64) int {
	if !v.Reachable || len(v.Live) < 2 || tolerance < 0 {
		return 0
	}
	fair := v.FairShare()
	low := fair * (1 - tolerance)
	if !slices.ContainsFunc(v.Live, func(r Replica) bool { return r.Name != self && float64(r.Clients) < low-1e-9 }) {
		return 0
	}
	return max(int(math.Floor(float64(mine)-fair+1e-9)), 0)
}

// ReconnectGrace is how long a shed client may take to reconnect and be
// counted by the replica it lands on: grpc-go reconnects at once after a
// stream that got a response, within its first backoff (1 s ± 20 %)
// otherwise; the rest covers clocks a little apart.
const ReconnectGrace = 2 * time.Second

// Settled says whether a client shed at shedAt is counted by now in the
// Lease of whichever replica it reconnected to: every live peer (self
// counts its own at once) renewed its Lease ReconnectGrace after the
// shed or later, or settle has passed since (a peer whose renewals are
// slow). Until then the shedding replica still counts it as its own (see
// WithOwn); after, counting it too would count it twice, inflating the
// total and so the fair share, and a replica just above the share would
// lend nothing more.
func Settled(shedAt, now time.Time, v View, self string, settle time.Duration) bool {
	if now.Sub(shedAt) > settle {
		return true
	}
	counted := shedAt.Add(ReconnectGrace)
	for _, r := range v.Live {
		if r.Name != self && r.Renewed.Before(counted) {
			return false
		}
	}
	return true
}
