package xds

import (
	"context"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/peer"
)

// Shedding moves a client to another replica, and only a new connection
// does that: behind a Service, kube-proxy picks a replica when a
// connection opens, and every stream on it goes to that replica. Ending
// a stream is not enough, since grpc-go's xDS client (and Envoy) opens
// its next stream on the same HTTP/2 connection, to the same replica. So
// Shed closes the client's connection: every stream on it fails with
// Unavailable (ADS and Envoy's per-type streams alike, a client's streams
// together), and the client's reconnect opens a new connection, which
// the Service spreads. gRPC offers no per-connection GOAWAY, hence the
// close; clients lose nothing, as they keep their configuration while
// they reconnect.

// SheddableConn is one client connection that Shed can close, with the
// xDS streams open on it.
type SheddableConn struct {
	// ID is the server's own number for the connection.
	ID int64
	// Opened is when its newest stream opened: a client that just opened
	// a stream has just been accepted, whatever the connection's age.
	Opened time.Time
	// Streams is how many xDS streams are open on it (each counts as a
	// client in ClientCounts).
	Streams int
}

// Listener wraps the xDS listener so that Shed can close the
// connections it accepts. Streams on connections it did not accept are
// served but never shed.
func (s *Server) Listener(l net.Listener) net.Listener {
	return &shedListener{Listener: l, conns: &s.shed}
}

type shedListener struct {
	net.Listener
	conns *shedConns
}

func (l *shedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.conns.accepted(c), nil
}

// shedConn is an accepted connection; it leaves the registry when gRPC
// or Shed closes it.
type shedConn struct {
	net.Conn
	conns *shedConns
	once  sync.Once
	id    int64
	// streams and newest are guarded by shedConns.mu.
	streams int
	newest  time.Time
	ready   readyRead
}

func (c *shedConn) Close() error {
	c.once.Do(func() { c.conns.gone(c) })
	return c.Conn.Close()
}

// shedConns holds the open connections by remote address, which is how
// a stream finds its own (gRPC puts it in the stream's peer), and which
// connection each stream is on.
type shedConns struct {
	seq      atomic.Int64
	mu       sync.Mutex // guards byAddr, byStream and every shedConn's streams and newest
	byAddr   map[string]*shedConn
	byStream map[streamKey]*shedConn
}

func (r *shedConns) accepted(c net.Conn) *shedConn {
	sc := &shedConn{Conn: c, conns: r, id: r.seq.Add(1)}
	sc.ready.init(c)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byAddr == nil {
		r.byAddr = map[string]*shedConn{}
		r.byStream = map[streamKey]*shedConn{}
	}
	r.byAddr[c.RemoteAddr().String()] = sc
	return sc
}

func (r *shedConns) gone(c *shedConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byAddr[c.RemoteAddr().String()] == c {
		delete(r.byAddr, c.RemoteAddr().String())
	}
}

// add puts a stream just admitted on its connection.
func (r *shedConns) add(ctx context.Context, k streamKey) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.byAddr[p.Addr.String()]
	if c == nil {
		return // not accepted through Listener: never shed
	}
	c.streams++
	c.newest = time.Now()
	r.byStream[k] = c
}

func (r *shedConns) remove(k streamKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.byStream[k]; c != nil {
		c.streams--
		delete(r.byStream, k)
	}
}

// closeConnOf closes the connection a stream is on, if Listener
// accepted it.
func (r *shedConns) closeConnOf(k streamKey) {
	r.mu.Lock()
	c := r.byStream[k]
	r.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// SheddableConns lists the open connections that carry xDS streams, in
// the order they were accepted.
func (s *Server) SheddableConns() []SheddableConn {
	s.shed.mu.Lock()
	out := make([]SheddableConn, 0, len(s.shed.byAddr))
	for _, c := range s.shed.byAddr {
		if c.streams > 0 {
			out = append(out, SheddableConn{ID: c.id, Opened: c.newest, Streams: c.streams})
		}
	}
	s.shed.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Shed closes the connections with these ids, so that their clients
// reconnect through the Service, and returns how many streams were open
// on them. A stream counts as connected (ClientCounts) until its
// handler has seen the connection go.
func (s *Server) Shed(ids ...int64) int {
	want := make(map[int64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	s.shed.mu.Lock()
	var cs []*shedConn
	streams := 0
	for _, c := range s.shed.byAddr {
		if want[c.id] {
			cs = append(cs, c)
			streams += c.streams
		}
	}
	s.shed.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
	if len(cs) > 0 {
		s.shedCount.Add(uint64(streams))
		s.log.Debug("xds: closed client connections so that their clients reconnect to other replicas",
			"connections", len(cs), "streams", streams)
	}
	return streams
}

// ShedStreams returns how many streams were open on the connections Shed
// closed.
func (s *Server) ShedStreams() uint64 { return s.shedCount.Load() }
