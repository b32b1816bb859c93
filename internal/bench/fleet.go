package bench

import (
	"context"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// fleet runs the simulated clients, several streams to a connection
// (connGroups), and can restart one: a soak closes and reopens clients'
// streams as restarting workloads do.
type fleet struct {
	ctx    context.Context // ends every client
	addr   string          // meshpilot's xDS address
	groups connGroups
	errs   chan error     // a client's failure; ends the run
	wg     sync.WaitGroup // every client's goroutine
	dials  atomic.Int64   // TCP connections dialled, redials included

	mu    sync.Mutex    // guards stops and conns
	stops []func()      // per client id: ends its stream and waits for its goroutine
	conns []*sharedConn // per connection index; nil while none of its clients runs
}

// sharedConn is one connection and how many clients' streams use it.
type sharedConn struct {
	cc      *grpc.ClientConn
	streams int // guarded by fleet.mu
}

func newFleet(ctx context.Context, addr string, clients int, groups connGroups, errs chan error) *fleet {
	return &fleet{ctx: ctx, addr: addr, groups: groups, errs: errs,
		stops: make([]func(), clients), conns: make([]*sharedConn, groups.conns(clients))}
}

// connections is how many TCP connections the fleet has dialled so far.
func (f *fleet) connections() int64 { return f.dials.Load() }

// acquire returns the connection of client id, dialling it when none of
// its group's clients runs, and the function that gives it back: a
// connection closes with the last stream on it, so that with one stream
// per connection a restarted client reconnects, as a restarted workload
// does, and with several the others keep theirs.
func (f *fleet) acquire(id int) (grpc.ClientConnInterface, func(), error) {
	i := f.groups.conn(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	sc := f.conns[i]
	if sc == nil {
		cc, err := grpc.NewClient("passthrough:///"+f.addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)),
			grpc.WithContextDialer(f.dial))
		if err != nil {
			return nil, nil, err
		}
		sc = &sharedConn{cc: cc}
		f.conns[i] = sc
	}
	sc.streams++
	release := func() {
		f.mu.Lock()
		sc.streams--
		last := sc.streams == 0
		if last {
			f.conns[i] = nil
		}
		f.mu.Unlock()
		if last {
			sc.cc.Close()
		}
	}
	return sc.cc, release, nil
}

func (f *fleet) dial(ctx context.Context, addr string) (net.Conn, error) {
	f.dials.Add(1)
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// start runs cl on its group's connection until the fleet ends or cl is
// restarted.
func (f *fleet) start(cl *adsClient) error {
	cc, release, err := f.acquire(cl.id)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	f.wg.Go(func() {
		defer close(done)
		defer release()
		if err := cl.run(ctx, cc); err != nil {
			select {
			case f.errs <- err:
			default: // the run ends on the first failure
			}
		}
	})
	f.mu.Lock()
	f.stops[cl.id] = func() { cancel(); <-done }
	f.mu.Unlock()
	return nil
}

// restart ends the stream of client cl.id (and its connection, when no
// other client uses it) and runs cl, a new client with the same id, in
// its place.
func (f *fleet) restart(cl *adsClient) error {
	f.mu.Lock()
	stop := f.stops[cl.id]
	f.mu.Unlock()
	if stop != nil {
		stop()
	}
	return f.start(cl)
}

// wait waits for every client's goroutine; the fleet's context must have
// ended.
func (f *fleet) wait() { f.wg.Wait() }
