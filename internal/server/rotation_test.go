package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/server"
	"github.com/meshpilot/meshpilot/internal/testpki"
	"github.com/meshpilot/meshpilot/internal/testutil"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// These tests rotate the xDS port's certificate files under running
// grpc-go clients, the two ways they are rotated in a cluster: a Secret
// volume (the kubelet swaps the ..data symlink) and files rewritten in
// place.

const (
	echoHost    = "echo.default.svc.cluster.local"
	echoCluster = "outbound|7070||" + echoHost
)

var serverLeaf = testpki.Leaf{Name: "server", IPs: []string{"127.0.0.1"}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}

// clientLeaf is a workload's certificate in namespace default, as the
// node of xdsClient claims.
var clientLeaf = testpki.Leaf{Name: "client", URIs: []string{"spiffe://cluster.local/ns/default/sa/client"},
	Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}

func folders(t *testing.T) map[string]func() testpki.Folder {
	return map[string]func() testpki.Folder{
		"Secret volume":   func() testpki.Folder { return testpki.NewSecretMount(t) },
		"files rewritten": func() testpki.Folder { return testpki.NewInPlace(t) },
	}
}

// echo serves one service whose endpoint address the test changes, to
// push to the streams.
func echo(store *model.Store, addr string) {
	store.Update(&model.Service{
		Hostname: echoHost, Name: "echo", Namespace: "default",
		Ports: []model.Port{{Name: "grpc", Port: 7070, Protocol: model.GRPC}},
	}, []*model.Endpoint{{Address: addr, Port: 7070, ServicePortName: "grpc"}})
}

// runTLS runs meshpilot over store with the TLS files of opts, logging
// into lines, until the test ends.
func runTLS(t *testing.T, store *model.Store, opts server.Options, lines *testutil.Lines) *server.Server {
	t.Helper()
	opts.Sources = []aggregate.Source{{Name: "store", Controller: store}}
	opts.Logger = slog.New(slog.NewTextHandler(lines, nil))
	return testutil.RunServerWith(t, opts)
}

// scrape reads meshpilot's metrics as its /metrics serves them.
func scrape(s *server.Server) string {
	rec := httptest.NewRecorder()
	s.Metrics().Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

// tlsConn is a grpc-go connection to the xDS port that trusts roots and
// presents certs, and records the serial of every server certificate
// it verified: one per handshake.
type tlsConn struct {
	*grpc.ClientConn
	mu      sync.Mutex // guards serials
	serials []*big.Int
}

func dialTLS(t *testing.T, addr string, roots *x509.CertPool, certs ...tls.Certificate) *tlsConn {
	t.Helper()
	c := &tlsConn{}
	cfg := &tls.Config{RootCAs: roots, Certificates: certs, ServerName: "127.0.0.1",
		VerifyConnection: func(cs tls.ConnectionState) error {
			c.mu.Lock()
			c.serials = append(c.serials, cs.PeerCertificates[0].SerialNumber)
			c.mu.Unlock()
			return nil
		}}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	c.ClientConn = cc
	return c
}

// handshakes lists the serials the connection was served, one per
// handshake.
func (c *tlsConn) handshakes() []*big.Int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.serials)
}

// xdsClient opens a stream on c whose node is a gRPC client of namespace
// default that subscribes to echo's endpoints.
func xdsClient(t *testing.T, c *tlsConn, pod string) *xdstest.TestClient {
	t.Helper()
	cl := xdstest.Connect(t, c, xdstest.Options{AutoACK: true, Node: xdstest.GRPCNode(xdstest.NodeOptions{
		ID: xdstest.SidecarID("10.0.0.9", pod, "default"), Namespace: "default"})})
	cl.Subscribe(resourcev3.EndpointType, echoCluster)
	return cl
}

// holds reports whether the client holds echo's endpoint at addr.
func holds(c *xdstest.TestClient, addr string) bool {
	return slices.Contains(xdstest.Addresses(c.LoadAssignment(echoCluster)), addr)
}

// fetch opens a new connection, asks for echo's endpoints and returns
// the serial the server presented, or the error of the stream.
func fetch(t *testing.T, addr string, roots *x509.CertPool, certs ...tls.Certificate) (*big.Int, error) {
	t.Helper()
	c := dialTLS(t, addr, roots, certs...)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := xdstest.Open(ctx, c, xdstest.Options{Node: xdstest.GRPCNode(xdstest.NodeOptions{
		ID: xdstest.SidecarID("10.0.0.9", "probe", "default"), Namespace: "default"})})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := cl.Subscribe(resourcev3.EndpointType, echoCluster); err != nil {
		return nil, err
	}
	if _, err := cl.Next(ctx); err != nil {
		return nil, err
	}
	hs := c.handshakes()
	return hs[len(hs)-1], nil
}

