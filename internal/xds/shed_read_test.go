//go:build unix

package xds

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc/mem"
)

// countingPool is a buffer pool that counts the buffers out of it.
type countingPool struct {
	mu  sync.Mutex // guards out
	out int
}

func (p *countingPool) Get(n int) *[]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out++
	b := make([]byte, n)
	return &b
}

func (p *countingPool) Put(*[]byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out--
}

func (p *countingPool) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out
}

// tcpPair is a connected pair of TCP connections on loopback.
func tcpPair(t *testing.T) (accepted, dialled net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dialled, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	accepted, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { accepted.Close(); dialled.Close() })
	return accepted, dialled
}

// TestReadOnReady: a connection the xDS listener accepted offers grpc-go
// the read that takes a buffer only once data is there (so that grpc-go
// keeps no read buffer for an idle connection): a TCP connection and any
// other alike, each read handing over exactly the one buffer it filled,
// the peer's close an EOF that holds none, and a closed connection an
// error that holds none.
func TestReadOnReady(t *testing.T) {
	var _ interface {
		ReadOnReady(int, mem.BufferPool) (*[]byte, int, error)
	} = (*shedConn)(nil)

	for _, tc := range []struct {
		name string
		pair func(t *testing.T) (net.Conn, net.Conn)
	}{
		{"tcp", tcpPair},
		{"pipe", func(t *testing.T) (net.Conn, net.Conn) {
			a, b := net.Pipe()
			t.Cleanup(func() { a.Close(); b.Close() })
			return a, b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, peer := tc.pair(t)
			c := (&shedConns{}).accepted(raw)
			pool := &countingPool{}

			// The read may start before the data is there: it waits
			// for it.
			type read struct {
				buf *[]byte
				n   int
				err error
			}
			got := make(chan read, 1)
			go func() {
				buf, n, err := c.ReadOnReady(16, pool)
				got <- read{buf, n, err}
			}()
			if _, err := peer.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r.err != nil || r.n != 5 || string((*r.buf)[:r.n]) != "hello" {
				t.Fatalf("read %d bytes, %v; want hello", r.n, r.err)
			}
			if h := pool.held(); h != 1 {
				t.Errorf("%d buffers out after a read, want 1 (the one handed over)", h)
			}
			pool.Put(r.buf)

			peer.Close()
			if buf, n, err := c.ReadOnReady(16, pool); buf != nil || n != 0 || !errors.Is(err, io.EOF) {
				t.Errorf("after the peer's close: %v, %d, %v; want no buffer, EOF", buf, n, err)
			}
			c.Close()
			if buf, n, err := c.ReadOnReady(16, pool); buf != nil || n != 0 || err == nil {
				t.Errorf("after closing: %v, %d, %v; want no buffer, an error", buf, n, err)
			}
			if h := pool.held(); h != 0 {
				t.Errorf("%d buffers out once every read is done, want 0", h)
			}
		})
	}
}
