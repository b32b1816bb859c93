// Package server assembles meshpilot: a registry that fills the model, the
// debouncer, the xDS server on gRPC and the HTTP port. The serve command,
// the demo and tests start meshpilot through it.
package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/xds"
)

// Registry is what the server needs of a registry: the model, its change
// events, and a Run that keeps it current until ctx ends.
type Registry interface {
	model.Controller
	Run(ctx context.Context) error
}

// Options configure a Server.
type Options struct {
	// Registry fills the model. Required.
	Registry Registry
	// DomainSuffix of hostnames; "cluster.local" when empty.
	DomainSuffix string
	// XDSAddr is the gRPC listen address, e.g. ":15010".
	XDSAddr string
	// HTTPAddr serves /healthz, /readyz and REST-JSON discovery, e.g. ":15014".
	HTTPAddr string
	// XDSCert and XDSKey enable TLS on the xDS port; XDSClientCA also
	// requires and verifies client certificates (mTLS).
	XDSCert, XDSKey, XDSClientCA string
	// Debounce shapes pushes.
	Debounce push.Options
	Logger   *slog.Logger
}

// Server is a running meshpilot. Its addresses are known once New returns
// (listeners are bound there), so callers may pass ":0".
type Server struct {
	opts     Options
	log      *slog.Logger
	xds      *xds.Server
	grpc     *grpc.Server
	http     *http.Server
	xdsLis   net.Listener
	httpLis  net.Listener
	debounce *push.Debouncer
}

// New binds the listeners and builds the server; Run serves.
func New(opts Options) (*Server, error) {
	if opts.Registry == nil {
		return nil, errors.New("server: no registry")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, log: opts.Logger}
	s.xds = xds.NewServer(xds.Options{
		Discovery:    opts.Registry,
		DomainSuffix: opts.DomainSuffix,
		Ready:        opts.Registry.HasSynced,
		Logger:       opts.Logger,
	})
	s.debounce = push.NewDebouncer(opts.Debounce, s.push)
	opts.Registry.AppendEventHandler(s.onEvent)

	grpcOpts := []grpc.ServerOption{
		grpc.MaxConcurrentStreams(100000),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 15 * time.Second, PermitWithoutStream: true}),
	}
	if opts.XDSCert != "" || opts.XDSKey != "" || opts.XDSClientCA != "" {
		creds, err := serverTLS(opts.XDSCert, opts.XDSKey, opts.XDSClientCA)
		if err != nil {
			return nil, err
		}
		grpcOpts = append(grpcOpts, grpc.Creds(creds))
	}
	s.grpc = grpc.NewServer(grpcOpts...)
	s.xds.Register(s.grpc)

	var err error
	if s.xdsLis, err = net.Listen("tcp", opts.XDSAddr); err != nil {
		return nil, fmt.Errorf("listening for xDS on %s: %w", opts.XDSAddr, err)
	}
	if s.httpLis, err = net.Listen("tcp", opts.HTTPAddr); err != nil {
		s.xdsLis.Close()
		return nil, fmt.Errorf("listening for HTTP on %s: %w", opts.HTTPAddr, err)
	}
	s.http = &http.Server{Handler: s.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

// XDSAddr is the address the xDS server listens on.
func (s *Server) XDSAddr() string { return s.xdsLis.Addr().String() }

// HTTPAddr is the address of the HTTP port.
func (s *Server) HTTPAddr() string { return s.httpLis.Addr().String() }

// XDS returns the xDS server, for tests and debug handlers.
func (s *Server) XDS() *xds.Server { return s.xds }

func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.opts.Registry.HasSynced() {
			http.Error(w, "the service model is not synced yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	rest := s.xds.RESTHandler()
	mux.Handle("/v3/discovery:clusters", rest)
	mux.Handle("/v3/discovery:endpoints", rest)
	mux.Handle("/v3/discovery:listeners", rest)
	mux.Handle("/v3/discovery:routes", rest)
	return mux
}

func (s *Server) onEvent(ev model.Event) {
	if ev.Kind == model.EndpointsChanged {
		s.log.Debug("endpoints changed", "service", ev.Hostname)
	} else {
		s.log.Info("service "+map[model.EventKind]string{model.ServiceChanged: "changed", model.ServiceDeleted: "deleted"}[ev.Kind],
			"service", ev.Hostname)
	}
	s.debounce.Handle(ev)
}

func (s *Server) push(req push.Request) {
	start := time.Now()
	s.xds.Push(req)
	s.log.Debug("pushed", "services", len(req.Services), "endpointsOnly", len(req.EndpointsOnly),
		"events", req.Events, "sinceFirstEvent", time.Since(req.Start), "took", time.Since(start))
}

// Run serves until ctx ends, then stops the listeners. It returns the
// first error of the registry or a listener.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 3)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.opts.Registry.Run(ctx); err != nil {
			errs <- fmt.Errorf("registry: %w", err)
		}
	})
	wg.Go(func() { s.debounce.Run(ctx) })
	wg.Go(func() {
		if err := s.grpc.Serve(s.xdsLis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			errs <- fmt.Errorf("xDS server: %w", err)
		}
	})
	wg.Go(func() {
		if err := s.http.Serve(s.httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("HTTP server: %w", err)
		}
	})
	s.log.Info("meshpilot serving", "xds", s.XDSAddr(), "http", s.HTTPAddr())

	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	cancel()
	s.grpc.Stop()
	shutdownCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
	_ = s.http.Shutdown(shutdownCtx)
	done()
	wg.Wait()
	return err
}

func serverTLS(certFile, keyFile, clientCA string) (credentials.TransportCredentials, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("TLS needs both --xds-cert and --xds-key")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the xDS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, fmt.Errorf("reading the client CA %s: %w", clientCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the client CA file %s holds no PEM certificate", clientCA)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(cfg), nil
}
