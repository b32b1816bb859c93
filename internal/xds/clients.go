package xds

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshpilot/meshpilot/internal/translate"
)

// Observer is told what happens on the xDS streams, for metrics. Its
// methods are called synchronously on the streams' goroutines, often
// concurrently, and must be fast and must not call back into the Server.
//
// typ is the short type name: "LDS", "RDS", "CDS", "EDS", or the type URL
// of a type meshpilot does not serve. sinceChange is the time from the
// model change that caused a response (push.Request.Start) to the moment
// of the call; it is zero when the response was not caused by a push (the
// first answer to a new subscription, say).
type Observer interface {
	// ResponseSent: a response is about to be written to the stream.
	ResponseSent(typ string, grpc bool, sinceChange time.Duration)
	// ACKed: the client accepted the latest response of the type.
	ACKed(typ string, grpc bool, sinceChange time.Duration)
	// NACKed: the client rejected the latest response of the type.
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

// NACK is a rejected response and the error the client gave.
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

	// pending is the latest response sent, with what caused it and what
	// the client holds once it ACKs it; held is what it ACKed last. Both
	// hold their entries in the resource cache (cache.go): what a client
	// was sent and may still hold stays cached, and only that.
	pending *sentResponse
	held    []*entry
}

// letGoUnsubscribed drops, from what the stream holds of the type, the
// resources it no longer subscribes to, so that they leave the cache
// when no other client holds them, without waiting for the next response
// (which may never come: nothing else of the type need change). A
// wildcard subscription holds whatever it was sent.
func (ts *TypeSync) letGoUnsubscribed() {
	if ts.Wildcard {
		return
	}
	ts.held = subscribedOnly(ts.held, ts.Subscribed)
	if ts.pending != nil {
		ts.pending.resources = subscribedOnly(ts.pending.resources, ts.Subscribed)
	}
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

// shareStrings replaces each name of names found in sorted by sorted's
// string, equal but perhaps another copy.
func shareStrings(names, sorted []string) {
	for i, n := range names {
		if j, ok := slices.BinarySearch(sorted, n); ok {
			names[i] = sorted[j]
		}
	}
}

func anys(es []*entry) []*anypb.Any {
	out := make([]*anypb.Any, len(es))
	for i, e := range es {
		out[i] = e.any
	}
	return out
}

// sentResponse is what the server remembers of the latest response of a
// type on a stream until the client answers it.
type sentResponse struct {
	Sent
	change    time.Time // push.Request.Start of the push that caused it; zero if none
	resources []*entry  // everything the client holds of the type after it
}

func (ts *TypeSync) status() string {
	switch {
	case ts.LastSent == nil:
		return NotSent
	case ts.LastNACK != nil && ts.LastNACK.Nonce == ts.LastSent.Nonce:
		return NACKed
	case ts.LastACK != nil && ts.LastACK.Nonce == ts.LastSent.Nonce:
		return Synced
	}
	return Stale
}

func (ts *TypeSync) clone() *TypeSync {
	c := *ts
	c.Subscribed = slices.Clone(ts.Subscribed)
	if ts.LastSent != nil {
		s := *ts.LastSent
		c.LastSent = &s
	}
	if ts.LastACK != nil {
		s := *ts.LastACK
		c.LastACK = &s
	}
	if ts.LastNACK != nil {
		n := *ts.LastNACK
		c.LastNACK = &n
	}
	c.pending, c.held = nil, nil
	c.Status = ts.status()
	return &c
}

// ClientInfo describes one connected xDS stream.
type ClientInfo struct {
	// Stream numbers the stream within its kind (state of the world or
	// delta).
	Stream    int64  `json:"stream"`
	NodeID    string `json:"nodeID"`
	Namespace string `json:"namespace,omitempty"`
	// Cluster is the cluster the client says it runs in (node metadata
	// CLUSTER_ID); empty when it names none, which means the local
	// cluster (--cluster-id).
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

	// types is the tracker's per-type state, which clone makes Types of:
	// a slice of a stream's few types costs 100 bytes, a map of them 350.
	types []namedTypeSync
}

type namedTypeSync struct {
	typ string
	*TypeSync
}

// Kind is "grpc" for proxyless gRPC clients and "envoy" for every other
// client, as DESIGN.md classifies them.
func (ci *ClientInfo) Kind() string {
	if ci.GRPC {
		return "grpc"
	}
	return "envoy"
}

func (ci *ClientInfo) clone() ClientInfo {
	c := *ci
	c.types = nil
	c.Types = make(map[string]*TypeSync, len(ci.types))
	for _, ts := range ci.types {
		c.Types[ts.typ] = ts.clone()
	}
	return c
}

// typeSync is the tracker's state of a type, made on first use.
func (ci *ClientInfo) typeSync(typ string) *TypeSync {
	if ts := ci.findType(typ); ts != nil {
		return ts
	}
	ts := &TypeSync{}
	ci.types = append(ci.types, namedTypeSync{typ, ts})
	return ts
}

// findType is the tracker's state of a type; nil if none.
func (ci *ClientInfo) findType(typ string) *TypeSync {
	for _, ts := range ci.types {
		if ts.typ == typ {
			return ts.TypeSync
		}
	}
	return nil
}

// shortType names a type URL as the sync state and metrics do.
func (c *clientTracker) shortType(typeURL string) string {
	for _, t := range c.types {
		if t.URL == typeURL {
			return t.Short
		}
	}
	return typeURL
}

// clientTracker keeps the per-stream client state. Its methods are called
// by the streams (stream.go: at open and close, on each request, before
// each send) and by readers (Clients, ConfigDump) on any goroutine; mu
// guards everything.
type clientTracker struct {
	observer Observer
	// types are the served types, set before the first stream opens.
	types []translate.ResourceType

	mu      sync.Mutex // guards clients
	clients map[streamKey]*ClientInfo
}

func newClientTracker(o Observer) *clientTracker {
	return &clientTracker{observer: o, clients: map[streamKey]*ClientInfo{}}
}

// open records a new stream, unless limit (when above zero) streams are
// open already: the check and the insertion are one step, so concurrent
// opens cannot overshoot the limit. A refused stream is not recorded, so
// its close callback removes nothing.
func (c *clientTracker) open(id int64, delta bool, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if limit > 0 && len(c.clients) >= limit {
		return false
	}
	c.clients[streamKey{id, delta}] = &ClientInfo{Stream: id, Delta: delta, Connected: time.Now()}
	return true
}

func (c *clientTracker) close(id int64, delta bool) {
	c.mu.Lock()
	delete(c.clients, streamKey{id, delta})
	c.mu.Unlock()
}

// requestResult says what a request meant, for the caller's log and
// limits: subscribed is the size of the type's subscription after it.
type requestResult struct {
	nodeID     string
	nack       bool
	subscribed int
	// names is the type's subscribed names, sorted, never modified:
	// replaced by a request that changes them.
	names []string
}

// setIdentity records the identity a stream's node was found entitled
// by.
func (c *clientTracker) setIdentity(k streamKey, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ci := c.clients[k]; ci != nil {
		ci.Identity = id
	}
}

// nodeID is the id of the node on a stream, once a request named it.
func (c *clientTracker) nodeID(k streamKey) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ci := c.clients[k]; ci != nil {
		return ci.NodeID
	}
	return ""
}

