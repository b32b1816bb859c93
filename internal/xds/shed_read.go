//go:build unix

package xds

import (
	"errors"
	"io"
	"net"
	"syscall"

	"google.golang.org/grpc/mem"
)

// readyRead lets grpc-go read a connection without a read buffer of its
// own. grpc-go reads a connection it accepted as a *net.TCPConn only once
// data is there, into a buffer taken from its pool then, so that an idle
// connection holds none; any other net.Conn gets a read buffer
// (connReadBuffer) for its whole life unless it has the method
// ReadOnReady, which grpc-go looks for (its readyreader.Reader, with this
// contract). shedConn wraps the TCP connection, so it offers the same
// read itself. Under TLS grpc-go reads the TLS connection instead, which
// reads this one through Read.
//
// Only the connection's reader goroutine reads, so the state of a read
// lives here rather than in a closure made for each.
type readyRead struct {
	raw    syscall.RawConn // nil: not a TCP connection, read through Read
	doRead func(fd uintptr) bool
	// One read's request and outcome.
	size int
	pool mem.BufferPool
	buf  *[]byte
	n    int
	err  error
}

func (r *readyRead) init(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	r.raw = raw
	r.doRead = func(fd uintptr) bool {
		r.buf = r.pool.Get(r.size)
		for {
			r.n, r.err = syscall.Read(int(fd), *r.buf)
			if !errors.Is(r.err, syscall.EINTR) {
				break
			}
		}
		if r.err != nil {
			r.pool.Put(r.buf)
			r.buf = nil
		}
		// Not ready: the poller waits for data, with no buffer held.
		return !errors.Is(r.err, syscall.EAGAIN)
	}
}

// ReadOnReady waits for data, then reads up to size bytes of it into a
// buffer from pool, which the caller puts back. The caller uses n > 0
// bytes before it looks at the error.
func (c *shedConn) ReadOnReady(size int, pool mem.BufferPool) (*[]byte, int, error) {
	r := &c.ready
	if r.raw == nil {
		buf := pool.Get(size)
		n, err := c.Conn.Read(*buf)
		if n == 0 {
			pool.Put(buf)
			return nil, 0, err
		}
		return buf, n, err
	}
	r.size, r.pool = size, pool
	err := r.raw.Read(r.doRead)
	buf, n, rerr := r.buf, r.n, r.err
	r.pool, r.buf, r.err = nil, nil, nil
	switch {
	case err != nil: // the connection is closed or past its deadline
		if buf != nil {
			pool.Put(buf)
		}
		return nil, 0, err
	case rerr != nil:
		return nil, 0, rerr
	case n == 0: // read(2) says the peer closed
		pool.Put(buf)
		return nil, 0, io.EOF
	}
	return buf, n, nil
}
