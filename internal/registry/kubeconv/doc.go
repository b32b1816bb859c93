// Package kubeconv converts Kubernetes objects (Services, EndpointSlices,
// Pods, Nodes) into the service model, by the rules of DESIGN.md, which
// are Istio's. It is pure: it reads objects it is given and never watches
// or lists, so the Kubernetes registry (informers), the file registry
// (manifests from a folder) and tests convert the same way. It must not
// import client-go: the deps test checks it.
package kubeconv
