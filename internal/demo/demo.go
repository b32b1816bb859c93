// Package demo runs the whole of meshpilot on one machine: the bundled
// example mesh in a folder, meshpilot serving it, a gRPC server for every
// endpoint, and a proxyless grpc-go client whose RPCs show, second by
// second, where traffic goes. Editing the folder moves the traffic.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"

	"github.com/meshpilot/meshpilot/examples"
	"github.com/meshpilot/meshpilot/internal/bootstrap"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/registry/file"
	"github.com/meshpilot/meshpilot/internal/server"
)

// Options configure a demo run.
type Options struct {
	// Dir receives the copy of the example mesh; it must be empty or not
	// exist, and is kept afterwards. Empty: a temporary folder, removed
	// at the end.
	Dir string
	// BackendPort replaces the example's backend port (50051) when not 0.
	BackendPort int
	// Duration ends the demo by itself when positive.
	Duration time.Duration
	// Interval between report lines; default one second.
	Interval time.Duration
	// Out receives the report; default os.Stdout.
	Out io.Writer
	// Logger receives meshpilot's own logs; default slog.Default().
	Logger *slog.Logger
}

// Run runs the demo until ctx ends or Duration passes.
func Run(ctx context.Context, o Options) (err error) {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	out := &lineWriter{w: o.Out}

	dir, cleanup, err := prepareDir(o.Dir)
	if err != nil {
		return err
	}
	defer cleanup()
	if err := examples.CopyMesh(dir, o.BackendPort); err != nil {
		return fmt.Errorf("copying the example mesh to %s: %w", dir, err)
	}

	// meshpilot on loopback, free ports.
	reg, err := file.New(file.Options{Dir: dir, Logger: o.Logger})
	if err != nil {
		return err
	}
	hostname := model.ServiceHostname(examples.GreeterService, examples.MeshNamespace, "")
	reg.AppendEventHandler(func(ev model.Event) {
		if ev.Hostname == hostname && reg.HasSynced() {
			out.printf("%s  meshpilot: %s\n", clock(), describeService(reg, hostname))
		}
	})
	srv, err := server.New(server.Options{
		Sources: []aggregate.Source{{Name: "files", Controller: reg}},
		XDSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Debounce: push.Options{LeadingEdge: true}, Logger: o.Logger,
	})
	if err != nil {
		return err
	}
	srvCtx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Run(srvCtx) }()
	defer func() {
		stopServer()
		if serr := <-srvDone; serr != nil && err == nil {
			err = serr
		}
	}()
	if err := awaitSynced(ctx, reg, srvDone); err != nil {
		if ctx.Err() != nil {
			return nil // ended (Ctrl-C, --duration) before it started
		}
		return err
	}

	// A backend for every endpoint of the greeter.
	eps := reg.Endpoints(hostname, examples.GreeterPort, nil)
	if len(eps) == 0 {
		return fmt.Errorf("the example mesh in %s gives %s no endpoints", dir, hostname)
	}
	var backends []string
	for _, ep := range eps {
		addr := net.JoinHostPort(ep.Address, fmt.Sprint(ep.Port))
		stop, err := startBackend(addr, o.BackendPort)
		if err != nil {
			return err
		}
		defer stop()
		backends = append(backends, addr)
	}

	target := fmt.Sprintf("xds:///%s:%d", hostname, examples.GreeterPort)
	cc, err := dialXDS(srv.XDSAddr(), target)
	if err != nil {
		return err
	}
	defer cc.Close()

	endpointsFile := filepath.Join(dir, examples.EndpointsFile)
	out.printf(`meshpilot demo: one service, three backends, a proxyless gRPC client

  manifests  %s  (a copy of the bundled examples/mesh)
  meshpilot  xDS on %s, HTTP on %s
  backends   %s
  client     grpc-go, %s
  endpoints  %s

To move traffic, edit
  %s
and set "ready: false" under the address %s (or delete that endpoint), then
save: the next line shows the change. Ctrl-C ends the demo.

What the client receives, as JSON:
  curl -s -d '{"node":{"id":"sidecar~127.0.0.1~curl.demo~demo.svc.cluster.local"},"resource_names":["%s"]}' http://%s/v3/discovery:endpoints

`, dir, srv.XDSAddr(), srv.HTTPAddr(), strings.Join(backends, "  "), target,
		describeService(reg, hostname), endpointsFile, eps[min(1, len(eps)-1)].Address,
		model.ClusterName(examples.GreeterPort, "", hostname), srv.HTTPAddr())

	report(ctx, cc, backends, o.Interval, out)
	out.printf("%s  demo finished\n", clock())
	return nil
}

// prepareDir returns the folder to copy the mesh into and what removes it.
func prepareDir(dir string) (string, func(), error) {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "meshpilot-demo-")
		if err != nil {
			return "", nil, err
		}
		return tmp, func() { _ = os.RemoveAll(tmp) }, nil
	}
	entries, err := os.ReadDir(dir)
	if err == nil && len(entries) > 0 {
		return "", nil, fmt.Errorf("the demo folder %s is not empty: give a new or empty folder", dir)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	return abs, func() {}, nil
}

