package crd

import (
	"cmp"
	"slices"
	"sync"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// SecurityOptions configure Security.
type SecurityOptions struct {
	// RootNamespace holds the policies that apply mesh-wide while Mesh
	// names none; empty: Istio's default, model.DefaultRootNamespace.
	RootNamespace string
	// Mesh, when set, is followed for MeshConfig's rootNamespace.
	Mesh MeshSource
	// Status, when set, records what became of every PeerAuthentication
	// and AuthorizationPolicy.
	Status *configstatus.Reporter
	// AuthzGRPCIgnored, when set, lists what of a converted
	// AuthorizationPolicy the generator of gRPC servers' listeners does
	// not enforce as written (translate.AuthorizationGRPCIgnored): its
	// fields join the conversion's notes, so that the report follows
	// what the listeners hold, not a second reading of the rules.
	AuthzGRPCIgnored func(*model.AuthorizationPolicy) []configstatus.Field
}

// Security is the PeerAuthentications and AuthorizationPolicies of a
// Store as generators read them (model.SecurityIndex): converted and
// listed per namespace. A change to a policy is reported, once visible,
// as model.ConfigChanged events carrying the keys of its old and new
// versions (model.PeerAuthentication.Keys), so that only the servers
// whose workloads it selected or selects now are regenerated.
//
// A policy that cannot be converted is refused: its status says why, and
// its last good version stays in force.
type Security struct {
	reg  Store
	opts SecurityOptions

	handlers modelHandlers

	mu sync.RWMutex // guards root, peer and authz
	// root is the root namespace in force.
	root string
	// peer and authz hold each object's last good version, by namespace
	// then name.
	peer  map[string]map[string]*model.PeerAuthentication
	authz map[string]map[string]*model.AuthorizationPolicy
}

// NewSecurity builds the security view of reg; it follows reg's events,
// so call it before reg runs.
func NewSecurity(reg Store, opts SecurityOptions) *Security {
	s := &Security{
		reg:   reg,
		opts:  opts,
		peer:  map[string]map[string]*model.PeerAuthentication{},
		authz: map[string]map[string]*model.AuthorizationPolicy{},
	}
	var mesh *model.MeshSettings
	if opts.Mesh != nil {
		mesh = opts.Mesh.Mesh()
		opts.Mesh.AppendEventHandler(s.onMeshEvent)
	}
	s.root = s.rootOf(mesh)
	reg.AppendEventHandler(s.onEvent)
	return s
}

// AppendEventHandler adds a handler of the policy events; it may be
// called while the store runs (see modelHandlers).
func (s *Security) AppendEventHandler(h model.EventHandler) { s.handlers.add(h) }

func (s *Security) rootOf(mesh *model.MeshSettings) string {
	if mesh != nil && mesh.RootNamespace != "" {
		return mesh.RootNamespace
	}
	return cmp.Or(s.opts.RootNamespace, model.DefaultRootNamespace)
}

// whyRootSelector is reported on a PeerAuthentication with a selector in
// the root namespace, which Istio's ComposePeerAuthentication ignores.
const whyRootSelector = "a PeerAuthentication with a selector in the root namespace applies to no workload, as in Istio: select workloads from their own namespace"

// rootNamespace is the root namespace in force.
func (s *Security) rootNamespace() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.root
}

func (s *Security) onEvent(ev Event) {
	switch ev.Kind {
	case PeerAuthentication:
		var now *model.PeerAuthentication
		var st configstatus.Status
		obj := s.reg.PeerAuthentication(ev.Namespace, ev.Name)
		if obj != nil {
			now, st = ConvertPeerAuthentication(obj)
			if now != nil && st.Refused == nil && len(now.Selector) > 0 && ev.Namespace == s.rootNamespace() {
				st.IgnoredGRPC = append(st.IgnoredGRPC, configstatus.Field{Path: "spec.selector", Why: whyRootSelector})
			}
		}
		s.apply(ev, obj != nil, st, func() []model.ConfigKey {
			return setPolicy(s.peer, ev.Namespace, ev.Name, now)
		})
	case AuthorizationPolicy:
		var now *model.AuthorizationPolicy
		var st configstatus.Status
		obj := s.reg.AuthorizationPolicy(ev.Namespace, ev.Name)
		if obj != nil {
			now, st = ConvertAuthorizationPolicy(obj)
			if now != nil && st.Refused == nil && s.opts.AuthzGRPCIgnored != nil {
				st.IgnoredGRPC = joinFields(st.IgnoredGRPC, s.opts.AuthzGRPCIgnored(now))
			}
		}
		s.apply(ev, obj != nil, st, func() []model.ConfigKey {
			return setPolicy(s.authz, ev.Namespace, ev.Name, now)
		})
	}
}

