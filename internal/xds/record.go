package xds

import (
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
)

// This file is what the server tells of its streams: each stream's own
// record (stream.go) read as a snapshot under the stream's lock, for
// /debug/syncz, config dumps and the client counts, and the Observer
// that metrics hear responses, ACKs and NACKs through. There is no
// second account of what a client subscribes to or holds: the stream's
// protocol state is the record.

// Observer is told what happens on the xDS streams, for metrics. Its
// methods are called synchronously on the streams' goroutines, often
// concurrently, and must be fast and must not call back into the Server.
//
// typ is the short type name: "LDS", "RDS", "CDS", "EDS", or "other"
// for every type meshpilot does not serve (a type URL is the client's
// text and never a label). sinceChange is the time from the model change
// that caused a response (push.Request.Start) to the moment of the call;
// it is zero when the response was not caused by a push (the first
// answer to a new subscription, say).
type Observer interface {
	// ResponseSent: a response is about to be written to the stream.
	ResponseSent(typ string, grpc bool, sinceChange time.Duration)
	// ACKed: the client accepted the latest response of the type.
	ACKed(typ string, grpc bool, sinceChange time.Duration)
	// NACKed: the client rejected a response of the type.
	NACKed(typ string, grpc bool)
}

// Sync states of a resource type on a stream, as `meshpilot status` shows
// them (the names follow istioctl proxy-status).
const (
	// Synced: the client ACKed the latest response sent.
	Synced = "SYNCED"
	// Stale: a response was sent and is not acknowledged yet.
	Stale = "STALE"
	// NACKed: the client rejected the latest response sent; meshpilot
	// does not resend it until its inputs change.
	NACKed = "NACKED"
	// NotSent: the client subscribed and nothing was sent yet.
	NotSent = "NOT SENT"
)

// Sent identifies one response on a stream.
type Sent struct {
	Version string    `json:"version"`
	Nonce   string    `json:"nonce"`
	Time    time.Time `json:"time"`
}

// NACK is a rejected response and the error the client gave (its first
// MaxNACKBytes).
type NACK struct {
	Version string    `json:"version"`
	Nonce   string    `json:"nonce"`
	Error   string    `json:"error"`
	Time    time.Time `json:"time"`
}

// TypeSync is the state of one resource type on one stream.
type TypeSync struct {
	// Subscribed lists the names the client asked for; Wildcard is true
	// when it asked for everything of the type.
	Subscribed []string `json:"subscribed,omitempty"`
	Wildcard   bool     `json:"wildcard,omitempty"`
	// LastSent is the latest response sent, LastACK the latest the client
	// accepted, LastNACK the latest it rejected.
	LastSent *Sent `json:"lastSent,omitempty"`
	LastACK  *Sent `json:"lastACK,omitempty"`
	LastNACK *NACK `json:"lastNACK,omitempty"`
	// Status is Synced, Stale, NACKed or NotSent.
	Status string `json:"status"`
}

func syncStatus(sent, acked *Sent, nacked *NACK) string {
	switch {
	case sent == nil:
		return NotSent
	case nacked != nil && nacked.Nonce == sent.Nonce:
		return NACKed
	case acked != nil && acked.Nonce == sent.Nonce:
		return Synced
	}
	return Stale
}

// ClientInfo describes one connected xDS stream.
type ClientInfo struct {
	// Stream numbers the stream within its kind (state of the world or
	// delta).
	Stream    int64  `json:"stream"`
	NodeID    string `json:"nodeID"`
	Namespace string `json:"namespace,omitempty"`
	// Cluster is the cluster the client runs in (node metadata
	// CLUSTER_ID, else the local cluster, --cluster-id).
	Cluster string `json:"cluster,omitempty"`
	// Identity is the SPIFFE ID of the client certificate the node was
	// found entitled by (Options.RequireIdentity); empty without.
	Identity  string    `json:"identity,omitempty"`
	GRPC      bool      `json:"grpc"`
	Delta     bool      `json:"delta"`
	Connected time.Time `json:"connected"`
	// NACKs counts the responses the client rejected; LastNACK is the
	// error it gave for the latest.
	NACKs    uint64 `json:"nacks"`
	LastNACK string `json:"lastNACK,omitempty"`
	// Types holds the per-type sync state by short type name ("LDS",
	// "RDS", "CDS", "EDS"; the type URL for types meshpilot does not
	// serve).
	Types map[string]*TypeSync `json:"sync,omitempty"`
}

// Kind is "grpc" for proxyless gRPC clients and "envoy" for every other
// client.
func (ci *ClientInfo) Kind() string {
	if ci.GRPC {
		return "grpc"
	}
	return "envoy"
}

