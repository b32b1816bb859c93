package push

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/model"
)

func svcEv(h string) model.Event {
	return model.Event{Kind: model.ServiceChanged, Hostname: model.Hostname(h)}
}
func epEv(h string) model.Event {
	return model.Event{Kind: model.EndpointsChanged, Hostname: model.Hostname(h)}
}
func delEv(h string) model.Event {
	return model.Event{Kind: model.ServiceDeleted, Hostname: model.Hostname(h)}
}

func hosts(m map[model.Hostname]struct{}) []string {
	var out []string
	for h := range m {
		out = append(out, string(h))
	}
	slices.Sort(out)
	return out
}

func TestRequestAddMerge(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r Request
	if !r.IsEmpty() {
		t.Fatal("zero request not empty")
	}
	r.Add(epEv("a"), t0.Add(2))
	r.Add(epEv("b"), t0.Add(1))
	r.Add(svcEv("b"), t0.Add(3))
	r.Add(epEv("b"), t0.Add(4)) // b stays a service change
	r.Add(delEv("c"), t0.Add(5))
	if got := hosts(r.EndpointsOnly); !slices.Equal(got, []string{"a"}) {
		t.Errorf("EndpointsOnly = %v", got)
	}
	if got := hosts(r.Services); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("Services = %v", got)
	}
	if r.Events != 5 || !r.Start.Equal(t0.Add(1)) {
		t.Errorf("Events %d Start %v", r.Events, r.Start)
	}

	var o Request
	o.Add(epEv("c"), t0)
	o.Add(svcEv("a"), t0)
	o.Add(epEv("d"), t0)
	o.Full = true
	r.Merge(o)
	if got := hosts(r.EndpointsOnly); !slices.Equal(got, []string{"d"}) {
		t.Errorf("merged EndpointsOnly = %v", got)
	}
	if got := hosts(r.Services); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("merged Services = %v", got)
	}
	if !r.Full || r.Events != 8 || !r.Start.Equal(t0) {
		t.Errorf("merged Full %v Events %d Start %v", r.Full, r.Events, r.Start)
	}
	c := r.Clone()
	delete(c.Services, "a")
	if _, ok := r.Services["a"]; !ok {
		t.Error("Clone shares maps")
	}
}

// step is one input to the debounce state: an event at a time offset, or
// a tick at a time offset; want lists the hostnames pushed at that step
// (nil: no push).
type step struct {
	at    time.Duration
	ev    *model.Event
	want  []string
	tick  bool
	nextD time.Duration // expected deadline after the step, -1 none
}

func ev(e model.Event) *model.Event { return &e }