// awaitServed polls new connections until one is served the certificate
// of serial want.
func awaitServed(t *testing.T, addr string, roots *x509.CertPool, want *big.Int, certs ...tls.Certificate) {
	t.Helper()
	deadline := time.Now().Add(testutil.Wait)
	var got *big.Int
	var err error
	for time.Now().Before(deadline) {
		if got, err = fetch(t, addr, roots, certs...); err == nil && got.Cmp(want) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond) // between polls
	}
	t.Fatalf("new connections are not served certificate %v: last served %v, %v", want, got, err)
}

// TestXDSCertificateRotates: the certificate and key rotate under an open
// stream: new connections are served the new certificate, the open
// stream keeps its connection and still gets pushes.
func TestXDSCertificateRotates(t *testing.T) {
	for name, folder := range folders(t) {
		t.Run(name, func(t *testing.T) {
			ca := testpki.New(t)
			later := serverLeaf
			later.NotAfter = time.Now().Add(2 * time.Hour).Truncate(time.Second)
			first, second := ca.IssuePEM(t, serverLeaf), ca.IssuePEM(t, later)
			f := folder()
			f.Update(t, map[string][]byte{"tls.crt": first.CertPEM, "tls.key": first.KeyPEM})
			store := model.NewStore()
			echo(store, "10.1.0.1")
			lines := testutil.NewLines()
			s := runTLS(t, store, server.Options{XDSCert: f.Path("tls.crt"), XDSKey: f.Path("tls.key")}, lines)
			lines.Await(t, "the served certificate logged", 0, func(l string) bool {
				return strings.Contains(l, "serving certificate") && strings.Contains(l, "serial=2") &&
					strings.Contains(l, "CN=server") && strings.Contains(l, "notAfter=")
			})

			conn := dialTLS(t, s.XDSAddr(), ca.Pool())
			open := xdsClient(t, conn, "open")
			open.WaitUntil("echo's first endpoint", func() bool { return holds(open, "10.1.0.1") })

			f.Update(t, map[string][]byte{"tls.crt": second.CertPEM, "tls.key": second.KeyPEM})
			awaitServed(t, s.XDSAddr(), ca.Pool(), second.Cert.SerialNumber)
			lines.Await(t, "the new certificate logged", 0, func(l string) bool {
				return strings.Contains(l, "serving certificate") && strings.Contains(l, "serial=3")
			})
			expiry := fmt.Sprintf(`meshpilot_xds_certificate_expiry_timestamp_seconds{serial="3",subject="CN=server"} %v`, float64(later.NotAfter.Unix()))
			if m := scrape(s); !strings.Contains(m, expiry) {
				t.Fatalf("the metrics do not show %s:\n%s", expiry, m)
			}

			echo(store, "10.1.0.2")
			open.WaitUntil("echo's new endpoint on the stream opened before the rotation", func() bool { return holds(open, "10.1.0.2") })
			if hs := conn.handshakes(); len(hs) != 1 || hs[0].Cmp(first.Cert.SerialNumber) != 0 {
				t.Fatalf("the open stream's connection was served %v, want one handshake with %v", hs, first.Cert.SerialNumber)
			}
		})
	}
}

// TestXDSCertificateReadAgainWithoutEvents: files behind symlinks to
// another folder change without an event in the folder meshpilot
// watches; the periodic re-read serves them all the same.
func TestXDSCertificateReadAgainWithoutEvents(t *testing.T) {
	ca := testpki.New(t)
	first, second := ca.IssuePEM(t, serverLeaf), ca.IssuePEM(t, serverLeaf)
	target := testpki.NewInPlace(t)
	target.Update(t, map[string][]byte{"tls.crt": first.CertPEM, "tls.key": first.KeyPEM})
	links := t.TempDir()
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(target.Path(name), filepath.Join(links, name)); err != nil {
			t.Fatal(err)
		}
	}
	store := model.NewStore()
	echo(store, "10.1.0.1")
	s := runTLS(t, store, server.Options{XDSCert: filepath.Join(links, "tls.crt"), XDSKey: filepath.Join(links, "tls.key"),
		TLSReloadInterval: 200 * time.Millisecond}, testutil.NewLines())
	awaitServed(t, s.XDSAddr(), ca.Pool(), first.Cert.SerialNumber)
	target.Update(t, map[string][]byte{"tls.crt": second.CertPEM, "tls.key": second.KeyPEM})
	awaitServed(t, s.XDSAddr(), ca.Pool(), second.Cert.SerialNumber)
}

