package xds

import "time"

// SyncCounts counts, by type (its short name, or "other" for a type
// meshpilot does not serve), the open streams whose latest response of
// the type the client rejected (NACKed), and those whose latest response
// has gone unanswered for longer than staleAfter at now (STALE on
// /debug/syncz, and old enough not to be a response on its way: a
// client ACKs within milliseconds). It reads each stream's record under
// its lock, as /debug/syncz does, and allocates nothing per stream.
func (s *Server) SyncCounts(now time.Time, staleAfter time.Duration) (stale, nacked map[string]int) {
	stale, nacked = map[string]int{}, map[string]int{}
	for _, st := range s.streams.all() {
		st.mu.Lock()
		for _, ts := range st.types {
			switch syncStatus(ts.lastSent, ts.lastACK, ts.lastNACK) {
			case NACKed:
				nacked[ts.label]++
			case Stale:
				if now.Sub(ts.lastSent.Time) > staleAfter {
					stale[ts.label]++
				}
			}
		}
		st.mu.Unlock()
	}
	return stale, nacked
}
