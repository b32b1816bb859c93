package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultTLSReloadInterval is how often the xDS port's certificate, key
// and client CA are read again when no file event says they changed.
const DefaultTLSReloadInterval = time.Minute

// tlsSettle is how long the certificates' folders must be quiet before
// the files are read again: a rotation is several events (cert-manager
// writes the certificate and then the key; the kubelet writes a folder,
// a symlink and renames it), and reading between two of them would see a
// certificate with the previous key.
const tlsSettle = 100 * time.Millisecond

// tlsFilesOptions name the files of the xDS port's TLS.
type tlsFilesOptions struct {
	// Cert and Key are the served certificate (with its chain) and its key.
	Cert, Key string
	// ClientCA, when set, is the CA bundle client certificates must chain
	// to; every client must present one.
	ClientCA string
	// Interval is the periodic re-read; DefaultTLSReloadInterval when zero.
	Interval time.Duration
	Log      *slog.Logger
}

// tlsFiles is the xDS port's TLS, served from files that are read again
// when they change, as cert-manager and Kubernetes Secret volumes rotate
// them: each new handshake gets the latest good certificate and client
// CA (tls.Config.GetConfigForClient), while established connections and
// their streams go on untouched. A file that does not load (unparsable,
// a key that is not the certificate's) is logged with why, and what was
// served before stays.
//
// The files' folders are watched rather than the files: a Secret volume
// swaps the symlink "..data" and never writes the files themselves. A
// periodic re-read catches what events miss (a volume type without them,
// a dropped event).
type tlsFiles struct {
	opts tlsFilesOptions

	// config is what a new handshake gets.
	config atomic.Pointer[tls.Config]

	// mu guards the fields below, the content last read of each file and
	// what was built of it, so that unchanged files are neither parsed nor
	// logged again, and so that a bad file is logged once, not at every
	// re-read.
	mu      sync.Mutex
	certPEM []byte
	keyPEM  []byte
	caPEM   []byte
	pair    *tls.Certificate
	pool    *x509.CertPool
}

// loadTLSFiles reads the files once: a file that does not load is an
// error here, since there is nothing to serve yet.
func loadTLSFiles(o tlsFilesOptions) (*tlsFiles, error) {
	if o.Cert == "" || o.Key == "" {
		return nil, errors.New("TLS needs both --xds-cert and --xds-key")
	}
	if o.Interval <= 0 {
		o.Interval = DefaultTLSReloadInterval
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	f := &tlsFiles{opts: o}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.reloadPair(); err != nil {
		return nil, err
	}
	if o.ClientCA != "" {
		if _, err := f.reloadCA(); err != nil {
			return nil, err
		}
	}
	f.publish()
	return f, nil
}

// serverConfig is the tls.Config of the xDS listener: every handshake
// asks f for the files' latest content.
func (f *tlsFiles) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return f.config.Load(), nil },
	}
}

// served is the certificate new handshakes get.
func (f *tlsFiles) served() *x509.Certificate {
	return f.config.Load().Certificates[0].Leaf
}

// publish builds the config new handshakes get from the latest good pair
// and pool. f.mu is held.
func (f *tlsFiles) publish() {
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*f.pair},
		// A resumed session skips client certificate verification, so a
		// client of a CA that has since been rotated out could come back
		// on an old ticket. xDS connections live long: resumption saves
		// little.
		SessionTicketsDisabled: true,
	}
	if f.pool != nil {
		cfg.ClientCAs = f.pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	f.config.Store(cfg)
}

// reload reads the files again and serves what changed and loads; a file
// that does not load is logged and the previous content stays.
func (f *tlsFiles) reload() {
	f.mu.Lock()
	defer f.mu.Unlock()
	changed, err := f.reloadPair()
	if err != nil {
		f.opts.Log.Warn("xds: keeping the previous certificate: the new one does not load", "error", err)
	}
	if f.opts.ClientCA != "" {
		caChanged, err := f.reloadCA()
		if err != nil {
			f.opts.Log.Warn("xds: keeping the previous client CA: the new one does not load", "error", err)
		}
		changed = changed || caChanged
	}
	if changed {
		f.publish()
	}
}

