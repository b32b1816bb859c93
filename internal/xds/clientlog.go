package xds

import (
	"strconv"
	"sync"
	"time"
)

// clientLogEvery is how often the same client's refusals are logged: a
// client refused for what it sends sends it again on every reconnect
// (grpc-go backs off to two minutes at most), and one line per client
// says as much as one per attempt.
const clientLogEvery = 10 * time.Minute

// clientLogMax bounds how many clients a clientLog remembers, so that
// clients inventing a new node id each time cannot grow it: beyond it,
// new clients share one line per interval.
const clientLogMax = 4096

// logIDMax bounds a node id as logged and remembered: a refused node
// may carry an id as long as it likes.
const logIDMax = 256

// clientLog decides which of a client's repeated events to log: the
// first, then one per interval, each saying how many went unlogged.
type clientLog struct {
	every time.Duration
	max   int

	mu   sync.Mutex // guards last
	last map[string]*clientLogState
}

type clientLogState struct {
	at       time.Time
	unlogged int // events since the last line
}

// othersKey stands for the clients a full clientLog cannot tell apart.
const othersKey = "\x00others"

func newClientLog(every time.Duration, max int) *clientLog {
	return &clientLog{every: every, max: max, last: map[string]*clientLogState{}}
}

// event records one event of a client and says whether to log it, and
// how many of its events since the last line went unlogged. id is what
// logID made of the node id.
func (l *clientLog) event(id string, now time.Time) (ok bool, unlogged int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.last[id]
	if st == nil {
		if len(l.last) >= l.max {
			l.prune(now)
		}
		if len(l.last) >= l.max {
			id = othersKey
			st = l.last[id]
		}
		if st == nil {
			l.last[id] = &clientLogState{at: now}
			return true, 0
		}
	}
	if now.Sub(st.at) < l.every {
		st.unlogged++
		return false, 0
	}
	unlogged = st.unlogged
	st.at, st.unlogged = now, 0
	return true, unlogged
}

// prune forgets the clients whose last line is older than the interval:
// their next event is logged anyway. l.mu is held.
func (l *clientLog) prune(now time.Time) {
	for id, st := range l.last {
		if id != othersKey && now.Sub(st.at) >= l.every {
			delete(l.last, id)
		}
	}
}

// logID is a node id fit to log and remember: at most logIDMax bytes,
// the length of the rest said.
func logID(id string) string {
	if len(id) <= logIDMax {
		return id
	}
	return id[:logIDMax] + "...(" + strconv.Itoa(len(id)) + " bytes)"
}
