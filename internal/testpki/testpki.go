// Package testpki is a certificate authority for tests: it writes a CA
// and the certificates it issues (server, client, SPIFFE identities) to
// files, as workloads and servers read them, or in place in a folder
// updated as a Kubernetes Secret volume is (SecretMount), for rotation.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA issues certificates valid from an hour ago to an hour from now
// (Leaf.NotAfter sets another end).
type CA struct {
	// File is the CA certificate's PEM file.
	File string

	dir    string
	key    *ecdsa.PrivateKey
	cert   *x509.Certificate
	serial atomic.Int64
}

// New writes a new CA to a temporary folder of the test.
func New(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "meshpilot test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{dir: t.TempDir(), key: key, cert: cert}
	ca.serial.Store(1)
	ca.File = ca.writePEM(t, "ca.pem", ca.PEM())
	return ca
}

// Leaf says what a certificate is for.
type Leaf struct {
	// Name is its common name and the base of its file names.
	Name string
	// IPs and URIs (SPIFFE identities) are its subject alternative names.
	IPs  []string
	URIs []string
	// Usage; both server and client authentication when empty.
	Usage []x509.ExtKeyUsage
	// NotAfter is when it expires; an hour from now when zero.
	NotAfter time.Time
}

// Issued is a certificate and its key, in memory.
type Issued struct {
	Cert *x509.Certificate
	// CertPEM and KeyPEM (PKCS #8) are what the files hold.
	CertPEM, KeyPEM []byte
}

// Issue writes a certificate and its PKCS #8 key and returns their files.
func (ca *CA) Issue(t testing.TB, l Leaf) (certFile, keyFile string) {
	t.Helper()
	is := ca.IssuePEM(t, l)
	return ca.writePEM(t, l.Name+".pem", is.CertPEM), ca.writePEM(t, l.Name+"-key.pem", is.KeyPEM)
}

// IssuePEM issues a certificate without writing it, for a test that puts
// it where it chooses (a Secret volume, a file rewritten in place). Each
// certificate of a CA has a serial number of its own.
func (ca *CA) IssuePEM(t testing.TB, l Leaf) Issued {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1)), Subject: pkix.Name{CommonName: l.Name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: l.Usage,
	}
	if !l.NotAfter.IsZero() {
		tmpl.NotAfter = l.NotAfter
	}
	if len(tmpl.ExtKeyUsage) == 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	for _, ip := range l.IPs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	for _, s := range l.URIs {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Issued{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// PEM is the CA certificate as its file holds it.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// Pool is a pool holding the CA alone, for a peer that trusts it.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// KeyPair is an issued certificate as a TLS peer presents it.
func (is Issued) KeyPair(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (ca *CA) writePEM(t testing.TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
