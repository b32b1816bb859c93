package replicas_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/replicas"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// period is short enough that liveness (three periods) passes within a
// test, and long enough that a renewal (an API write, bounded by a
// period) and its way to the peers' caches fit in it on a busy machine,
// where 500 ms did not.
const period = 2 * time.Second

// liveness is how long a Lease counts after its renewal: three periods.
const liveness = 3 * period

type replica struct {
	pub     *replicas.Publisher
	clients atomic.Int64
	stop    func()
}

func start(t *testing.T, ns, name string, clients int) *replica {
	t.Helper()
	r := &replica{}
	r.clients.Store(int64(clients))
	pub, err := replicas.New(replicas.Options{Client: env.API, Namespace: ns, Name: name, Period: period,
		Clients: func() int { return int(r.clients.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	r.pub = pub
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); pub.Run(ctx) }()
	var once sync.Once
	r.stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(r.stop)
	return r
}

func describe(v replicas.View) string {
	s := fmt.Sprintf("reachable=%v total=%d stale=%v live=", v.Reachable, v.Total, v.Stale)
	for _, r := range v.Live {
		s += fmt.Sprintf("%s:%d ", r.Name, r.Clients)
	}
	return s
}

func counts(v replicas.View) map[string]int {
	m := map[string]int{}
	for _, r := range v.Live {
		m[r.Name] = r.Clients
	}
	return m
}

// livePeer writes a replica's Lease as another process would, labelled
// as the publishers label theirs, and renews it every period until the
// function it returns is called: a peer that runs, then crashes.
func livePeer(t *testing.T, ns, name string, clients int) (crash func()) {
	t.Helper()
	holder := name
	rt := metav1.NewMicroTime(time.Now())
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"app.kubernetes.io/name": "meshpilot", "app.kubernetes.io/component": "replica-clients"},
			Annotations: map[string]string{replicas.ClientsAnnotation: fmt.Sprint(clients)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &rt},
	}
	leases := env.Client.CoordinationV1().Leases(ns)
	if _, err := leases.Create(context.Background(), l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// A renewal that fails is a slow peer's: the next one follows.
			if cur, err := leases.Get(ctx, name, metav1.GetOptions{}); err == nil {
				rt := metav1.NewMicroTime(time.Now())
				cur.Spec.RenewTime = &rt
				_, _ = leases.Update(ctx, cur, metav1.UpdateOptions{})
			}
		}
	}()
	var once sync.Once
	crash = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(crash)
	return crash
}

// TestReplicasSeeEachOther: two publishers see each other's counts and
// their changes; a Lease that is not renewed stops counting after three
// periods; a stopped replica deletes its Lease and drops out at once;
// a Lease of the namespace without the labels (a leader election) is
// never read.
func TestReplicasSeeEachOther(t *testing.T) {
	ns := env.Namespace(t, nil)
	a := start(t, ns, "meshpilot-a", 30)
	b := start(t, ns, "meshpilot-b", 10)
	unlabelled := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "some-leader-election"}}
	if _, err := env.Client.CoordinationV1().Leases(ns).Create(context.Background(), unlabelled, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, r := range []*replica{a, b} {
		testenv.Eventually(t, "both counts", func() (bool, string) {
			v := r.pub.View()
			c := counts(v)
			return v.Reachable && len(c) == 2 && c["meshpilot-a"] == 30 && c["meshpilot-b"] == 10 && v.FairShare() == 20, describe(v)
		})
	}
	if got := replicas.Excess(30, a.pub.View(), 0.2); got != 6 {
		t.Errorf("a's excess with 30 of 40 over two replicas: %d, want 6", got)
	}

	b.clients.Store(50)
	testenv.Eventually(t, "b's new count at a", func() (bool, string) {
		v := a.pub.View()
		return counts(v)["meshpilot-b"] == 50 && v.Total == 80, describe(v)
	})

	// A peer that runs and then dies: counted while it renews its Lease
	// (it renews until a counts it, however long a busy machine takes to
	// show it), stale three periods after its last renewal, never a
	// share-taker again.
	crash := livePeer(t, ns, "meshpilot-crashed", 40)
	testenv.Eventually(t, "the peer counted while it renews", func() (bool, string) {
		v := a.pub.View()
		return len(v.Live) == 3 && v.Total == 120, describe(v)
	})
	crash()
	testenv.Eventually(t, "the crashed peer stale", func() (bool, string) {
		v := a.pub.View()
		return len(v.Live) == 2 && v.Total == 80 && len(v.Stale) == 1 && v.Stale[0] == "meshpilot-crashed", describe(v)
	})

	b.stop()
	if _, err := env.Client.CoordinationV1().Leases(ns).Get(context.Background(), "meshpilot-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("b's Lease after it stopped: %v, want NotFound", err)
	}
	testenv.Eventually(t, "b gone at a", func() (bool, string) {
		v := a.pub.View()
		c := counts(v)
		return len(c) == 1 && c["meshpilot-a"] == 30 && v.Total == 30, describe(v)
	})
}