// reloadPair reads the certificate and key; it reports whether a new
// pair loaded. f.mu is held.
func (f *tlsFiles) reloadPair() (bool, error) {
	certPEM, err := os.ReadFile(f.opts.Cert)
	if err != nil {
		return false, fmt.Errorf("reading the xDS certificate %s: %w", f.opts.Cert, err)
	}
	keyPEM, err := os.ReadFile(f.opts.Key)
	if err != nil {
		return false, fmt.Errorf("reading the xDS key %s: %w", f.opts.Key, err)
	}
	if bytes.Equal(certPEM, f.certPEM) && bytes.Equal(keyPEM, f.keyPEM) {
		return false, nil
	}
	f.certPEM, f.keyPEM = certPEM, keyPEM
	if err := checkCertificates(certPEM); err != nil {
		return false, fmt.Errorf("the xDS certificate %s: %w", f.opts.Cert, err)
	}
	// The certificate is sound: what is wrong now is the key, or that it
	// is another certificate's.
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("the xDS key %s (for certificate %s): %w", f.opts.Key, f.opts.Cert, err)
	}
	f.pair = &pair
	leaf := pair.Leaf
	args := []any{"cert", f.opts.Cert, "subject", leaf.Subject.String(), "serial", leaf.SerialNumber.Text(16),
		"notAfter", leaf.NotAfter.UTC().Format(time.RFC3339)}
	if time.Now().After(leaf.NotAfter) {
		f.opts.Log.Warn("xds: serving an expired certificate", args...)
	} else {
		f.opts.Log.Info("xds: serving certificate", args...)
	}
	return true, nil
}

// reloadCA reads the client CA bundle; it reports whether a new bundle
// loaded. f.mu is held.
func (f *tlsFiles) reloadCA() (bool, error) {
	caPEM, err := os.ReadFile(f.opts.ClientCA)
	if err != nil {
		return false, fmt.Errorf("reading the client CA %s: %w", f.opts.ClientCA, err)
	}
	if bytes.Equal(caPEM, f.caPEM) {
		return false, nil
	}
	f.caPEM = caPEM
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return false, fmt.Errorf("the client CA file %s holds no PEM certificate", f.opts.ClientCA)
	}
	f.pool = pool
	f.opts.Log.Info("xds: verifying client certificates against CA", "clientCA", f.opts.ClientCA,
		"subjects", caSubjects(caPEM))
	return true, nil
}

// checkCertificates says what is wrong with a certificate file: no
// certificate in it, or one that does not parse.
func checkCertificates(data []byte) error {
	n := 0
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return errors.New("no PEM certificate in the file")
	}
	return nil
}

// caSubjects names the certificates of a bundle, for the log.
func caSubjects(bundle []byte) []string {
	var out []string
	for len(bundle) > 0 {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			break
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c.Subject.String()+" (until "+c.NotAfter.UTC().Format(time.RFC3339)+")")
		}
	}
	return out
}

// follow re-reads the files after their folders change and every
// Interval, until ctx ends. Without file events (inotify exhausted, say)
// the periodic re-read goes on alone: certificates still rotate, later.
func (f *tlsFiles) follow(ctx context.Context) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w, err := f.watch(); err != nil {
		f.opts.Log.Warn("xds: cannot watch the certificate files; reading them every interval only",
			"interval", f.opts.Interval, "error", err)
	} else {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	// A change between the first read and the watch would be missed:
	// read once more now that events are seen.
	settle := time.NewTimer(0)
	defer settle.Stop()
	tick := time.NewTicker(f.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			// Any event of the folders: a Secret volume's update names
			// ..data and its hidden folders, never the files.
			settle.Reset(tlsSettle)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			f.opts.Log.Warn("xds: watching the certificate files", "error", err)
			settle.Reset(tlsSettle)
		case <-settle.C:
			f.reload()
		case <-tick.C:
			f.reload()
		}
	}
}

// watch watches the folders of the files.
func (f *tlsFiles) watch() (*fsnotify.Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	for _, dir := range f.dirs() {
		if err := w.Add(dir); err != nil {
			w.Close()
			return nil, fmt.Errorf("watching %s: %w", dir, err)
		}
	}
	return w, nil
}

// dirs are the folders holding the files, each once.
func (f *tlsFiles) dirs() []string {
	var out []string
	for _, p := range []string{f.opts.Cert, f.opts.Key, f.opts.ClientCA} {
		if p != "" {
			out = append(out, filepath.Dir(p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
