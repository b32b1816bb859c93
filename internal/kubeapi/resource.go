package kubeapi

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Resource is a typed client of one resource in one namespace ("" for
// every namespace, and for cluster-scoped resources), making the requests
// client-go's generated clients make. Safe for concurrent use.
type Resource[T Object, L runtime.Object] struct {
	group     *Group
	resource  string
	namespace string
	newObj    func() T
	newList   func() L
}

// request starts a request on the resource: protobuf when the group
// prefers it, in the namespace when there is one.
func (r *Resource[T, L]) request(verb func() *rest.Request) *rest.Request {
	return verb().
		UseProtobufAsDefaultIfPreferred(r.group.protobuf).
		NamespaceIfScoped(r.namespace, r.namespace != "").
		Resource(r.resource)
}

func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

// Get reads the object called name.
func (r *Resource[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.newObj()
	err := r.request(r.group.rest.Get).Name(name).VersionedParams(&opts, r.group.params).Do(ctx).Into(out)
	return out, err
}

// List reads the objects opts selects, or a page of them.
func (r *Resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newList()
	err := r.request(r.group.rest.Get).VersionedParams(&opts, r.group.params).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

// Watch follows the objects opts selects.
func (r *Resource[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.request(r.group.rest.Get).VersionedParams(&opts, r.group.params).Timeout(timeout(opts)).Watch(ctx)
}

// Create writes a new object and returns the server's copy.
func (r *Resource[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.newObj()
	err := r.request(r.group.rest.Post).VersionedParams(&opts, r.group.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Update replaces an object (its resourceVersion guards against a
// concurrent write) and returns the server's copy.
func (r *Resource[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := r.newObj()
	err := r.request(r.group.rest.Put).Name(obj.GetName()).VersionedParams(&opts, r.group.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Delete removes the object called name.
func (r *Resource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.request(r.group.rest.Delete).Name(name).Body(&opts).Do(ctx).Error()
}

// UpdateStatus replaces an object's status through its status
// subresource (its resourceVersion guards against a concurrent write):
// the server ignores every other field, and RBAC grants it apart from the
// object, as <resource>/status.
func (r *Resource[T, L]) UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := r.newObj()
	err := r.request(r.group.rest.Put).Name(obj.GetName()).SubResource("status").VersionedParams(&opts, r.group.params).Body(obj).Do(ctx).Into(out)
	return out, err
}