func awaitSynced(ctx context.Context, reg *file.Registry, srvDone <-chan error) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !reg.HasSynced() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-srvDone:
			return fmt.Errorf("meshpilot stopped: %v", err)
		case <-tick.C:
		}
	}
	return nil
}

// describeService summarises a service's endpoints: address, locality
// and health.
func describeService(reg *file.Registry, hostname model.Hostname) string {
	svc := reg.GetService(hostname)
	if svc == nil {
		return string(hostname) + " is gone"
	}
	var parts []string
	for _, ep := range reg.Endpoints(hostname, examples.GreeterPort, nil) {
		zone := ep.Locality.Zone
		if zone == "" {
			zone = "no zone"
		}
		parts = append(parts, fmt.Sprintf("%s (%s) %s", ep.Address, zone, ep.Health))
	}
	if len(parts) == 0 {
		return string(hostname) + " has no endpoints"
	}
	return fmt.Sprintf("%s: %s", svc.Name, strings.Join(parts, ", "))
}

// startBackend serves gRPC (the health service, which is all the client
// calls) on addr.
func startBackend(addr string, portOverride int) (func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		host, port, _ := net.SplitHostPort(addr)
		hint := fmt.Sprintf("is another demo running? Choose another port with --backend-port (the example uses %s)", port)
		if portOverride != 0 {
			hint = "choose another port with --backend-port"
		}
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			hint = fmt.Sprintf("%s is not an address of this machine; on macOS add it with: sudo ifconfig lo0 alias %s up", host, host)
		}
		return nil, fmt.Errorf("cannot start the demo backend on %s: %v; %s", addr, err, hint)
	}
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, health.NewServer())
	go func() { _ = g.Serve(lis) }()
	return g.Stop, nil
}

// dialXDS opens a grpc-go xDS channel with a bootstrap of its own, the
// one "meshpilot bootstrap" prints.
func dialXDS(xdsAddr, target string) (*grpc.ClientConn, error) {
	bs, err := bootstrap.JSON(bootstrap.Options{XDSServer: xdsAddr, Namespace: examples.MeshNamespace, Pod: "demo-client"})
	if err != nil {
		return nil, err
	}
	res, err := xds.NewXDSResolverWithConfigForTesting(bs)
	if err != nil {
		return nil, fmt.Errorf("building the xDS resolver: %w", err)
	}
	return grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(res))
}

// report calls the service about a hundred times a second and prints,
// every interval, how many RPCs each backend answered.
func report(ctx context.Context, cc *grpc.ClientConn, backends []string, interval time.Duration, out *lineWriter) {
	var mu sync.Mutex // guards counts, failures and lastErr
	counts := map[string]int{}
	failures := 0
	var lastErr error

	var wg sync.WaitGroup
	defer wg.Wait()
	const workers = 1
	for range workers {
		wg.Go(func() {
			client := healthpb.NewHealthClient(cc)
			pace := time.NewTicker(10 * time.Millisecond)
			defer pace.Stop()
			for ctx.Err() == nil {
				var p peer.Peer
				rctx, cancel := context.WithTimeout(ctx, time.Second)
				_, err := client.Check(rctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(true))
				cancel()
				mu.Lock()
				switch {
				case err == nil && p.Addr != nil:
					counts[p.Addr.String()]++
				case ctx.Err() == nil:
					failures++
					lastErr = err
				}
				mu.Unlock()
				select {
				case <-ctx.Done():
				case <-pace.C:
				}
			}
		})
	}

	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		mu.Lock()
		got, fails, errNow := counts, failures, lastErr
		counts, failures, lastErr = map[string]int{}, 0, nil
		mu.Unlock()
		var b strings.Builder
		b.WriteString(clock())
		for _, addr := range backends {
			fmt.Fprintf(&b, "  %s: %d", strings.Split(addr, ":")[0], got[addr])
			delete(got, addr)
		}
		for _, addr := range slices.Sorted(maps.Keys(got)) {
			fmt.Fprintf(&b, "  %s: %d", addr, got[addr])
		}
		if fails > 0 {
			fmt.Fprintf(&b, "  failed: %d (%s)", fails, shortError(errNow))
		}
		b.WriteByte('\n')
		out.printf("%s", b.String())
	}
}

// shortError keeps the code and the innermost cause of an RPC error:
// grpc-go prefixes the node id at every level.
func shortError(err error) string {
	st := status.Convert(err)
	msg := st.Message()
	if i := strings.LastIndex(msg, "]: "); i >= 0 {
		msg = msg[i+3:]
	}
	if len(msg) > 120 {
		msg = msg[:117] + "..."
	}
	return st.Code().String() + ": " + msg
}

func clock() string { return time.Now().Format("15:04:05") }

// lineWriter serialises whole lines from several goroutines.
type lineWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}