// info is a snapshot of the stream's record; with resources, what the
// client holds of each type too.
func (st *xdsStream) info(resources map[string][]*anypb.Any) ClientInfo {
	st.mu.Lock()
	defer st.mu.Unlock()
	ci := ClientInfo{
		Stream: st.key.id, Delta: st.key.delta, Connected: st.connected,
		NodeID: st.nodeID, Namespace: st.namespace, Cluster: st.cluster, GRPC: st.grpcClient,
		Identity: st.identity, NACKs: st.nacks, LastNACK: st.lastNACK,
		Types: make(map[string]*TypeSync, len(st.types)),
	}
	for _, ts := range st.types {
		name := ts.label
		if ts.typ < 0 {
			name = ts.url // bounded: MaxTypeURLBytes, MaxTypesPerStream
		}
		sync := &TypeSync{
			Subscribed: slices.Clone(ts.sub.names),
			Wildcard:   st.coversAll(ts),
			LastSent:   copyOf(ts.lastSent),
			LastACK:    copyOf(ts.lastACK),
			LastNACK:   copyOf(ts.lastNACK),
			Status:     syncStatus(ts.lastSent, ts.lastACK, ts.lastNACK),
		}
		ci.Types[name] = sync
		if resources != nil && ts.lastACK != nil {
			resources[name] = anys(ts.held)
		}
	}
	return ci
}

func copyOf[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

func anys(es []*entry) []*anypb.Any {
	out := make([]*anypb.Any, len(es))
	for i, e := range es {
		out[i] = e.any
	}
	return out
}

// subscribedOnly returns the entries named in subscribed (sorted): es
// itself when that is all of them, else a copy, since responses share
// their lists.
func subscribedOnly(es []*entry, subscribed []string) []*entry {
	keep := 0
	for _, e := range es {
		if _, ok := slices.BinarySearch(subscribed, e.name); ok {
			keep++
		}
	}
	if keep == len(es) {
		return es
	}
	out := make([]*entry, 0, keep)
	for _, e := range es {
		if _, ok := slices.BinarySearch(subscribed, e.name); ok {
			out = append(out, e)
		}
	}
	return out
}

// streamSet holds the open streams: the one place that knows them all,
// for the client cap, the counts and the snapshots.
type streamSet struct {
	mu sync.Mutex // guards m
	m  map[streamKey]*xdsStream
}

// add records a new stream, unless limit (when above zero) streams are
// open already: the check and the insertion are one step, so concurrent
// opens cannot overshoot the limit.
func (s *streamSet) add(st *xdsStream, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit > 0 && len(s.m) >= limit {
		return false
	}
	if s.m == nil {
		s.m = map[streamKey]*xdsStream{}
	}
	s.m[st.key] = st
	return true
}

func (s *streamSet) remove(k streamKey) {
	s.mu.Lock()
	delete(s.m, k)
	s.mu.Unlock()
}

func (s *streamSet) get(k streamKey) *xdsStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

// all lists the open streams.
func (s *streamSet) all() []*xdsStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*xdsStream, 0, len(s.m))
	for _, st := range s.m {
		out = append(out, st)
	}
	return out
}

// Clients lists the connected xDS streams, ordered by node id then
// connection time, with their per-type sync state.
func (s *Server) Clients() []ClientInfo {
	sts := s.streams.all()
	out := make([]ClientInfo, 0, len(sts))
	for _, st := range sts {
		out = append(out, st.info(nil))
	}
	slices.SortFunc(out, func(a, b ClientInfo) int {
		if a.NodeID != b.NodeID {
			return strings.Compare(a.NodeID, b.NodeID)
		}
		return a.Connected.Compare(b.Connected)
	})
	return out
}

// ClientCounts returns how many streams gRPC clients and other (Envoy)
// clients hold open.
func (s *Server) ClientCounts() (grpcClients, envoyClients int) {
	for _, st := range s.streams.all() {
		st.mu.Lock()
		g := st.grpcClient
		st.mu.Unlock()
		if g {
			grpcClients++
		} else {
			envoyClients++
		}
	}
	return grpcClients, envoyClients
}

// ClientConfig is what one stream of a client holds: per type, the
// version it last ACKed and the resources that version comprises.
type ClientConfig struct {
	ClientInfo
	// Resources holds, by short type name, the resources of the latest
	// ACKed response (for RDS and EDS, with those of earlier responses
	// the client still holds).
	Resources map[string][]*anypb.Any
}

// ConfigDump returns what each stream of the node holds; none when the
// node is not connected.
func (s *Server) ConfigDump(nodeID string) []ClientConfig {
	var out []ClientConfig
	for _, st := range s.streams.all() {
		if st.nodeIDOf() != nodeID {
			continue
		}
		res := map[string][]*anypb.Any{}
		out = append(out, ClientConfig{ClientInfo: st.info(res), Resources: res})
	}
	slices.SortFunc(out, func(a, b ClientConfig) int { return a.Connected.Compare(b.Connected) })
	return out
}
