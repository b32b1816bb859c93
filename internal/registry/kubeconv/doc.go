// Package kubeconv converts Kubernetes objects (Services, EndpointSlices,
// Pods, Nodes) into the service model by Istio's rules, so that objects
// written for Istio mean the same here; docs/architecture.md shows where
// conversion sits between the registries and the model. It is pure: it
// reads objects it is given and never watches or lists, so the Kubernetes
// registry (informers), the file registry (manifests from a folder) and
// tests convert the same way. It must not import client-go: the deps test
// checks it.
package kubeconv
