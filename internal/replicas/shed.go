package replicas

import (
	"sort"
	"time"
)

// Stream is one open xDS stream, as shedding chooses among them.
type Stream struct {
	ID     int64
	Opened time.Time
}

// ToShed picks up to n streams to close: only streams open for at least
// minAge (a client just accepted, perhaps just shed by a peer, must not
// be bounced again), the oldest first, the way a connection age limit
// would have closed them anyway.
func ToShed(streams []Stream, n int, now time.Time, minAge time.Duration) []int64 {
	if n <= 0 {
		return nil
	}
	old := make([]Stream, 0, len(streams))
	for _, s := range streams {
		if now.Sub(s.Opened) >= minAge {
			old = append(old, s)
		}
	}
	sort.Slice(old, func(i, j int) bool {
		if !old[i].Opened.Equal(old[j].Opened) {
			return old[i].Opened.Before(old[j].Opened)
		}
		return old[i].ID < old[j].ID
	})
	if len(old) > n {
		old = old[:n]
	}
	ids := make([]int64, len(old))
	for i, s := range old {
		ids[i] = s.ID
	}
	return ids
}

// Budget spreads shedding over time at rate streams per second: given
// the time since the last tick and the fraction of a stream left over
// from it, it returns how many streams may close now and the fraction to
// carry. A long pause between ticks (nothing to shed, the API server out
// of reach) allows at most one second's worth, so that it does not save
// up a burst.
func Budget(rate float64, elapsed time.Duration, carry float64) (n int, left float64) {
	if rate <= 0 || elapsed <= 0 {
		return 0, carry
	}
	avail := carry + rate*elapsed.Seconds()
	n = int(avail)
	left = avail - float64(n)
	if most := int(rate + 1); n > most {
		n, left = most, 0
	}
	return n, left
}
