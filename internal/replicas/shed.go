package replicas

import (
	"sort"
	"time"
)

// Conn is one client connection, the unit shedding closes: closing it
// ends every xDS stream on it, and only a new connection reaches another
// replica through the Service.
type Conn struct {
	ID int64
	// Opened is when its newest stream opened.
	Opened time.Time
	// Streams is how many clients it counts for (one per xDS stream, as
	// the replica's count does); 0 counts as 1.
	Streams int
}

func (c Conn) weight() int { return max(c.Streams, 1) }

// ToShed picks connections to close for up to n clients: only those
// whose newest stream is at least minAge old (a client just accepted,
// perhaps just shed by a peer, must not be bounced again), the oldest
// first, the way a connection age limit would have closed them anyway.
// A connection of several streams (an Envoy with one stream per type) is
// taken while the count is short of n, so the last one may overshoot n
// by its streams less one, rather than be skipped forever.
func ToShed(conns []Conn, n int, now time.Time, minAge time.Duration) []int64 {
	if n <= 0 {
		return nil
	}
	old := make([]Conn, 0, len(conns))
	for _, c := range conns {
		if now.Sub(c.Opened) >= minAge {
			old = append(old, c)
		}
	}
	sort.Slice(old, func(i, j int) bool {
		if !old[i].Opened.Equal(old[j].Opened) {
			return old[i].Opened.Before(old[j].Opened)
		}
		return old[i].ID < old[j].ID
	})
	var ids []int64
	for _, c := range old {
		if n <= 0 {
			break
		}
		ids = append(ids, c.ID)
		n -= c.weight()
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