// request records a request: who is on the stream, what it subscribes to,
// and whether it ACKs or NACKs the latest response of its type. For delta
// streams names are the subscribe and unsubscribe lists.
func (c *clientTracker) request(req clientRequest) requestResult {
	id, delta, node, names, unsubscribe, nonce, errDetail := req.stream, req.delta, req.node, req.names, req.unsubscribe, req.nonce, req.nack
	now := time.Now()
	typ := c.shortType(req.typeURL)
	c.mu.Lock()
	ci := c.clients[streamKey{id, delta}]
	if ci == nil { // cannot happen: open ran first
		c.mu.Unlock()
		return requestResult{}
	}
	if ci.NodeID == "" && node != nil {
		cl := translate.ClientFromNode(node)
		ci.NodeID, ci.Namespace, ci.Cluster, ci.GRPC = cl.ID, cl.Namespace, cl.ClusterID, cl.GRPC
	}
	ts := ci.typeSync(typ)
	first := ts.LastSent == nil && len(ts.Subscribed) == 0 && !ts.Wildcard
	unsubscribed := false // the subscription may have lost names
	if delta {
		set := map[string]struct{}{}
		for _, n := range ts.Subscribed {
			set[n] = struct{}{}
		}
		for _, n := range names {
			set[n] = struct{}{}
		}
		for _, n := range unsubscribe {
			delete(set, n)
		}
		delete(set, "*")
		ts.Wildcard = (first && len(names) == 0) || slices.Contains(names, "*") ||
			(ts.Wildcard && !slices.Contains(unsubscribe, "*"))
		ts.Subscribed = slices.Sorted(maps.Keys(set))
		unsubscribed = len(unsubscribe) > 0
	} else {
		ts.Wildcard = (first && len(names) == 0) || slices.Contains(names, "*") || (ts.Wildcard && len(names) == 0)
		// An ACK usually repeats the names (in the same order or not).
		// Then nothing is copied, and the request is made to share the
		// stream's strings: what the stream keeps of it (the
		// subscription, stream.go) holds the stream's one copy of its
		// names, not a copy per request.
		if slices.Equal(names, ts.Subscribed) {
			copy(names, ts.Subscribed)
		} else {
			sub := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "*" })
			slices.Sort(sub)
			if slices.Equal(sub, ts.Subscribed) {
				shareStrings(names, ts.Subscribed)
			} else {
				ts.Subscribed = sub
				unsubscribed = true
			}
		}
	}
	// gRPC clients never get everything: an empty list means nothing.
	ts.Wildcard = ts.Wildcard && !ci.GRPC
	if unsubscribed {
		ts.letGoUnsubscribed()
	}
	res := requestResult{nodeID: ci.NodeID, subscribed: len(ts.Subscribed), names: ts.Subscribed}
	var ack, nack bool
	var sinceChange time.Duration
	if p := ts.pending; p != nil && nonce != "" && nonce == p.Nonce {
		if errDetail != nil {
			nack = true
			ts.LastNACK = &NACK{Version: p.Version, Nonce: p.Nonce, Error: errDetail.GetMessage(), Time: now}
			ci.NACKs++
			ci.LastNACK = errDetail.GetMessage()
		} else {
			ack = true
			ts.LastACK = &p.Sent // p's Sent is never changed again
			ts.held = p.resources
			if !p.change.IsZero() {
				sinceChange = now.Sub(p.change)
			}
		}
		// LastSent and LastACK point into p: what it held must not stay
		// held through them (a NACKed response is not held at all).
		p.resources = nil
		ts.pending = nil
	} else if errDetail != nil && nonce != "" {
		// A NACK of an older response (or of one sent before this
		// process tracked it): still a NACK.
		nack = true
		ts.LastNACK = &NACK{Nonce: nonce, Error: errDetail.GetMessage(), Time: now}
		ci.NACKs++
		ci.LastNACK = errDetail.GetMessage()
	}
	grpcClient := ci.GRPC
	c.mu.Unlock()
	if c.observer != nil {
		switch {
		case ack:
			c.observer.ACKed(typ, grpcClient, sinceChange)
		case nack:
			c.observer.NACKed(typ, grpcClient)
		}
	}
	res.nack = nack
	return res
}

