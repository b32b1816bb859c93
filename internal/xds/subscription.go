package xds

import (
	"slices"
	"strings"
)

// subscription is what a stream subscribes to of one type and what it
// was last sent of it, by go-control-plane's rules (its
// pkg/server/stream/v3 Subscription), which meshpilot's clients have
// been served by:
//
//   - Legacy wildcard: a first request that names nothing subscribes to
//     everything, and so do the requests after it that name nothing,
//     until one names something; from then on only "*" means
//     everything.
//   - State of the world: a request replaces the subscription; names it
//     drops leave what the stream was sent unless "*" is among them.
//   - Delta: requests add and remove names; a name unsubscribed while
//     subscribed under the wildcard is marked "" (the client is told
//     whether it still exists), any other is forgotten.
//
// Not safe for concurrent use: the stream serialises requests, and a
// watch reads its type's subscription only while no request or send of
// that type can change it (stream.go).
type subscription struct {
	// names are the subscribed names, sorted and distinct, without "*".
	names    []string
	wildcard bool
	// legacy: no request named anything yet.
	legacy bool
	// returned is what the stream was sent (name to version), or for
	// delta what the client said it holds when it reconnected; nil
	// while sent says it.
	returned versionMap
	// sent stands for returned when the latest response's entries say
	// the same (every covered name exists and nothing else was
	// returned, as for a converged gRPC client): it is the response's
	// holds, the very slice the client state holds (clients.go), so
	// that the stream keeps no name/version list of its own. Sorted by
	// name.
	sent []*entry

	// before is what the stream was sent up to the latest response
	// (returned or sent, as they were), kept from that response's send
	// until the client answers it: a NACK goes back to it. nil while no
	// response awaits an answer.
	before *heldState
	// rejected is what the client would hold had it accepted the
	// response it rejected last: a watch does not answer with the same
	// again, so that a NACKed response is not resent until something in
	// it changes (as go-control-plane's caches and istiod do). nil once
	// any other response is sent.
	rejected *heldState
}

// heldState is a subscription's record of what the stream was sent.
type heldState struct {
	returned versionMap
	sent     []*entry
}

// same: the state says exactly m's names and versions.
func (h *heldState) same(m versionMap) bool {
	if h.sent != nil {
		return sameVersions(m, h.sent)
	}
	return slices.Equal(h.returned, m)
}

const wildcardName = "*"

func newSotwSubscription(names, sorted []string) subscription {
	s := subscription{wildcard: len(names) == 0, legacy: true}
	s.setSotw(names, sorted)
	return s
}

// setSotw applies a state-of-the-world request's names. sorted, when
// not nil, is names sorted and distinct without "*", never modified:
// the client state's (clients.go), which the subscription then shares
// rather than keep a copy of its own.
func (s *subscription) setSotw(names, sorted []string) {
	if s.legacy {
		if len(names) == 0 {
			return
		}
		s.legacy = false
	}
	explicit := slices.Contains(names, wildcardName)
	s.names = subscribedNames(s.names, names, sorted)
	if !explicit {
		s.returned.keepOnly(s.has)
		// A copy when names went, as the client state lets go of them
		// (TypeSync.letGoUnsubscribed): the list is shared.
		s.sent = subscribedOnly(s.sent, s.names)
	}
	s.wildcard = explicit
}

func newDeltaSubscription(subscribe, unsubscribe []string, initial map[string]string) subscription {
	s := subscription{wildcard: len(subscribe) == 0, legacy: true, returned: versionMapOf(initial)}
	s.updateDelta(subscribe, unsubscribe)
	if !s.wildcard {
		// What the client says it holds of names it does not subscribe
		// to is of no use, and would be kept for the stream's life.
		s.returned.keepOnly(s.has)
	}
	return s
}

// resubscribe applies the rule that a delta request's
// resource_names_subscribe is answered even for what the client holds
// (the incremental protocol's subscription rules): those names are
// forgotten, so that the watch sends them again, or says they do not
// exist.
func (s *subscription) resubscribe(subscribe []string) {
	var again []string
	for _, n := range subscribe {
		if n == wildcardName {
			continue
		}
		if _, ok := s.returnedVersion(n); ok {
			again = append(again, n)
		}
	}
	s.forget(again)
}