func TestDebounceState(t *testing.T) {
	const ms = time.Millisecond
	cases := []struct {
		name    string
		leading bool
		steps   []step
	}{
		{
			name: "trailing: single event waits for the quiet period",
			steps: []step{
				{at: 0, ev: ev(epEv("a")), nextD: 100 * ms},
				{at: 99 * ms, tick: true, nextD: 100 * ms},
				{at: 100 * ms, tick: true, want: []string{"a"}, nextD: -1},
			},
		},
		{
			name: "trailing: a burst is merged and the quiet period restarts",
			steps: []step{
				{at: 0, ev: ev(epEv("a")), nextD: 100 * ms},
				{at: 50 * ms, ev: ev(epEv("b")), nextD: 150 * ms},
				{at: 140 * ms, ev: ev(svcEv("a")), nextD: 240 * ms},
				{at: 239 * ms, tick: true, nextD: 240 * ms},
				{at: 240 * ms, tick: true, want: []string{"a", "b"}, nextD: -1},
			},
		},
		{
			name: "trailing: a steady stream is pushed at DebounceMax",
			steps: []step{
				{at: 0, ev: ev(epEv("a")), nextD: 100 * ms},
				{at: 90 * ms, ev: ev(epEv("b")), nextD: 190 * ms},
				{at: 180 * ms, ev: ev(epEv("c")), nextD: 280 * ms},
				{at: 270 * ms, ev: ev(epEv("d")), nextD: 300 * ms},
				{at: 300 * ms, tick: true, want: []string{"a", "b", "c", "d"}, nextD: -1},
				{at: 350 * ms, ev: ev(epEv("e")), nextD: 450 * ms},
			},
		},
		{
			name:    "leading: an isolated event goes out at once",
			leading: true,
			steps: []step{
				{at: 0, ev: ev(epEv("a")), want: []string{"a"}, nextD: -1},
				{at: 500 * ms, ev: ev(epEv("b")), want: []string{"b"}, nextD: -1},
				{at: 600 * ms, ev: ev(epEv("c")), want: []string{"c"}, nextD: -1},
			},
		},
		{
			name:    "leading: the rest of a burst is merged after the first",
			leading: true,
			steps: []step{
				{at: 0, ev: ev(epEv("a")), want: []string{"a"}, nextD: -1},
				{at: 10 * ms, ev: ev(epEv("b")), nextD: 100 * ms},
				{at: 20 * ms, ev: ev(delEv("c")), nextD: 100 * ms},
				{at: 60 * ms, tick: true, nextD: 100 * ms},
				{at: 100 * ms, tick: true, want: []string{"b", "c"}, nextD: -1},
				// within DebounceAfter of the last push: merged
				{at: 130 * ms, ev: ev(epEv("d")), nextD: 200 * ms},
				{at: 150 * ms, ev: ev(epEv("e")), nextD: 200 * ms},
				{at: 200 * ms, tick: true, want: []string{"d", "e"}, nextD: -1},
				// DebounceAfter after the last push: at once again
				{at: 320 * ms, ev: ev(epEv("f")), want: []string{"f"}, nextD: -1},
			},
		},
		{
			name:    "leading: a steady stream is pushed once per DebounceAfter",
			leading: true,
			steps: []step{
				{at: 0, ev: ev(epEv("a")), want: []string{"a"}, nextD: -1},
				{at: 50 * ms, ev: ev(epEv("b")), nextD: 100 * ms},
				{at: 100 * ms, tick: true, want: []string{"b"}, nextD: -1},
				{at: 150 * ms, ev: ev(epEv("c")), nextD: 200 * ms},
				{at: 200 * ms, tick: true, want: []string{"c"}, nextD: -1},
				{at: 250 * ms, ev: ev(epEv("d")), nextD: 300 * ms},
				{at: 290 * ms, ev: ev(epEv("e")), nextD: 300 * ms},
				{at: 300 * ms, tick: true, want: []string{"d", "e"}, nextD: -1},
				// a change waits at most DebounceAfter, never DebounceMax
				{at: 350 * ms, ev: ev(epEv("f")), nextD: 400 * ms},
				{at: 400 * ms, tick: true, want: []string{"f"}, nextD: -1},
				{at: 500 * ms, ev: ev(epEv("g")), want: []string{"g"}, nextD: -1},
			},
		},
	}
	t0 := time.Unix(5000, 0)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &state{opts: Options{DebounceAfter: 100 * ms, DebounceMax: 300 * ms, LeadingEdge: tc.leading}.withDefaults()}
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				var got *Request
				if s.ev != nil {
					got = st.event(now, *s.ev)
				} else {
					got = st.tick(now)
				}
				switch {
				case s.want == nil && got != nil:
					t.Fatalf("step %d: unexpected push %v", i, hosts(got.EndpointsOnly))
				case s.want != nil && got == nil:
					t.Fatalf("step %d: no push, want %v", i, s.want)
				case got != nil:
					all := hosts(got.EndpointsOnly)
					all = append(all, hosts(got.Services)...)
					slices.Sort(all)
					if !slices.Equal(all, s.want) {
						t.Fatalf("step %d: pushed %v, want %v", i, all, s.want)
					}
					if got.Events < len(s.want) {
						t.Fatalf("step %d: Events %d", i, got.Events)
					}
				}
				dl := st.deadline()
				if s.nextD < 0 {
					if !dl.IsZero() {
						t.Fatalf("step %d: deadline %v, want none", i, dl.Sub(t0))
					}
				} else if !dl.Equal(t0.Add(s.nextD)) {
					t.Fatalf("step %d: deadline %v, want %v", i, dl.Sub(t0), s.nextD)
				}
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	o := Options{}.withDefaults()
	if o.DebounceAfter != DefaultDebounceAfter || o.DebounceMax != DefaultDebounceMax || o.Now == nil {
		t.Fatalf("defaults %+v", o)
	}
	o = Options{DebounceAfter: time.Second, DebounceMax: time.Millisecond}.withDefaults()
	if o.DebounceMax != time.Second {
		t.Fatalf("DebounceMax below DebounceAfter kept: %v", o.DebounceMax)
	}
}

// TestDebouncerRun drives the goroutine with real time and checks only
// what is delivered, never when: every event reaches a push, each exactly
// once, and a burst sent while pushes are blocked is merged.
func TestDebouncerRun(t *testing.T) {
	for _, leading := range []bool{false, true} {
		t.Run(map[bool]string{false: "trailing", true: "leading"}[leading], func(t *testing.T) {
			pushes := make(chan Request, 100)
			release := make(chan struct{})
			first := true
			d := NewDebouncer(Options{DebounceAfter: 5 * time.Millisecond, DebounceMax: 20 * time.Millisecond, LeadingEdge: leading}, func(r Request) {
				pushes <- r
				if first {
					first = false
					<-release // hold the first push while a burst arrives
				}
			})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { d.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()

			d.Handle(epEv("a"))
			r1 := recv(t, pushes)
			if got := hosts(r1.EndpointsOnly); !slices.Equal(got, []string{"a"}) {
				t.Fatalf("first push %v", got)
			}
			for _, h := range []string{"b", "c", "d"} {
				d.Handle(epEv(h))
			}
			d.Handle(svcEv("c"))
			close(release)
			seen := map[model.Hostname]struct{}{}
			events := 0
			for events < 4 {
				r := recv(t, pushes)
				maps.Copy(seen, r.EndpointsOnly)
				maps.Copy(seen, r.Services)
				events += r.Events
			}
			if events != 4 || len(seen) != 3 {
				t.Fatalf("events %d seen %v", events, seen)
			}
			select {
			case r := <-pushes:
				t.Fatalf("extra push %+v", r)
			default:
			}
		})
	}
}

func recv(t *testing.T, ch <-chan Request) Request {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no push within 10s")
		return Request{}
	}
}
