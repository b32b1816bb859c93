package push

import (
	"context"
	"slices"
	"strconv"
	"strings"
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
	return model.Event{Kind: model.ServiceDeleted, Hostname: model.Hostname(h), NoEndpoints: true}
}

// emptiedEv: the service's last endpoints are gone (its slice deleted).
func emptiedEv(h string) model.Event {
	return model.Event{Kind: model.EndpointsChanged, Hostname: model.Hostname(h), NoEndpoints: true}
}

// createdEmptyEv: a service created (or changed) without endpoints.
func createdEmptyEv(h string) model.Event {
	return model.Event{Kind: model.ServiceChanged, Hostname: model.Hostname(h), NoEndpoints: true}
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

// TestRequestKeys: a service change touches its definition, its
// endpoints, their identities and its namespace's set of services; an
// endpoints change its endpoints, and their identities unless the event
// says they stayed the same; a configuration change its key; merging and
// cloning keep them.
func TestRequestKeys(t *testing.T) {
	var r, o, m Request
	r.Add(model.Event{Kind: model.ServiceChanged, Hostname: "a.ns1", Namespace: "ns1"}, time.Unix(1, 0))
	r.Add(model.Event{Kind: model.EndpointsChanged, Hostname: "b.ns2", Namespace: "ns2"}, time.Unix(1, 0))
	r.Add(model.Event{Kind: model.EndpointsChanged, Hostname: "d.ns2", Namespace: "ns2", SameServiceAccounts: true}, time.Unix(1, 0))
	o.Add(model.Event{Kind: model.ServiceDeleted, Hostname: "c.ns3", Namespace: "ns3"}, time.Unix(1, 0))
	o.Add(model.Event{Kind: model.EndpointsChanged, Hostname: "e.ns3", Namespace: "ns3"}, time.Unix(1, 0))
	o.Add(model.Event{Kind: model.EndpointsChanged, Hostname: "f.ns3", Namespace: "ns3", SameServiceAccounts: true}, time.Unix(1, 0))
	m.Add(model.Event{Kind: model.ConfigChanged, Config: model.MeshRetryKey}, time.Unix(1, 0))
	if m.IsEmpty() {
		t.Error("a request of a configuration change is empty")
	}
	r.Merge(o)
	r.Merge(m)
	c := r.Clone()
	delete(r.Namespaces, "ns1")
	delete(r.Configs, model.MeshRetryKey)
	var got []string
	c.Keys(func(k model.ConfigKey) { got = append(got, k.String()) })
	slices.Sort(got)
	want := []string{"Endpoints/a.ns1", "Endpoints/b.ns2", "Endpoints/c.ns3", "Endpoints/d.ns2", "Endpoints/e.ns3", "Endpoints/f.ns3",
		"MeshConfig/defaultHttpRetryPolicy", "Namespace/ns1", "Namespace/ns3", "Service/a.ns1", "Service/c.ns3",
		"ServiceAccounts/a.ns1", "ServiceAccounts/b.ns2", "ServiceAccounts/c.ns3", "ServiceAccounts/e.ns3"}
	if !slices.Equal(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
}

// TestServiceChangeCoversIdentities: once a service change of a host is
// merged, its identities are the service change's, and the host leaves
// ServiceAccounts as it leaves EndpointsOnly, whatever the order.
func TestServiceChangeCoversIdentities(t *testing.T) {
	epEv := model.Event{Kind: model.EndpointsChanged, Hostname: "a.ns", Namespace: "ns"}
	svcEv := model.Event{Kind: model.ServiceChanged, Hostname: "a.ns", Namespace: "ns"}
	var added Request
	added.Add(epEv, time.Unix(1, 0))
	added.Add(svcEv, time.Unix(2, 0))
	added.Add(epEv, time.Unix(3, 0))
	var merged, svc Request
	merged.Add(epEv, time.Unix(1, 0))
	svc.Add(svcEv, time.Unix(2, 0))
	merged.Merge(svc)
	for name, r := range map[string]Request{"added": added, "merged": merged} {
		if len(r.ServiceAccounts) != 0 || len(r.EndpointsOnly) != 0 || len(r.Services) != 1 {
			t.Errorf("%s: services %v, endpoints only %v, service accounts %v; want the service change alone",
				name, r.Services, r.EndpointsOnly, r.ServiceAccounts)
		}
	}
}

// step is what Run does at a time offset: it adds the events it took
// from its inbox (ev, which arrived then, or late, which arrived earlier
// and queued while a push ran), or nothing (tick: its timer fired), then
// asks whether a push is due. want lists the hostnames pushed at that step
// (nil: no push); start, when set, is the pushed request's Start.
type step struct {
	at    time.Duration
	ev    *model.Event
	late  []arrival
	tick  bool
	want  []string
	start *time.Duration
	nextD time.Duration // expected deadline after the step, -1 none
}

// arrival is an event and when it arrived.
type arrival struct {
	at time.Duration
	ev model.Event
}

func ev(e model.Event) *model.Event     { return &e }
func at(d time.Duration) *time.Duration { return &d }

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
				{at: 20 * ms, ev: ev(svcEv("c")), nextD: 100 * ms},
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
		{
			name:    "leading: a backlog handled after a slow push goes out at once, as one push",
			leading: true,
			steps: []step{
				{at: 0, ev: ev(epEv("a")), want: []string{"a"}, nextD: -1},
				// the push of a took 400ms; b, c, d queued meanwhile, each
				// DebounceAfter after the previous one
				{at: 400 * ms, late: []arrival{{150 * ms, epEv("b")}, {300 * ms, epEv("c")}, {390 * ms, svcEv("d")}},
					want: []string{"b", "c", "d"}, start: at(150 * ms), nextD: -1},
				// the window counts from when that push started
				{at: 450 * ms, late: []arrival{{420 * ms, epEv("e")}}, nextD: 500 * ms},
				{at: 500 * ms, tick: true, want: []string{"e"}, start: at(420 * ms), nextD: -1},
				{at: 700 * ms, late: []arrival{{520 * ms, epEv("f")}, {650 * ms, svcEv("f")}, {690 * ms, epEv("g")}},
					want: []string{"f", "g"}, start: at(520 * ms), nextD: -1},
			},
		},
		{
			name:    "leading: a backlog handled within DebounceAfter of the last push waits for its window",
			leading: true,
			steps: []step{
				{at: 0, ev: ev(epEv("a")), want: []string{"a"}, nextD: -1},
				{at: 50 * ms, late: []arrival{{10 * ms, epEv("b")}, {40 * ms, epEv("c")}}, nextD: 100 * ms},
				{at: 100 * ms, tick: true, want: []string{"b", "c"}, start: at(10 * ms), nextD: -1},
			},
		},
		{
			name: "trailing: the quiet period of a backlog counts from its arrival",
			steps: []step{
				{at: 0, ev: ev(epEv("a")), nextD: 100 * ms},
				{at: 100 * ms, tick: true, want: []string{"a"}, nextD: -1},
				// the push of a took 350ms; b and c queued meanwhile
				{at: 450 * ms, late: []arrival{{150 * ms, epEv("b")}, {300 * ms, epEv("c")}},
					want: []string{"b", "c"}, start: at(150 * ms), nextD: -1},
				{at: 700 * ms, late: []arrival{{620 * ms, epEv("d")}}, nextD: 720 * ms},
				{at: 720 * ms, tick: true, want: []string{"d"}, start: at(620 * ms), nextD: -1},
			},
		},
		{
			name:    "leading: an isolated removal is held, and goes out DebounceAfter later",
			leading: true,
			steps: []step{
				{at: 0, ev: ev(delEv("a")), nextD: 100 * ms},
				{at: 99 * ms, tick: true, nextD: 100 * ms},
				{at: 100 * ms, tick: true, want: []string{"a"}, nextD: -1},
				{at: 500 * ms, ev: ev(emptiedEv("b")), nextD: 600 * ms},
				{at: 600 * ms, tick: true, want: []string{"b"}, nextD: -1},
			},
		},
		{
			name:    "leading: a delete and its recreate are merged into one push",
			leading: true,
			steps: []step{
				{at: 0, ev: ev(epEv("x")), want: []string{"x"}, nextD: -1},
				{at: 500 * ms, ev: ev(delEv("a")), nextD: 600 * ms},
				{at: 540 * ms, ev: ev(svcEv("a")), nextD: 600 * ms},
				{at: 600 * ms, tick: true, want: []string{"a"}, start: at(500 * ms), nextD: -1},
			},
		},
		{
			name:    "leading: a replace with its slice: each removal holds the push for its own window",
			leading: true,
			steps: []step{
				{at: 0, ev: ev(delEv("a")), nextD: 100 * ms},
				{at: 80 * ms, ev: ev(createdEmptyEv("a")), nextD: 180 * ms},
				{at: 100 * ms, tick: true, nextD: 180 * ms},
				{at: 170 * ms, ev: ev(epEv("a")), nextD: 180 * ms},
				{at: 180 * ms, tick: true, want: []string{"a"}, start: at(0), nextD: -1},
			},
		},
		{
			name:    "leading: a service created without endpoints is no removal, unless its removal pends",
			leading: true,
			steps: []step{
				{at: 0, ev: ev(createdEmptyEv("a")), want: []string{"a"}, nextD: -1},
				{at: 50 * ms, ev: ev(delEv("b")), nextD: 150 * ms},
				// the window is not extended by a: no removal of a pends
				{at: 120 * ms, ev: ev(createdEmptyEv("a")), nextD: 150 * ms},
				{at: 150 * ms, tick: true, want: []string{"a", "b"}, nextD: -1},
				// the removal was pushed: b created again is no removal
				{at: 400 * ms, ev: ev(createdEmptyEv("b")), want: []string{"b"}, nextD: -1},
			},
		},
		{
			name:    "leading: while a removal is held the leading edge does not fire",
			leading: true,
			steps: []step{
				{at: 0, ev: ev(epEv("x")), want: []string{"x"}, nextD: -1},
				{at: 500 * ms, ev: ev(emptiedEv("a")), nextD: 600 * ms},
				{at: 520 * ms, ev: ev(epEv("b")), nextD: 600 * ms},
				{at: 560 * ms, ev: ev(epEv("a")), nextD: 600 * ms},
				{at: 600 * ms, tick: true, want: []string{"a", "b"}, nextD: -1},
				{at: 700 * ms, ev: ev(epEv("c")), want: []string{"c"}, nextD: -1},
			},
		},
		{
			name:    "leading: a removal within the window of the last push is held from when it was handled",
			leading: true,
			steps: []step{
				{at: 0, ev: ev(epEv("x")), want: []string{"x"}, nextD: -1},
				{at: 60 * ms, ev: ev(epEv("y")), nextD: 100 * ms},
				{at: 90 * ms, ev: ev(delEv("a")), nextD: 190 * ms},
				{at: 100 * ms, tick: true, nextD: 190 * ms},
				{at: 190 * ms, tick: true, want: []string{"a", "y"}, nextD: -1},
			},
		},
		{
			name:    "leading: a removal queued behind a slow push is held from when it was handled",
			leading: true,
			steps: []step{
				{at: 0, ev: ev(epEv("x")), want: []string{"x"}, nextD: -1},
				{at: 400 * ms, late: []arrival{{150 * ms, delEv("a")}, {200 * ms, epEv("b")}}, nextD: 500 * ms},
				{at: 450 * ms, ev: ev(svcEv("a")), nextD: 500 * ms},
				{at: 500 * ms, tick: true, want: []string{"a", "b"}, start: at(150 * ms), nextD: -1},
			},
		},
		{
			name:    "leading: a stream of removals holds a push for at most DebounceMax",
			leading: true,
			steps: []step{
				{at: 0, ev: ev(delEv("a")), nextD: 100 * ms},
				{at: 80 * ms, ev: ev(delEv("b")), nextD: 180 * ms},
				{at: 160 * ms, ev: ev(delEv("c")), nextD: 260 * ms},
				{at: 240 * ms, ev: ev(delEv("d")), nextD: 300 * ms},
				{at: 300 * ms, tick: true, want: []string{"a", "b", "c", "d"}, nextD: -1},
				// the next removal is held for a whole window again
				{at: 320 * ms, ev: ev(delEv("e")), nextD: 420 * ms},
				{at: 420 * ms, tick: true, want: []string{"e"}, nextD: -1},
			},
		},
		{
			name: "trailing: a removal is held DebounceAfter after it was handled",
			steps: []step{
				{at: 0, ev: ev(delEv("a")), nextD: 100 * ms},
				{at: 100 * ms, tick: true, want: []string{"a"}, nextD: -1},
				// queued behind a slow push: the quiet period is over, the
				// hold is not
				{at: 450 * ms, late: []arrival{{150 * ms, delEv("b")}}, nextD: 550 * ms},
				// DebounceMax from b's arrival is over too (450ms)
				{at: 500 * ms, ev: ev(svcEv("b")), nextD: 550 * ms},
				{at: 550 * ms, tick: true, want: []string{"b"}, start: at(150 * ms), nextD: -1},
			},
		},
		{
			name: "trailing: a removal near DebounceMax still gets its window",
			steps: []step{
				{at: 0, ev: ev(epEv("x")), nextD: 100 * ms},
				{at: 90 * ms, ev: ev(epEv("y")), nextD: 190 * ms},
				{at: 180 * ms, ev: ev(epEv("z")), nextD: 280 * ms},
				{at: 270 * ms, ev: ev(emptiedEv("a")), nextD: 370 * ms},
				{at: 300 * ms, tick: true, nextD: 370 * ms},
				{at: 370 * ms, tick: true, want: []string{"a", "x", "y", "z"}, nextD: -1},
			},
		},
	}
	t0 := time.Unix(5000, 0)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &state{opts: Options{DebounceAfter: 100 * ms, DebounceMax: 300 * ms, LeadingEdge: tc.leading}.withDefaults()}
			added := 0 // events added since the last push
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				var evs []timedEvent
				if s.ev != nil {
					evs = append(evs, timedEvent{*s.ev, now})
				}
				for _, a := range s.late {
					evs = append(evs, timedEvent{a.ev, t0.Add(a.at)})
				}
				if s.tick != (len(evs) == 0) {
					t.Fatalf("step %d: a step is either a tick or events", i)
				}
				st.add(now, evs)
				added += len(evs)
				got := st.tick(now)
				switch {
				case s.want == nil && got != nil:
					t.Fatalf("step %d: unexpected push %v %v", i, hosts(got.EndpointsOnly), hosts(got.Services))
				case s.want != nil && got == nil:
					t.Fatalf("step %d: no push, want %v", i, s.want)
				case got != nil:
					all := hosts(got.EndpointsOnly)
					all = append(all, hosts(got.Services)...)
					slices.Sort(all)
					if !slices.Equal(all, s.want) {
						t.Fatalf("step %d: pushed %v, want %v", i, all, s.want)
					}
					if got.Events != added {
						t.Fatalf("step %d: Events %d, want every event added since the last push: %d", i, got.Events, added)
					}
					added = 0
					if s.start != nil && !got.Start.Equal(t0.Add(*s.start)) {
						t.Fatalf("step %d: Start %v, want the earliest arrival %v", i, got.Start.Sub(t0), *s.start)
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
	if o.DebounceAfter != DefaultDebounceAfter || o.DebounceMax != DefaultDebounceMax || o.Clock == nil {
		t.Fatalf("defaults %+v", o)
	}
	o = Options{DebounceAfter: time.Second, DebounceMax: time.Millisecond}.withDefaults()
	if o.DebounceMax != time.Second {
		t.Fatalf("DebounceMax below DebounceAfter kept: %v", o.DebounceMax)
	}
}

// TestDebouncerRun drives the goroutine with the system clock and checks
// only what is delivered, never when: an event alone is pushed alone; a
// burst that queued while a push ran becomes exactly one push, whatever
// the timing (Run takes the whole inbox before it decides); and nothing
// is pushed twice or left behind: a later event is pushed alone.
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
			wantPush(t, recv(t, pushes), []string{"a"}, nil, 1)
			for _, h := range []string{"b", "c", "d"} {
				d.Handle(epEv(h))
			}
			d.Handle(svcEv("c"))
			close(release)
			wantPush(t, recv(t, pushes), []string{"b", "d"}, []string{"c"}, 4)
			d.Handle(epEv("z"))
			wantPush(t, recv(t, pushes), []string{"z"}, nil, 1)
		})
	}
}