// TestXDSClientCARotates: after the client CA rotates, clients of the new
// CA are served and new connections of the old CA's clients refused,
// while a stream opened with the old CA goes on and gets pushes.
func TestXDSClientCARotates(t *testing.T) {
	for name, folder := range folders(t) {
		t.Run(name, func(t *testing.T) {
			serverCA, oldCA, newCA := testpki.New(t), testpki.New(t), testpki.New(t)
			pair := serverCA.IssuePEM(t, serverLeaf)
			oldClient := oldCA.IssuePEM(t, clientLeaf).KeyPair(t)
			newClient := newCA.IssuePEM(t, clientLeaf).KeyPair(t)
			f := folder()
			f.Update(t, map[string][]byte{"tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM, "ca.crt": oldCA.PEM()})
			store := model.NewStore()
			echo(store, "10.1.0.1")
			s := runTLS(t, store, server.Options{XDSCert: f.Path("tls.crt"), XDSKey: f.Path("tls.key"), XDSClientCA: f.Path("ca.crt")}, testutil.NewLines())
			roots := serverCA.Pool()
			if _, err := fetch(t, s.XDSAddr(), roots, newClient); err == nil {
				t.Fatal("a client of a CA not yet trusted was served")
			}
			open := xdsClient(t, dialTLS(t, s.XDSAddr(), roots, oldClient), "open")
			open.WaitUntil("echo's first endpoint", func() bool { return holds(open, "10.1.0.1") })

			f.Update(t, map[string][]byte{"tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM, "ca.crt": newCA.PEM()})
			awaitServed(t, s.XDSAddr(), roots, pair.Cert.SerialNumber, newClient)
			if _, err := fetch(t, s.XDSAddr(), roots, oldClient); err == nil {
				t.Fatal("a new connection of the old CA's client was served after the client CA rotated")
			}

			echo(store, "10.1.0.2")
			open.WaitUntil("echo's new endpoint on the stream opened with the old CA", func() bool { return holds(open, "10.1.0.2") })
		})
	}
}

// TestXDSBadCertificateFilesKeepTheLastGood: a rotation to files that do
// not load is logged with the file and why, and the last good certificate
// and CA stay served; good files then rotate in as usual.
func TestXDSBadCertificateFilesKeepTheLastGood(t *testing.T) {
	ca, other := testpki.New(t), testpki.New(t)
	first, second := ca.IssuePEM(t, serverLeaf), ca.IssuePEM(t, serverLeaf)
	client := ca.IssuePEM(t, clientLeaf).KeyPair(t)
	f := testpki.NewInPlace(t)
	f.Update(t, map[string][]byte{"tls.crt": first.CertPEM, "tls.key": first.KeyPEM, "ca.crt": ca.PEM()})
	store := model.NewStore()
	echo(store, "10.1.0.1")
	lines := testutil.NewLines()
	s := runTLS(t, store, server.Options{XDSCert: f.Path("tls.crt"), XDSKey: f.Path("tls.key"), XDSClientCA: f.Path("ca.crt")}, lines)

	for _, tc := range []struct {
		name  string
		files map[string][]byte
		want  []string // in the warning
	}{
		{"a certificate that is not PEM", map[string][]byte{"tls.crt": []byte("not a certificate")},
			[]string{"keeping the previous certificate", "the xDS certificate " + f.Path("tls.crt"), "no PEM certificate"}},
		{"a key that is not the certificate's", map[string][]byte{"tls.crt": second.CertPEM, "tls.key": first.KeyPEM},
			[]string{"keeping the previous certificate", "the xDS key " + f.Path("tls.key"), "private key does not match public key"}},
		{"a client CA that is not PEM", map[string][]byte{"tls.crt": first.CertPEM, "ca.crt": []byte("not a CA")},
			[]string{"keeping the previous client CA", f.Path("ca.crt"), "holds no PEM certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := lines.Len()
			f.Update(t, tc.files)
			lines.Await(t, strings.Join(tc.want, ", "), from, func(l string) bool {
				for _, w := range tc.want {
					if !strings.Contains(l, w) {
						return false
					}
				}
				return strings.Contains(l, "level=WARN")
			})
			if got, err := fetch(t, s.XDSAddr(), ca.Pool(), client); err != nil || got.Cmp(first.Cert.SerialNumber) != 0 {
				t.Fatalf("after the bad files a new connection got %v, %v; want the last good certificate %v", got, err, first.Cert.SerialNumber)
			}
			if _, err := fetch(t, s.XDSAddr(), ca.Pool(), other.IssuePEM(t, clientLeaf).KeyPair(t)); err == nil {
				t.Fatal("a client of an untrusted CA was served after the bad files")
			}
		})
	}
	f.Update(t, map[string][]byte{"tls.crt": second.CertPEM, "tls.key": second.KeyPEM, "ca.crt": ca.PEM()})
	awaitServed(t, s.XDSAddr(), ca.Pool(), second.Cert.SerialNumber, client)
}
