package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/testpki"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// storeRegistry is a model.Store whose sync the test controls.
type storeRegistry struct {
	*model.Store
	synced atomic.Bool
}

func (r *storeRegistry) HasSynced() bool { return r.synced.Load() }

// sources makes r the server's only source.
func (r *storeRegistry) sources() []aggregate.Source {
	return []aggregate.Source{{Name: "store", Controller: r}}
}

func newRegistry() *storeRegistry {
	r := &storeRegistry{Store: model.NewStore()}
	r.Update(&model.Service{
		Hostname: "echo.default.svc.cluster.local", Name: "echo", Namespace: "default",
		Ports: []model.Port{{Name: "grpc", Port: 7070, Protocol: model.GRPC}},
	}, []*model.Endpoint{{Address: "10.1.0.1", Port: 7070, ServicePortName: "grpc"}})
	return r
}

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	opts.XDSAddr, opts.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// getBody reads the body of a GET of url.
func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func TestReadyzFollowsTheRegistry(t *testing.T) {
	reg := newRegistry()
	s := start(t, Options{Sources: reg.sources()})
	base := "http://" + s.HTTPAddr()
	if c := get(t, base+"/healthz"); c != http.StatusOK {
		t.Fatalf("/healthz = %d", c)
	}
	if c := get(t, base+"/readyz"); c != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before sync = %d, want 503", c)
	}
	reg.synced.Store(true)
	if c := get(t, base+"/readyz"); c != http.StatusOK {
		t.Fatalf("/readyz after sync = %d, want 200", c)
	}
}

func TestReadyOnceEverySourceIsSynced(t *testing.T) {
	kube, files := newRegistry(), &storeRegistry{Store: model.NewStore()}
	s := start(t, Options{Sources: []aggregate.Source{{Name: "kubernetes", Controller: kube}, {Name: "files", Controller: files}}})
	readyz := "http://" + s.HTTPAddr() + "/readyz"
	files.synced.Store(true)
	if c := get(t, readyz); c != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the files synced only = %d, want 503", c)
	}
	kube.synced.Store(true)
	if c := get(t, readyz); c != http.StatusOK {
		t.Fatalf("/readyz with both synced = %d, want 200", c)
	}
}

// fetchListener opens an ADS stream over conn and asks for one listener.
func fetchListener(ctx context.Context, conn *grpc.ClientConn) (*xdstest.Response, error) {
	c, err := xdstest.Open(ctx, conn, xdstest.Options{Node: xdstest.GRPCNode(xdstest.NodeOptions{
		ID: "sidecar~10.0.0.9~c.default~default.svc.cluster.local", Namespace: "default"})})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Subscribe(resourcev3.ListenerType, "echo:7070"); err != nil {
		return nil, err
	}
	return c.Next(ctx)
}

func TestXDSOverTLSAndMutualTLS(t *testing.T) {
	ca := testpki.New(t)
	serverCert, serverKey := ca.Issue(t, testpki.Leaf{Name: "server", IPs: []string{"127.0.0.1"}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	// The identity of fetchListener's node, whose namespace is default.
	clientCert, clientKey := ca.Issue(t, testpki.Leaf{Name: "client", URIs: []string{"spiffe://cluster.local/ns/default/sa/c"},
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	anonymous := ca.IssuePEM(t, testpki.Leaf{Name: "anonymous", Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}).KeyPair(t)
	caFile := ca.File
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)

	dialTLS := func(addr string, certs ...tls.Certificate) *grpc.ClientConn {
		creds := credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: certs, ServerName: "127.0.0.1"})
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("TLS", func(t *testing.T) {
		reg := newRegistry()
		reg.synced.Store(true)
		s := start(t, Options{Sources: reg.sources(), XDSCert: serverCert, XDSKey: serverKey})
		resp, err := fetchListener(ctx, dialTLS(s.XDSAddr()))
		if err != nil || len(resp.Resources) != 1 {
			t.Fatalf("over TLS: %v, %v", resp, err)
		}
		plain, err := grpc.NewClient(s.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		if _, err := fetchListener(ctx, plain); err == nil {
			t.Fatal("a plaintext client was served by a TLS server")
		}
	})
	t.Run("mTLS", func(t *testing.T) {
		reg := newRegistry()
		reg.synced.Store(true)
		s := start(t, Options{Sources: reg.sources(), XDSCert: serverCert, XDSKey: serverKey, XDSClientCA: caFile})
		if _, err := fetchListener(ctx, dialTLS(s.XDSAddr())); err == nil {
			t.Fatal("a client without a certificate was served under mTLS")
		}
		cert, err := tls.LoadX509KeyPair(clientCert, clientKey)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := fetchListener(ctx, dialTLS(s.XDSAddr(), cert))
		if err != nil || len(resp.Resources) != 1 {
			t.Fatalf("with a client certificate: %v, %v", resp, err)
		}
		// The CA's certificate says who the client is no more than none.
		if _, err := fetchListener(ctx, dialTLS(s.XDSAddr(), anonymous)); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("with a client certificate without a SPIFFE ID: %v, want PermissionDenied", err)
		}
	})
}

func TestBadTLSFilesAreClearErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key := testpki.New(t).Issue(t, testpki.Leaf{Name: "server", IPs: []string{"127.0.0.1"}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"key without cert", Options{XDSKey: key}, "--xds-cert and --xds-key"},
		{"missing cert file", Options{XDSCert: filepath.Join(dir, "nope.pem"), XDSKey: key}, "nope.pem"},
		{"client CA not PEM", Options{XDSCert: cert, XDSKey: key, XDSClientCA: notPEM}, "ca.pem holds no PEM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Sources = newRegistry().sources()
			tc.opts.XDSAddr, tc.opts.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
			_, err := New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestAddressInUseIsAnError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = New(Options{Sources: newRegistry().sources(), XDSAddr: l.Addr().String(), HTTPAddr: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Fatalf("err = %v, want one naming %s", err, l.Addr())
	}
}