// TestDebouncerRunHoldsRemovals: on the goroutine, a removal that opens a
// window is not pushed at once but DebounceAfter after it was handled,
// with the recreate that came meanwhile.
func TestDebouncerRunHoldsRemovals(t *testing.T) {
	const after = 100 * time.Millisecond
	t0 := time.Unix(5000, 0)
	clk := newManualClock(t0)
	pushes := make(chan Request, 10)
	d := NewDebouncer(Options{DebounceAfter: after, LeadingEdge: true, Clock: clk}, func(r Request) { pushes <- r })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); close(clk.done); <-done }()

	// awaitWait returns when Run waits for its timer, and until when.
	awaitWait := func() time.Time {
		t.Helper()
		select {
		case dl := <-clk.armed:
			clk.resume <- struct{}{}
			return dl
		case <-time.After(30 * time.Second):
			t.Fatal("Run never waited for its timer")
			return time.Time{}
		}
	}
	d.Handle(delEv("a"))
	if dl := awaitWait(); !dl.Equal(t0.Add(after)) || len(pushes) != 0 {
		t.Fatalf("after a removal: %d pushes, Run waits until %v; want none until %v", len(pushes), dl.Sub(t0), after)
	}
	clk.set(t0.Add(40 * time.Millisecond))
	d.Handle(svcEv("a"))
	if dl := awaitWait(); !dl.Equal(t0.Add(after)) || len(pushes) != 0 {
		t.Fatalf("after the recreate: %d pushes, Run waits until %v; want none until %v", len(pushes), dl.Sub(t0), after)
	}
	clk.fire(t0.Add(after))
	wantPush(t, recv(t, pushes), nil, []string{"a"}, 2)
}

