package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
)

// groupResources is what discovery says of one API group: its versions
// and, per version, the resources it serves.
type groupResources struct {
	group     metav1.APIGroup
	resources map[string][]metav1.APIResource // by version
}

// discover reads the API server's discovery documents (/api, /apis and
// each group version they list), as kubectl does without a cache. A group
// version that fails (an aggregated API whose backend is down) is left
// out, as client-go's discovery leaves it; the core group must answer.
//
// client-go's discovery package would do this, but it brings client-go's
// scheme of every built-in kind into the binary, registered at every
// start of meshpilot, serve included.
func discover(ctx context.Context, cfg *rest.Config) ([]groupResources, error) {
	client, err := kubeapi.NewRawClient(cfg)
	if err != nil {
		return nil, err
	}
	get := func(path string, into any) error {
		body, err := client.Get().AbsPath(path).Do(ctx).Raw()
		if err != nil {
			return err
		}
		return json.Unmarshal(body, into)
	}
	var core metav1.APIVersions
	if err := get("/api", &core); err != nil {
		return nil, fmt.Errorf("discovering the API: %w", err)
	}
	var list metav1.APIGroupList
	if err := get("/apis", &list); err != nil {
		return nil, fmt.Errorf("discovering the API groups: %w", err)
	}
	legacy := metav1.APIGroup{}
	for _, v := range core.Versions {
		legacy.Versions = append(legacy.Versions, metav1.GroupVersionForDiscovery{GroupVersion: v, Version: v})
	}
	if len(legacy.Versions) > 0 {
		legacy.PreferredVersion = legacy.Versions[0]
	}
	groups := append([]metav1.APIGroup{legacy}, list.Groups...)

	out := make([]groupResources, len(groups))
	errs := make([]error, len(groups))
	var mu sync.Mutex // guards the resources maps of out
	var wg sync.WaitGroup
	for i, g := range groups {
		out[i] = groupResources{group: g, resources: map[string][]metav1.APIResource{}}
		for _, v := range g.Versions {
			path := "/apis/" + v.GroupVersion
			if g.Name == "" {
				path = "/api/" + v.Version
			}
			wg.Go(func() {
				var rl metav1.APIResourceList
				if err := get(path, &rl); err != nil {
					if g.Name == "" {
						errs[i] = fmt.Errorf("discovering %s: %w", path, err)
					}
					return
				}
				mu.Lock()
				out[i].resources[v.Version] = rl.APIResources
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// newMapper maps kinds and resources as client-go's discovery REST mapper
// does (restmapper.NewDiscoveryRESTMapper): core v1 first, then each
// group's preferred version, then its other versions, in discovery's
// order; subresources left out.
func newMapper(groups []groupResources) meta.RESTMapper {
	var mappers meta.MultiRESTMapper
	resourcePriority := []schema.GroupVersionResource{{Group: "", Version: "v1", Resource: meta.AnyResource}}
	kindPriority := []schema.GroupVersionKind{{Group: "", Version: "v1", Kind: meta.AnyKind}}
	prefer := func(group, version string) {
		resourcePriority = append(resourcePriority, schema.GroupVersionResource{Group: group, Version: version, Resource: meta.AnyResource})
		kindPriority = append(kindPriority, schema.GroupVersionKind{Group: group, Version: version, Kind: meta.AnyKind})
	}
	for _, g := range groups {
		preferred := g.group.PreferredVersion.Version
		if _, ok := g.resources[preferred]; ok && preferred != "" {
			prefer(g.group.Name, preferred)
		}
		for _, v := range g.group.Versions {
			resources, ok := g.resources[v.Version]
			if !ok {
				continue
			}
			if v.Version != preferred {
				prefer(g.group.Name, v.Version)
			}
			gv := schema.GroupVersion{Group: g.group.Name, Version: v.Version}
			m := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
			for _, r := range resources {
				if strings.Contains(r.Name, "/") {
					continue
				}
				scope := meta.RESTScopeNamespace
				if !r.Namespaced {
					scope = meta.RESTScopeRoot
				}
				plural, singular := gv.WithResource(r.Name), gv.WithResource(r.SingularName)
				if r.SingularName == "" {
					_, singular = meta.UnsafeGuessKindToResource(gv.WithKind(r.Kind))
				}
				m.AddSpecific(gv.WithKind(strings.ToLower(r.Kind)), plural, singular, scope)
				m.AddSpecific(gv.WithKind(r.Kind), plural, singular, scope)
			}
			mappers = append(mappers, m)
		}
	}
	for _, g := range groups {
		prefer(g.group.Name, meta.AnyVersion)
	}
	return &meta.PriorityRESTMapper{Delegate: mappers, ResourcePriority: resourcePriority, KindPriority: kindPriority}
}

// shortNames expands the short names discovery lists (svc, po, ep, ...)
// in ResourceFor, as kubectl's shortcut expander does: a full or singular
// name wins over a short one, and a short name that two resources claim
// goes to the first in discovery's order, with a warning.
type shortNames struct {
	meta.RESTMapper
	groups []groupResources
	warn   func(string)
}

func (s shortNames) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return s.RESTMapper.ResourceFor(s.expand(r))
}

func (s shortNames) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return s.RESTMapper.KindFor(s.expand(r))
}

func (s shortNames) expand(r schema.GroupVersionResource) schema.GroupVersionResource {
	var found *schema.GroupResource
	for _, g := range s.groups {
		if r.Group != "" && r.Group != g.group.Name {
			continue
		}
		for _, v := range g.group.Versions {
			for _, res := range g.resources[v.Version] {
				if res.Name == r.Resource || res.SingularName == r.Resource {
					return r
				}
				for _, short := range res.ShortNames {
					if short != r.Resource {
						continue
					}
					long := schema.GroupResource{Group: g.group.Name, Resource: res.Name}
					switch {
					case found == nil:
						found = &long
					case *found != long && s.warn != nil:
						s.warn(fmt.Sprintf("short name %q could also match lower priority resource %s", r.Resource, long))
					}
				}
			}
		}
	}
	if found == nil {
		return r
	}
	return schema.GroupVersionResource{Group: found.Group, Version: r.Version, Resource: found.Resource}
}
