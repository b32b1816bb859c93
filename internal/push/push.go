// Package push turns the registry's change events into push requests:
// it merges bursts of events (debounce) and says what changed, so that
// the xDS server regenerates and sends only what depends on it.
package push

import (
	"maps"
	"time"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Request says what changed since the previous push.
//
// A hostname is in at most one of Services and EndpointsOnly: a service
// change (definition, existence) includes its endpoints and their
// identities. ServiceAccounts is a part of EndpointsOnly.
type Request struct {
	// Full: anything may have changed; regenerate everything.
	Full bool
	// Services are the hostnames whose service was added, changed or
	// deleted: everything generated from them is regenerated.
	Services map[model.Hostname]struct{}
	// EndpointsOnly are the hostnames of which only the endpoints changed:
	// only their ClusterLoadAssignments are regenerated and sent, and only
	// to the clients subscribed to them.
	EndpointsOnly map[model.Hostname]struct{}
	// ServiceAccounts are the hostnames of EndpointsOnly whose endpoints'
	// identities may have changed too (model.KindServiceAccounts): what
	// verifies them (ISTIO_MUTUAL clusters) is regenerated as well.
	ServiceAccounts map[model.Hostname]struct{}
	// Namespaces are the namespaces of the services in Services, whose
	// set of services changed (model.KindNamespace).
	Namespaces map[string]struct{}
	// Configs are the configuration keys that changed other than a
	// service's (model.MeshRetryKey, say).
	Configs map[model.ConfigKey]struct{}
	// Start is when the earliest change merged into this request reached
	// meshpilot: the event's Observed time when the registry knows it,
	// else when the event arrived here. Convergence is measured from it.
	Start time.Time
	// Events counts the events merged into this request.
	Events int
}

// IsEmpty reports whether the request asks for nothing.
func (r *Request) IsEmpty() bool {
	return !r.Full && len(r.Services) == 0 && len(r.EndpointsOnly) == 0 && len(r.Configs) == 0
}

// Add merges one event that arrived at t.
func (r *Request) Add(ev model.Event, t time.Time) {
	if !ev.Observed.IsZero() && ev.Observed.Before(t) {
		t = ev.Observed
	}
	if r.Events == 0 || t.Before(r.Start) {
		r.Start = t
	}
	r.Events++
	switch ev.Kind {
	case model.ConfigChanged:
		// The default exportTo of services decides, for every service
		// that says none, which clients see it: nearly everything
		// (model.WithExportDefaults).
		r.Full = r.Full || ev.Config == model.MeshExportToKey
		r.addConfig(ev.Config)
	case model.EndpointsChanged:
		if _, ok := r.Services[ev.Hostname]; ok {
			return
		}
		if r.EndpointsOnly == nil {
			r.EndpointsOnly = map[model.Hostname]struct{}{}
		}
		r.EndpointsOnly[ev.Hostname] = struct{}{}
		if !ev.SameServiceAccounts {
			r.addServiceAccounts(ev.Hostname)
		}
	default: // ServiceChanged, ServiceDeleted, and anything unknown
		if r.Services == nil {
			r.Services = map[model.Hostname]struct{}{}
		}
		r.Services[ev.Hostname] = struct{}{}
		delete(r.EndpointsOnly, ev.Hostname)
		delete(r.ServiceAccounts, ev.Hostname)
		if ev.Namespace != "" {
			if r.Namespaces == nil {
				r.Namespaces = map[string]struct{}{}
			}
			r.Namespaces[ev.Namespace] = struct{}{}
		}
	}
}

// Merge adds o to r.
func (r *Request) Merge(o Request) {
	if o.Events > 0 && (r.Events == 0 || o.Start.Before(r.Start)) {
		r.Start = o.Start
	}
	r.Events += o.Events
	r.Full = r.Full || o.Full
	for h := range o.Services {
		if r.Services == nil {
			r.Services = map[model.Hostname]struct{}{}
		}
		r.Services[h] = struct{}{}
		delete(r.EndpointsOnly, h)
		delete(r.ServiceAccounts, h)
	}
	for h := range o.EndpointsOnly {
		if _, ok := r.Services[h]; ok {
			continue
		}
		if r.EndpointsOnly == nil {
			r.EndpointsOnly = map[model.Hostname]struct{}{}
		}
		r.EndpointsOnly[h] = struct{}{}
		if _, ok := o.ServiceAccounts[h]; ok {
			r.addServiceAccounts(h)
		}
	}
	for ns := range o.Namespaces {
		if r.Namespaces == nil {
			r.Namespaces = map[string]struct{}{}
		}
		r.Namespaces[ns] = struct{}{}
	}
	for k := range o.Configs {
		r.addConfig(k)
	}
}

func (r *Request) addServiceAccounts(h model.Hostname) {
	if r.ServiceAccounts == nil {
		r.ServiceAccounts = map[model.Hostname]struct{}{}
	}
	r.ServiceAccounts[h] = struct{}{}
}

func (r *Request) addConfig(k model.ConfigKey) {
	if r.Configs == nil {
		r.Configs = map[model.ConfigKey]struct{}{}
	}
	r.Configs[k] = struct{}{}
}

// Clone returns a deep copy.
func (r Request) Clone() Request {
	r.Services = maps.Clone(r.Services)
	r.EndpointsOnly = maps.Clone(r.EndpointsOnly)
	r.ServiceAccounts = maps.Clone(r.ServiceAccounts)
	r.Namespaces = maps.Clone(r.Namespaces)
	r.Configs = maps.Clone(r.Configs)
	return r
}

// Keys calls yield with every model key the request changed: a service
// change touches its definition, its endpoints, their identities and its
// namespace's set of services, an endpoints-only change its endpoints
// alone, and their identities when those may have changed. A Full
// request names no key: everything changed.
func (r *Request) Keys(yield func(model.ConfigKey)) {
	for h := range r.Services {
		yield(model.ServiceKey(h))
		yield(model.EndpointsKey(h))
		yield(model.ServiceAccountsKey(h))
	}
	for h := range r.EndpointsOnly {
		yield(model.EndpointsKey(h))
	}
	for h := range r.ServiceAccounts {
		yield(model.ServiceAccountsKey(h))
	}
	for ns := range r.Namespaces {
		yield(model.NamespaceKey(ns))
	}
	for k := range r.Configs {
		yield(k)
	}
}