// TestOutOfReach: a replica that cannot reach the API server says so and
// keeps counting its peers as they were, well past the liveness window,
// so it never sheds on a blind view; it renews again when the API server
// is back. It stops the package's API server, so it runs alone.
func TestOutOfReach(t *testing.T) {
	ns := env.Namespace(t, nil)
	a := start(t, ns, "meshpilot-a", 90)
	start(t, ns, "meshpilot-b", 10)
	testenv.Eventually(t, "both counts", func() (bool, string) {
		v := a.pub.View()
		return v.Reachable && len(v.Live) == 2, describe(v)
	})
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			env.StartAPIServer()
		}
	}()
	testenv.Eventually(t, "a out of reach", func() (bool, string) {
		v := a.pub.View()
		return !v.Reachable, describe(v)
	})
	// Past the liveness window, measured from the last contact (before
	// now), the peer still counts: the replica does not take its own
	// blindness for the peer's death.
	deadline := time.Now().Add(liveness + period)
	for time.Now().Before(deadline) {
		v := a.pub.View()
		if v.Reachable {
			break // the API server cannot be back: fail below
		}
		if len(v.Live) != 2 || v.Total != 100 {
			t.Fatalf("out of reach, the view changed: %s", describe(v))
		}
		if got := replicas.Excess(90, v, 0.2); got != 0 {
			t.Fatalf("out of reach, a would shed %d", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	testenv.Eventually(t, "a renews again and sees b", func() (bool, string) {
		v := a.pub.View()
		return v.Reachable && len(v.Live) == 2 && v.Total == 100, describe(v)
	})
}

// connSet is one replica's open client connections in the balancing
// tests.
type connSet struct {
	mu    sync.Mutex // guards conns
	conns []replicas.Conn
}

func (s *connSet) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *connSet) list() []replicas.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.conns)
}

// balancing runs a publisher and a balancer per replica, each starting
// with the given number of old client connections, on a real API
// server; a shed client reconnects at once to the replica land picks
// for it, as through a Service.
type balancing struct {
	sets   map[string]*connSet
	shedBy map[string]*atomic.Int64
	names  []string
}