// apply records an object's status and, unless it is refused, its new
// version (set, run under s.mu), then reports the keys set returns.
func (s *Security) apply(ev Event, exists bool, st configstatus.Status, set func() []model.ConfigKey) {
	ref := Ref(s.reg, ev.Kind, ev.Namespace, ev.Name)
	if exists {
		s.opts.Status.Set(ref, st)
		if st.Refused != nil {
			return // the last good version stays in force
		}
	} else {
		s.opts.Status.Delete(ref)
	}
	s.mu.Lock()
	keys := set()
	s.mu.Unlock()
	s.handlers.configChanged(keys...)
}

// keyed is a converted policy.
type keyed interface {
	comparable
	Keys() []model.ConfigKey
}

// setPolicy replaces the policy ns/name of byNS (nil: removes it) and
// returns the keys of its old and new versions, each once.
func setPolicy[P keyed](byNS map[string]map[string]P, ns, name string, now P) []model.ConfigKey {
	var zero P
	var keys []model.ConfigKey
	if old, ok := byNS[ns][name]; ok {
		keys = append(keys, old.Keys()...)
		delete(byNS[ns], name)
		if len(byNS[ns]) == 0 {
			delete(byNS, ns)
		}
	}
	if now != zero {
		keys = append(keys, now.Keys()...)
		if byNS[ns] == nil {
			byNS[ns] = map[string]P{}
		}
		byNS[ns][name] = now
	}
	slices.SortFunc(keys, func(a, b model.ConfigKey) int { return cmp.Compare(a.Name, b.Name) })
	return slices.Compact(keys)
}

func (s *Security) onMeshEvent(ev model.Event) {
	if ev.Kind != model.ConfigChanged || ev.Config != model.MeshRootNamespaceKey {
		return
	}
	root := s.rootOf(s.opts.Mesh.Mesh())
	s.mu.Lock()
	old := s.root
	if root == old {
		s.mu.Unlock()
		return
	}
	s.root = root
	// The policies of the old and new root namespaces change scope: what
	// read them hears of it under their keys.
	var keys []model.ConfigKey
	for _, ns := range []string{old, root} {
		for _, p := range s.peer[ns] {
			keys = append(keys, p.Keys()...)
		}
		for _, p := range s.authz[ns] {
			keys = append(keys, p.Keys()...)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(keys, func(a, b model.ConfigKey) int { return cmp.Compare(a.Name, b.Name) })
	s.handlers.configChanged(slices.Compact(keys)...)
}

// SecurityPoliciesFor implements model.SecurityIndex: the policies of ns
// and of the root namespace, oldest first.
func (s *Security) SecurityPoliciesFor(ns string) model.SecurityPolicies {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := model.SecurityPolicies{RootNamespace: s.root}
	namespaces := []string{ns}
	if ns != s.root {
		namespaces = append(namespaces, s.root)
	}
	for _, n := range namespaces {
		for _, p := range s.peer[n] {
			out.Peer = append(out.Peer, p)
		}
		for _, p := range s.authz[n] {
			out.Authz = append(out.Authz, p)
		}
	}
	slices.SortFunc(out.Peer, func(a, b *model.PeerAuthentication) int {
		return model.ComparePolicies(a.Created, a.Namespace, a.Name, b.Created, b.Namespace, b.Name)
	})
	slices.SortFunc(out.Authz, func(a, b *model.AuthorizationPolicy) int {
		return model.ComparePolicies(a.Created, a.Namespace, a.Name, b.Created, b.Namespace, b.Name)
	})
	return out
}

var _ model.SecurityIndex = (*Security)(nil)

// joinFields appends to fields those of more whose path none of them
// has: the conversion's note on a field comes first.
func joinFields(fields, more []configstatus.Field) []configstatus.Field {
	for _, f := range more {
		if !slices.ContainsFunc(fields, func(g configstatus.Field) bool { return g.Path == f.Path }) {
			fields = append(fields, f)
		}
	}
	return fields
}