// updateDelta applies a delta request's subscribe and unsubscribe lists.
func (s *subscription) updateDelta(subscribe, unsubscribe []string) {
	if len(unsubscribe) > 0 {
		s.unshare()
	}
	if s.legacy {
		if len(subscribe) == 0 {
			return
		}
		s.legacy = false
	}
	added := false
	for _, n := range subscribe {
		if n == wildcardName {
			s.wildcard = true
		} else if !s.has(n) {
			s.names = append(s.names, n)
			added = true
		}
	}
	if added {
		slices.Sort(s.names)
		s.names = slices.Compact(s.names)
	}
	for _, n := range unsubscribe {
		if n == wildcardName {
			s.wildcard = false
			continue
		}
		i, ok := slices.BinarySearch(s.names, n)
		if ok && s.wildcard {
			s.returned.set(n, "")
		} else {
			s.returned.remove(n)
		}
		if ok {
			s.names = slices.Delete(s.names, i, i+1)
		}
	}
}

// sentResponse records a response's send: what it carries is what the
// stream was sent, until the client rejects it (nacked).
func (s *subscription) sentResponse(m versionMap, holds []*entry) {
	s.before = &heldState{returned: s.returned, sent: s.sent}
	s.rejected = nil
	s.setReturned(m, holds)
}

// acked: the client accepted the latest response.
func (s *subscription) acked() { s.before = nil }

// nacked: the client rejected the latest response. What it holds is
// what it held before that response; the rejected state is remembered
// so that the same is not sent again.
func (s *subscription) nacked() {
	if s.before == nil {
		return
	}
	// Names and versions only: what the client rejected is not held,
	// and its entries may leave the cache.
	s.rejected = &heldState{returned: s.returnedMap()}
	s.returned, s.sent = s.before.returned, s.before.sent
	s.before = nil
}

// isRejected: a response that would make the stream's returned state m
// is the one the client rejected last.
func (s *subscription) isRejected(m versionMap) bool {
	return s.rejected != nil && s.rejected.same(m)
}

// forget drops names from what the stream was sent, so that the next
// watch answers them whether they changed or not: a cluster Envoy warms
// waits for its ClusterLoadAssignment, and a delta client that
// subscribes to a name again must be sent it again.
func (s *subscription) forget(names []string) {
	if len(names) == 0 {
		return
	}
	s.unshare()
	for _, n := range names {
		s.returned.remove(n)
	}
}

// setReturned makes what a response carries what the stream was sent:
// holds in place of m when they say the same.
func (s *subscription) setReturned(m versionMap, holds []*entry) {
	if sameVersions(m, holds) {
		s.returned, s.sent = nil, holds
		return
	}
	s.returned, s.sent = m, nil
}

// sameVersions: es names exactly m's names, in m's order, with m's
// versions.
func sameVersions(m versionMap, es []*entry) bool {
	if len(m) != len(es) || len(m) == 0 {
		return false
	}
	for i, e := range es {
		if m[i].name != e.name || m[i].version != e.version {
			return false
		}
	}
	return true
}

// unshare turns sent into returned, so that the stream lets go of the
// entries: before a delta request changes what was returned, and when
// the client rejects the response (what it rejected is not held,
// clients.go).
func (s *subscription) unshare() {
	if s.sent == nil {
		return
	}
	m := newVersionMapBuilder(len(s.sent))
	for _, e := range s.sent {
		m.add(e.name, e.version)
	}
	s.returned, s.sent = m.done(), nil
}

// returnedVersion is the version the stream was sent of name, and
// whether it was sent any.
func (s *subscription) returnedVersion(name string) (string, bool) {
	if s.sent == nil {
		return s.returned.get(name)
	}
	i, ok := slices.BinarySearchFunc(s.sent, name, func(e *entry, n string) int { return strings.Compare(e.name, n) })
	if !ok {
		return "", false
	}
	return s.sent[i].version, true
}

// eachReturned calls f with every name the stream was sent.
func (s *subscription) eachReturned(f func(name string)) {
	for _, p := range s.returned {
		f(p.name)
	}
	for _, e := range s.sent {
		f(e.name)
	}
}

// returnedMap is what the stream was sent as a versionMap.
func (s *subscription) returnedMap() versionMap {
	if s.sent == nil {
		return s.returned
	}
	c := *s
	c.unshare()
	return c.returned
}

func (s *subscription) has(name string) bool {
	_, ok := slices.BinarySearch(s.names, name)
	return ok
}

// subscribedNames returns names sorted and distinct without "*": prev when
// that is what it holds already (an ACK repeats its names), so that a
// stream keeps one copy of them, else sorted when given.
func subscribedNames(prev, names, sorted []string) []string {
	if slices.Equal(prev, names) {
		return prev
	}
	if sorted != nil && distinct(sorted) {
		if slices.Equal(prev, sorted) {
			return prev
		}
		return sorted
	}
	out := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == wildcardName })
	slices.Sort(out)
	out = slices.Compact(out)
	if slices.Equal(prev, out) {
		return prev
	}
	return slices.Clip(out)
}

// distinct: sorted holds no name twice.
func distinct(sorted []string) bool {
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return false
		}
	}
	return true
}
