// Package kubeapi is meshpilot's narrow Kubernetes client: typed list,
// watch, get and write of the few kinds it uses, on REST clients whose
// schemes hold only those kinds.
//
// client-go's generated clientsets (k8s.io/client-go/kubernetes,
// istio.io/client-go's versioned clientset and their informer factories)
// serve every API group: linking one links, and registers at start, the
// types, clients, informers and apply configurations of all of them.
// That costs an idle process megabytes of the binary's own pages for
// kinds it never reads. The clients here make the requests that
// client-go's generic typed client (k8s.io/client-go/gentype, which the
// generated clientsets wrap) makes, with the same protobuf negotiation
// and errors; they are written again (resource.go) because gentype links
// client-go's fakes, and with them OpenAPI models registered at start.
package kubeapi

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// Group is a REST client for one API group version.
type Group struct {
	rest   rest.Interface
	params runtime.ParameterCodec
	// protobuf says whether requests prefer protobuf: built-in kinds
	// have it, custom resources serve JSON only.
	protobuf bool
}

// GroupOptions describe an API group version.
type GroupOptions struct {
	GroupVersion schema.GroupVersion
	// AddToScheme registers the group version's kinds (the AddToScheme
	// of its API package), list options included.
	AddToScheme func(*runtime.Scheme) error
	// Protobuf: the API server serves these kinds as protobuf.
	Protobuf bool
}

// NewGroup builds a Group on a copy of cfg.
func NewGroup(cfg *rest.Config, opts GroupOptions) (*Group, error) {
	s := runtime.NewScheme()
	if err := opts.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("kubeapi: registering %s: %w", opts.GroupVersion, err)
	}
	// Status, WatchEvent and the list options, in case AddToScheme left
	// them out; registering them twice is harmless.
	metav1.AddToGroupVersion(s, opts.GroupVersion)
	c := rest.CopyConfig(cfg)
	gv := opts.GroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(s, serializer.NewCodecFactory(s)).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubeapi: a REST client for %s: %w", gv, err)
	}
	return &Group{rest: rc, params: runtime.NewParameterCodec(s), protobuf: opts.Protobuf}, nil
}

// Object is what a typed client reads and writes: a Kubernetes object
// with metadata.
type Object interface {
	runtime.Object
	metav1.Object
}

// NewResource returns g's client of resource (the plural, lower-case
// name, e.g. "services") in namespace; newObj and newList return empty
// objects to decode into.
func NewResource[T Object, L runtime.Object](g *Group, resource, namespace string, newObj func() T, newList func() L) *Resource[T, L] {
	return &Resource[T, L]{group: g, resource: resource, namespace: namespace, newObj: newObj, newList: newList}
}

// NewRawClient returns an unversioned REST client for raw requests
// (discovery documents, /version) whose errors decode as metav1.Status.
func NewRawClient(cfg *rest.Config) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &schema.GroupVersion{}
	c.APIPath = "/"
	c.NegotiatedSerializer = serializer.WithoutConversionCodecFactory{CodecFactory: StatusCodecs()}
	return rest.UnversionedRESTClientFor(c)
}

// StatusCodecs decode metav1.Status and nothing else: what raw requests
// need, rather than client-go's scheme of every built-in kind, which would
// link and register them all.
func StatusCodecs() serializer.CodecFactory {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(s)
}
