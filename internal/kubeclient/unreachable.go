package kubeclient

import (
	"errors"
	"io"
	"net"
	"syscall"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// unreachable reports whether err, from sending a request to the API
// server, says that the server cannot be reached at all (nothing listens,
// the connection broke, no answer in time), as opposed to a server that
// answers but refuses (TLS, a proxy's error): only the first is worth
// waiting out, the second would wait forever.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) ||
		utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err)
}