func startBalancing(t *testing.T, start map[string]int, land func(from string) string) *balancing {
	t.Helper()
	ns := env.Namespace(t, nil)
	b := &balancing{sets: map[string]*connSet{}, shedBy: map[string]*atomic.Int64{}}
	var nextID atomic.Int64
	for name, n := range start {
		set := &connSet{}
		for range n {
			set.conns = append(set.conns, replicas.Conn{ID: nextID.Add(1), Opened: time.Now().Add(-time.Hour)})
		}
		b.sets[name], b.shedBy[name] = set, &atomic.Int64{}
		b.names = append(b.names, name)
	}
	slices.Sort(b.names)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for name, set := range b.sets {
		pub, err := replicas.New(replicas.Options{Client: env.API, Namespace: ns, Name: name, Period: period, Clients: set.count})
		if err != nil {
			t.Fatal(err)
		}
		bal := replicas.NewBalancer(replicas.BalancerOptions{
			View: pub.View, Self: name, Clients: set.count, Conns: set.list,
			Shed: func(ids []int64) int {
				set.mu.Lock()
				before := len(set.conns)
				set.conns = slices.DeleteFunc(set.conns, func(c replicas.Conn) bool { return slices.Contains(ids, c.ID) })
				n := before - len(set.conns)
				set.mu.Unlock()
				for range n {
					to := b.sets[land(name)]
					to.mu.Lock()
					to.conns = append(to.conns, replicas.Conn{ID: nextID.Add(1), Opened: time.Now()})
					to.mu.Unlock()
				}
				b.shedBy[name].Add(int64(n))
				return n
			},
			Tolerance: replicas.DefaultTolerance, Rate: 4, Settle: replicas.SettleFor(period),
		})
		wg.Go(func() { pub.Run(ctx) })
		wg.Go(func() { bal.Run(ctx) })
	}
	return b
}

func (b *balancing) counts() map[string]int {
	out := map[string]int{}
	for name, set := range b.sets {
		out[name] = set.count()
	}
	return out
}

func (b *balancing) String() string {
	s := ""
	for _, name := range b.names {
		s += fmt.Sprintf("%s holds %d (shed %d) ", name, b.sets[name].count(), b.shedBy[name].Load())
	}
	return s
}

// holds checks for several renew periods and settle windows that the
// counts stay as they are: no replica sheds any more.
func (b *balancing) holds(t *testing.T, ok func(map[string]int) bool) {
	t.Helper()
	deadline := time.Now().Add(6 * period)
	for time.Now().Before(deadline) {
		if !ok(b.counts()) {
			t.Fatalf("shedding went on after the shares were reached: %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBalanceConverges: replica a holds ten clients, b just started and
// holds none. Through their Leases in a real API server, a sheds its
// excess and, while b is under the band, down to its fair share (5 or 6
// of 10 over two: whether b's Lease shows 4 before a has shed the fifth),
// the shed clients reconnect to b (as through a Service to the replica
// that is not closing them), and nothing is shed after that, not even
// by b.
func TestBalanceConverges(t *testing.T) {
	b := startBalancing(t, map[string]int{"a": 10, "b": 0}, func(from string) string {
		if from == "a" {
			return "b"
		}
		return "a"
	})
	at := func(c map[string]int) bool { return (c["a"] == 6 || c["a"] == 5) && c["a"]+c["b"] == 10 }
	testenv.Eventually(t, "a between its fair share and its share plus tolerance", func() (bool, string) { return at(b.counts()), b.String() })
	// A fifth decided on b's Lease before it showed 4 may still be on
	// its way; past that, nothing moves.
	b.holds(t, at)
	final := b.counts()
	b.holds(t, func(c map[string]int) bool { return c["a"] == final["a"] && c["b"] == final["b"] })
}

// TestRestartedReplicaFillsUp: a and b hold 30 clients each, c has just
// restarted with none; a shed client lands on any of the three in turn,
// as kube-proxy spreads new connections, so a third of them come back.
// Shedding down to share plus tolerance alone would leave c at 12 of a
// fair 20 (24 each on a and b); a and b lend their clients above the
// share while c is under the band, until all three are within
// 20 x (1 ± 0.2), and then shed nothing more.
func TestRestartedReplicaFillsUp(t *testing.T) {
	var turn atomic.Int64
	b := startBalancing(t, map[string]int{"a": 30, "b": 30, "c": 0}, func(string) string {
		return []string{"a", "b", "c"}[turn.Add(1)%3]
	})
	inBand := func(c map[string]int) bool {
		for _, n := range c {
			if n < 16 || n > 24 {
				return false
			}
		}
		return c["a"]+c["b"]+c["c"] == 60
	}
	testenv.Eventually(t, "every replica within its share and the tolerance", func() (bool, string) { return inBand(b.counts()), b.String() })
	b.holds(t, inBand)
}
