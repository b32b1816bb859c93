package kubeclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
)

// CheckTimeout bounds the single request Check makes.
const CheckTimeout = 5 * time.Second

// Check asks the API server for its version, once, without retries and
// within CheckTimeout, and turns any failure into one sentence that names
// the server and says what to look at: unreachable, TLS, credentials
// refused (401), forbidden (403) or an unexpected answer.
func Check(ctx context.Context, cfg *rest.Config) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = CheckTimeout
	c.GroupVersion = &schema.GroupVersion{}
	c.APIPath = "/"
	c.NegotiatedSerializer = serializer.WithoutConversionCodecFactory{CodecFactory: kubeapi.StatusCodecs()}
	client, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return fmt.Errorf("the client configuration for the API server at %s is not usable: %v", cfg.Host, oneLine(err))
	}
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	body, err := client.Get().AbsPath("/version").MaxRetries(0).Do(ctx).Raw()
	if err == nil {
		return nil
	}
	// The unversioned client cannot always decode a Status body: read the
	// server's message from it directly.
	var st metav1.Status
	if se, ok := err.(*apierrors.StatusError); ok && json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Message != "" {
		se.ErrStatus.Message = st.Message
	}
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ctx.Err()
	}
	return Explain(cfg.Host, err)
}

// Explain turns an error from a request to the API server at host into one
// clear sentence. Errors it does not recognise are returned wrapped with
// the host.
func Explain(host string, err error) error {
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := int(status.Status().Code)
		msg := strings.TrimSpace(status.Status().Message)
		switch {
		case code == http.StatusUnauthorized:
			return fmt.Errorf("the API server at %s refused the credentials (401 Unauthorized); the token or client certificate in the kubeconfig is wrong or expired: log in again or fix the user of the current context", host)
		case code == http.StatusForbidden:
			return fmt.Errorf("the API server at %s accepted the credentials but forbids this request (403 Forbidden: %s); the user needs more RBAC permissions", host, msg)
		case code == http.StatusNotFound:
			return fmt.Errorf("the server at %s has no /version (404 Not Found); is it a Kubernetes API server? is the address in the kubeconfig right?", host)
		case code == 0:
			// A decoding failure rather than an HTTP status.
		default:
			return fmt.Errorf("the API server at %s answered %d %s: %s", host, code, http.StatusText(code), msg)
		}
	}

	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	var alert tls.AlertError
	switch {
	case errors.As(err, &unknownCA):
		return fmt.Errorf("TLS with the API server at %s failed: its certificate is signed by an unknown authority; the certificate-authority-data in the kubeconfig does not match the server", host)
	case errors.As(err, &hostErr):
		return fmt.Errorf("TLS with the API server at %s failed: %v; the server address in the kubeconfig does not match its certificate", host, hostErr)
	case errors.As(err, &invalid):
		return fmt.Errorf("TLS with the API server at %s failed: %v; check the certificates and the clock", host, invalid)
	case errors.As(err, &verify):
		return fmt.Errorf("TLS with the API server at %s failed: %v; check the certificate authority in the kubeconfig", host, verify.Err)
	case errors.As(err, &header), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("TLS with the API server at %s failed: the server does not speak TLS; is the address in the kubeconfig right (https vs http, port)?", host)
	case errors.As(err, &alert), strings.Contains(err.Error(), "remote error: tls:"):
		return fmt.Errorf("TLS with the API server at %s failed: the server rejected the handshake (%s); check the client certificate in the kubeconfig", host, tlsDetail(err))
	}

	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return fmt.Errorf("cannot reach the API server at %s: the name %s does not resolve; is the address in the kubeconfig right?", host, dnsErr.Name)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("cannot reach the API server at %s: connection refused; is it running? is the address in the kubeconfig right?", host)
	}
	if errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return fmt.Errorf("cannot reach the API server at %s: no route to the host; is it running? is the address in the kubeconfig right?", host)
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return fmt.Errorf("the API server at %s did not answer within %s; is it running? is the address in the kubeconfig right?", host, CheckTimeout)
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) || errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("cannot reach the API server at %s: %v; is it running? is the address in the kubeconfig right?", host, oneLine(err))
	}
	return fmt.Errorf("the API server at %s could not be queried: %v", host, oneLine(err))
}

func tlsDetail(err error) string {
	s := err.Error()
	if i := strings.Index(s, "remote error: "); i >= 0 {
		return s[i+len("remote error: "):]
	}
	return s
}
