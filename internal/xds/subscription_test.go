package xds

import (
	"maps"
	"slices"
	"testing"
)

// TestSubscriptionRules: go-control-plane's subscription rules, which the
// stream loop keeps: legacy wildcard, explicit "*", what a request drops
// from what the stream was sent, delta subscribe and unsubscribe.
func TestSubscriptionRules(t *testing.T) {
	type step struct {
		names, unsubscribe []string // sotw: names alone
	}
	cases := []struct {
		name     string
		delta    bool
		initial  map[string]string // delta: initial_resource_versions
		returned map[string]string // sotw: sent before the last step
		steps    []step
		want     []string
		wildcard bool
		wantRet  map[string]string
	}{
		{name: "sotw first request empty: legacy wildcard", steps: []step{{}}, wildcard: true, wantRet: map[string]string{}},
		{name: "sotw legacy wildcard kept by empty requests", steps: []step{{}, {}}, wildcard: true, wantRet: map[string]string{}},
		{name: "sotw names end the legacy wildcard", steps: []step{{}, {names: []string{"b", "a", "a"}}, {}}, want: nil, wantRet: map[string]string{}},
		{name: "sotw named", steps: []step{{names: []string{"b", "a"}}}, want: []string{"a", "b"}, wantRet: map[string]string{}},
		{name: "sotw explicit wildcard", steps: []step{{names: []string{"*", "a"}}}, want: []string{"a"}, wildcard: true, wantRet: map[string]string{}},
		{name: "sotw dropped names leave what was sent", returned: map[string]string{"a": "1", "b": "2"},
			steps: []step{{names: []string{"a", "b"}}, {names: []string{"a"}}}, want: []string{"a"}, wantRet: map[string]string{"a": "1"}},
		{name: "sotw under the wildcard dropped names stay sent", returned: map[string]string{"a": "1", "b": "2"},
			steps: []step{{names: []string{"a", "b"}}, {names: []string{"*"}}}, wildcard: true, wantRet: map[string]string{"a": "1", "b": "2"}},
		{name: "delta first request empty: legacy wildcard", delta: true, steps: []step{{}}, wildcard: true, wantRet: map[string]string{}},
		{name: "delta unsubscribe ignored under the legacy wildcard", delta: true, initial: map[string]string{"a": "1"},
			steps: []step{{}, {unsubscribe: []string{"a"}}}, wildcard: true, wantRet: map[string]string{"a": "1"}},
		{name: "delta subscribe and unsubscribe", delta: true, initial: map[string]string{"a": "1", "c": "3"},
			steps: []step{{names: []string{"c", "a", "b"}}, {unsubscribe: []string{"a"}, names: []string{"d"}}}, want: []string{"b", "c", "d"}, wantRet: map[string]string{"c": "3"}},
		{name: "delta unsubscribed under the wildcard: marked", delta: true, initial: map[string]string{"a": "1"},
			steps: []step{{names: []string{"*", "a"}}, {unsubscribe: []string{"a"}}}, wildcard: true, wantRet: map[string]string{"a": ""}},
		{name: "delta unsubscribe the wildcard", delta: true,
			steps: []step{{names: []string{"*", "a"}}, {unsubscribe: []string{"*"}}}, want: []string{"a"}, wantRet: map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s subscription
			for i, st := range c.steps {
				switch {
				case c.delta && i == 0:
					s = newDeltaSubscription(st.names, st.unsubscribe, maps.Clone(c.initial))
				case c.delta:
					s.updateDelta(st.names, st.unsubscribe)
				case i == 0:
					s = newSotwSubscription(st.names, nil)
				default:
					s.setSotw(st.names, nil)
				}
				if !c.delta && i == len(c.steps)-2 && c.returned != nil {
					s.returned = versionMapOf(c.returned)
				}
			}
			if !slices.Equal(s.names, c.want) || s.wildcard != c.wildcard || !maps.Equal(s.returned.asMap(), c.wantRet) {
				t.Fatalf("names %v wildcard %v returned %v, want %v %v %v", s.names, s.wildcard, s.returned, c.want, c.wildcard, c.wantRet)
			}
		})
	}
}

// asMap is m as a map, for comparisons.
func (m versionMap) asMap() map[string]string {
	out := make(map[string]string, len(m))
	for _, e := range m {
		out[e.name] = e.version
	}
	return out
}
