package kubeapi

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/rest"
)

// Client reaches the kinds of Kubernetes' own API that meshpilot reads
// and writes: core/v1 (Services, Pods, Nodes, Namespaces, Secrets,
// ConfigMaps), discovery.k8s.io/v1 (EndpointSlices) and
// coordination.k8s.io/v1 (Leases). Safe for concurrent use.
type Client struct {
	core, discovery, coordination *Group
}

// NewForConfig builds a Client for an API server's configuration, in
// place of kubernetes.NewForConfig.
func NewForConfig(cfg *rest.Config) (*Client, error) {
	core, err := NewGroup(cfg, GroupOptions{GroupVersion: corev1.SchemeGroupVersion, AddToScheme: corev1.AddToScheme, Protobuf: true})
	if err != nil {
		return nil, err
	}
	disc, err := NewGroup(cfg, GroupOptions{GroupVersion: discoveryv1.SchemeGroupVersion, AddToScheme: discoveryv1.AddToScheme, Protobuf: true})
	if err != nil {
		return nil, err
	}
	coord, err := NewGroup(cfg, GroupOptions{GroupVersion: coordinationv1.SchemeGroupVersion, AddToScheme: coordinationv1.AddToScheme, Protobuf: true})
	if err != nil {
		return nil, err
	}
	return &Client{core: core, discovery: disc, coordination: coord}, nil
}

// Services of a namespace ("" all).
func (c *Client) Services(ns string) *Resource[*corev1.Service, *corev1.ServiceList] {
	return NewResource(c.core, "services", ns,
		func() *corev1.Service { return &corev1.Service{} }, func() *corev1.ServiceList { return &corev1.ServiceList{} })
}

// Pods of a namespace ("" all).
func (c *Client) Pods(ns string) *Resource[*corev1.Pod, *corev1.PodList] {
	return NewResource(c.core, "pods", ns,
		func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} })
}

// Nodes of the cluster.
func (c *Client) Nodes() *Resource[*corev1.Node, *corev1.NodeList] {
	return NewResource(c.core, "nodes", "",
		func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} })
}

// Namespaces of the cluster.
func (c *Client) Namespaces() *Resource[*corev1.Namespace, *corev1.NamespaceList] {
	return NewResource(c.core, "namespaces", "",
		func() *corev1.Namespace { return &corev1.Namespace{} }, func() *corev1.NamespaceList { return &corev1.NamespaceList{} })
}

// Secrets of a namespace ("" all).
func (c *Client) Secrets(ns string) *Resource[*corev1.Secret, *corev1.SecretList] {
	return NewResource(c.core, "secrets", ns,
		func() *corev1.Secret { return &corev1.Secret{} }, func() *corev1.SecretList { return &corev1.SecretList{} })
}

// ConfigMaps of a namespace ("" all).
func (c *Client) ConfigMaps(ns string) *Resource[*corev1.ConfigMap, *corev1.ConfigMapList] {
	return NewResource(c.core, "configmaps", ns,
		func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} })
}

// EndpointSlices of a namespace ("" all).
func (c *Client) EndpointSlices(ns string) *Resource[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList] {
	return NewResource(c.discovery, "endpointslices", ns,
		func() *discoveryv1.EndpointSlice { return &discoveryv1.EndpointSlice{} },
		func() *discoveryv1.EndpointSliceList { return &discoveryv1.EndpointSliceList{} })
}

// Leases of a namespace ("" all).
func (c *Client) Leases(ns string) *Resource[*coordinationv1.Lease, *coordinationv1.LeaseList] {
	return NewResource(c.coordination, "leases", ns,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} },
		func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} })
}