// sent records a response about to be sent on a stream.
func (c *clientTracker) sent(id int64, delta bool, typeURL string, r *sentResponse) {
	typ := c.shortType(typeURL)
	c.mu.Lock()
	ci := c.clients[streamKey{id, delta}]
	if ci == nil {
		c.mu.Unlock()
		return
	}
	ts := ci.typeSync(typ)
	ts.LastSent = &r.Sent // r is never changed again
	ts.pending = r
	grpcClient := ci.GRPC
	c.mu.Unlock()
	if c.observer != nil {
		var since time.Duration
		if !r.change.IsZero() {
			since = r.Time.Sub(r.change)
		}
		c.observer.ResponseSent(typ, grpcClient, since)
	}
}

// list copies the client state, ordered by node id then connection time.
func (c *clientTracker) list() []ClientInfo {
	c.mu.Lock()
	out := make([]ClientInfo, 0, len(c.clients))
	for _, ci := range c.clients {
		out = append(out, ci.clone())
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b ClientInfo) int {
		if a.NodeID != b.NodeID {
			return strings.Compare(a.NodeID, b.NodeID)
		}
		return a.Connected.Compare(b.Connected)
	})
	return out
}

// counts returns the number of connected streams of gRPC and other
// clients.
func (c *clientTracker) counts() (grpcClients, envoyClients int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ci := range c.clients {
		if ci.GRPC {
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
	c := s.tracker
	c.mu.Lock()
	var out []ClientConfig
	for _, ci := range c.clients {
		if ci.NodeID != nodeID {
			continue
		}
		cc := ClientConfig{ClientInfo: ci.clone(), Resources: map[string][]*anypb.Any{}}
		for _, ts := range ci.types {
			if ts.LastACK != nil {
				cc.Resources[ts.typ] = anys(ts.held)
			}
		}
		out = append(out, cc)
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b ClientConfig) int { return a.Connected.Compare(b.Connected) })
	return out
}
