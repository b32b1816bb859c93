package bench

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// fleet runs the simulated clients, each on a connection of its own, and
// can restart one: a soak closes and reopens clients' streams as
// restarting workloads do.
type fleet struct {
	ctx  context.Context // ends every client
	addr string          // meshpilot's xDS address
	errs chan error      // a client's failure; ends the run
	wg   sync.WaitGroup  // every client's goroutine

	mu    sync.Mutex // guards stops
	stops []func()   // per client id: ends its stream and connection and waits for its goroutine
}

func newFleet(ctx context.Context, addr string, clients int, errs chan error) *fleet {
	return &fleet{ctx: ctx, addr: addr, errs: errs, stops: make([]func(), clients)}
}

// start dials meshpilot and runs cl until the fleet ends or cl is
// restarted.
func (f *fleet) start(cl *adsClient) error {
	cc, err := grpc.NewClient("passthrough:///"+f.addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	f.wg.Go(func() {
		defer close(done)
		defer cc.Close()
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

// restart ends the stream and connection of client cl.id and runs cl, a
// new client with the same id, in its place.
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
