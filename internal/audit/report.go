package audit

import (
	"time"
)

// Report is what one audit found. /debug/consistencyz shows it and
// `meshpilot status consistency` reads it: fields are only ever added.
type Report struct {
	// Started is when the audit began listing.
	Started time.Time `json:"started"`
	// Took is how long listing and comparing took, e.g. "152ms".
	Took string `json:"took"`
	// Listed says what the fresh LIST read, per kind in audit order.
	Listed []Listed `json:"listed"`
	// Services is the number of services in the model rebuilt from the
	// LIST.
	Services int `json:"services"`
	// Differences are ordered by kind (in Listed's order, then the
	// model's), object and field; [] when the caches and the model are
	// exact.
	Differences []Difference `json:"differences"`
}

// Listed is what the LIST of one kind read.
type Listed struct {
	Kind    string `json:"kind"`
	Objects int    `json:"objects"`
	// Pages is the number of LIST requests (Options.PageSize objects
	// each at most), over every watched namespace.
	Pages int `json:"pages"`
}

// Difference is one thing meshpilot holds otherwise than the cluster:
//
//	{"kind": "EndpointSlice", "object": "shop/cart-x7k2", "field": "metadata.resourceVersion",
//	 "cache": "1042", "list": "1077", "since": "2026-12-01T18:02:11Z", "audits": 2}
//	{"kind": "model.Endpoint", "object": "cart.shop.svc.cluster.local:8080",
//	 "field": "endpoint 10.0.3.7", "cache": "absent", "list": "present", ...}
//
// Kinds are the watched Kubernetes kinds (Service, EndpointSlice, Pod,
// Node, Namespace, and Istio's DestinationRule, VirtualService,
// ServiceEntry, WorkloadEntry: the informer cache against the LIST) and
// model.Service and model.Endpoint (the model against one rebuilt from
// the LIST).
type Difference struct {
	Kind string `json:"kind"`
	// Object is "namespace/name" (the name alone for cluster-scoped
	// kinds), or for the model a hostname, with ":port" (the service
	// port) for endpoints.
	Object string `json:"object"`
	// Field is the field that differs; empty when the object is on one
	// side only.
	Field string `json:"field,omitempty"`
	// Cache is meshpilot's value (the informer cache's, or the model's),
	// List the cluster's (the LIST's, or the model rebuilt from it);
	// "absent" when the object is not there.
	Cache string `json:"cache"`
	List  string `json:"list"`
	// Since is when an audit first found it; Audits is how many audits
	// in a row have found it.
	Since  time.Time `json:"since"`
	Audits int       `json:"audits"`

	// service is the Kubernetes Service of a model difference, to
	// rebuild it.
	service serviceRef
}

// serviceRef names a Kubernetes Service.
type serviceRef struct{ namespace, name string }

const absent = "absent"

// Kinds of the model's differences.
const (
	KindModelService  = "model.Service"
	KindModelEndpoint = "model.Endpoint"
)

// diffKey identifies a difference from one audit to the next, whatever
// its values.
type diffKey struct{ kind, object, field string }

func (d Difference) key() diffKey { return diffKey{d.Kind, d.Object, d.Field} }

// tracked is what is remembered of a difference between audits.
type tracked struct {
	since  time.Time
	audits int
}

// track fills in Since and Audits from the previous audit's differences
// and returns what to remember for the next: a difference not found by
// an audit is forgotten, so that Audits counts audits in a row.
func track(prev map[diffKey]tracked, diffs []Difference, now time.Time) map[diffKey]tracked {
	next := make(map[diffKey]tracked, len(diffs))
	for i := range diffs {
		k := diffs[i].key()
		t, ok := prev[k]
		if !ok {
			t = tracked{since: now}
		}
		t.audits++
		diffs[i].Since, diffs[i].Audits = t.since, t.audits
		next[k] = t
	}
	return next
}