// wantPush checks a request: exactly these hostnames and this many events.
func wantPush(t *testing.T, r Request, endpointsOnly, services []string, events int) {
	t.Helper()
	if got := hosts(r.EndpointsOnly); !slices.Equal(got, endpointsOnly) {
		t.Fatalf("pushed endpoints of %v, want %v (services %v, %d events)", got, endpointsOnly, hosts(r.Services), r.Events)
	}
	if got := hosts(r.Services); !slices.Equal(got, services) {
		t.Fatalf("pushed services %v, want %v (%d events)", got, services, r.Events)
	}
	if r.Events != events || r.Full {
		t.Fatalf("pushed %d events (full %v), want %d", r.Events, r.Full, events)
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

// simPush is one push of a simulated run: when it started and the
// indices of the events it carried.
type simPush struct {
	at     time.Time
	events []int
}

// slowPushRun runs a Debouncer on a manualClock against n events, one
// every interval (event i arrives at t0 + i*interval), while every push
// takes pushTook: the push function moves the clock on by pushTook and
// delivers the events that arrive meanwhile, as a registry would while a
// slow push runs. It returns the pushes once every event was pushed.
func slowPushRun(t *testing.T, opts Options, interval, pushTook time.Duration, n int) (t0 time.Time, pushes []simPush) {
	t.Helper()
	t0 = time.Unix(5000, 0)
	clk := newManualClock(t0)
	opts.Clock = clk
	arrival := func(i int) time.Time { return t0.Add(time.Duration(i) * interval) }
	// next is the next event to arrive. It is touched by the push function
	// (on Run's goroutine) and by the test while Run waits, never both at
	// once.
	next := 0
	var d *Debouncer
	deliver := func() {
		i := next
		next++ // before Handle: Run may take it at once
		clk.set(arrival(i))
		d.Handle(epEv("e" + strconv.Itoa(i)))
	}
	deliverUntil := func(until time.Time) {
		for next < n && !arrival(next).After(until) {
			deliver()
		}
	}
	pushed := 0
	allPushed := make(chan struct{})
	d = NewDebouncer(opts, func(r Request) {
		p := simPush{at: clk.Now()}
		for h := range r.EndpointsOnly {
			i, err := strconv.Atoi(strings.TrimPrefix(string(h), "e"))
			if err != nil {
				panic(err)
			}
			p.events = append(p.events, i)
		}
		slices.Sort(p.events)
		pushes = append(pushes, p)
		deliverUntil(p.at.Add(pushTook))
		clk.set(p.at.Add(pushTook))
		if pushed += r.Events; pushed == n {
			close(allPushed)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); close(clk.done); <-done }()

	deliver()
	for {
		select {
		case <-allPushed:
			return t0, pushes
		case dl := <-clk.armed:
			d.mu.Lock()
			waits := len(d.inbox) == 0 // else Run takes the inbox first
			d.mu.Unlock()
			clk.resume <- struct{}{}
			switch {
			case !waits:
			case next < n && !arrival(next).After(dl):
				deliver()
			default:
				clk.fire(dl)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("Run waits with nothing due after %d pushes, %d of %d events pushed", len(pushes), pushed, n)
		}
	}
}

// TestDebouncerSlowPushes: when pushes are slower than events arrive, the
// events that queued during a push are merged into the next one, so the
// lag (push start - event arrival) stays bounded however long the run.
// This is the scenario of a large mesh: pushes of 300 ms, a change every
// 150 ms, DebounceAfter 100 ms.
func TestDebouncerSlowPushes(t *testing.T) {
	const (
		ms       = time.Millisecond
		after    = 100 * ms
		pushTook = 300 * ms
		interval = 150 * ms
		n        = 200 // 30 s of changes
	)
	for _, leading := range []bool{true, false} {
		t.Run(map[bool]string{false: "trailing", true: "leading"}[leading], func(t *testing.T) {
			t0, pushes := slowPushRun(t, Options{DebounceAfter: after, DebounceMax: time.Second, LeadingEdge: leading}, interval, pushTook, n)
			arrival := func(i int) time.Time { return t0.Add(time.Duration(i) * interval) }
			pushedAt := make([]time.Time, n)
			var lags []time.Duration
			for k, p := range pushes {
				// No backlog: a push carries every event that had arrived
				// when it started and was not pushed yet.
				var want []int
				for i := range n {
					if pushedAt[i].IsZero() && !arrival(i).After(p.at) {
						want = append(want, i)
					}
				}
				if !slices.Equal(p.events, want) {
					t.Fatalf("push %d at %v carries events %v, want every event not yet pushed: %v",
						k, p.at.Sub(t0), p.events, want)
				}
				for _, i := range p.events {
					pushedAt[i] = p.at
					lag := p.at.Sub(arrival(i))
					if lag > pushTook+after {
						t.Fatalf("event %d (arrived at %v) pushed at %v: lag %v, over push time + DebounceAfter (%v)",
							i, arrival(i).Sub(t0), p.at.Sub(t0), lag, pushTook+after)
					}
					lags = append(lags, lag)
				}
			}
			slices.Sort(lags)
			t.Logf("%d events, %d pushes, lag median %v max %v", n, len(pushes), lags[len(lags)/2], lags[len(lags)-1])
		})
	}
}
