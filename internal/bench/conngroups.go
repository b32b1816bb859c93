package bench

// AutoConnections is the most connections meshbench opens when
// Config.StreamsPerConn is 0: beyond it, clients share connections, as a
// process with several xDS channel targets does (grpc-go opens an ADS
// stream per target). Every connection costs meshpilot and meshbench a
// file descriptor, transport buffers and goroutines each; with at most a
// thousand, --clients 10000 runs ten streams to a connection and neither
// process comes near its open-file limit.
const AutoConnections = 1000

// connGroups spreads clients over connections: consecutive client ids
// share one, perConn to a connection, the last connection taking the
// rest.
type connGroups struct {
	perConn int // streams per connection, at least 1
}

// newConnGroups is the spread of clients for Config.StreamsPerConn:
// streamsPerConn itself when positive, else as few streams per
// connection as keep the connections at AutoConnections or fewer.
func newConnGroups(clients, streamsPerConn int) connGroups {
	if streamsPerConn > 0 {
		return connGroups{perConn: streamsPerConn}
	}
	return connGroups{perConn: max(1, (clients+AutoConnections-1)/AutoConnections)}
}

// conn is the connection index of client id.
func (g connGroups) conn(id int) int { return id / g.perConn }

// conns is how many connections clients use.
func (g connGroups) conns(clients int) int { return (clients + g.perConn - 1) / g.perConn }
