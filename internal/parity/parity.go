// Package parity compares what meshpilot and istiod serve for the same
// cluster: each case (the generators' golden cases and cases of its own,
// in internal/modelcase's format) is written into a fresh API server as
// Kubernetes and Istio objects, both control planes run against it, and
// each client of the case asks both, as a proxyless gRPC client
// (GENERATOR=grpc: listeners, routes, clusters, endpoints) or as Envoy
// (clusters and endpoints). The answers are compared field by field,
// after leaving out the differences listed as intended, each with its
// reason.
//
// It is a tool, not a test: istiod is built from its module (see
// tools/istioparity) and a run takes minutes.
package parity

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/modelcase"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// Options configure a run.
type Options struct {
	// Istiod and Meshpilot are the binaries compared.
	Istiod, Meshpilot string
	// Cases are the case files.
	Cases []string
	// Intended lists the differences left out.
	Intended []Intended
	// LogDir keeps each server's log, per case.
	LogDir string
	// Log receives progress.
	Log io.Writer
}

// CaseResult is what one case showed.
type CaseResult struct {
	Name string
	// Skipped says why the case could not run, if it could not.
	Skipped string
	// Differences outside the intended ones.
	Differences []Difference
	// Intended counts the fields left out as intended differences.
	Intended int
	// Compared counts the resources compared.
	Compared int
	// Err says why the case failed to run (its objects refused, a
	// server that did not start or answer).
	Err error
}

// Run runs every case in turn, each against an API server of its own.
func Run(ctx context.Context, o Options) ([]CaseResult, error) {
	var out []CaseResult
	for _, path := range o.Cases {
		name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		fmt.Fprintf(o.Log, "case %s\n", name)
		res, err := runCase(ctx, o, name, path)
		if err != nil {
			if ctx.Err() != nil {
				return out, err
			}
			res = &CaseResult{Name: name, Err: err}
		}
		out = append(out, *res)
	}
	return out, nil
}

func runCase(ctx context.Context, o Options, name, path string) (*CaseResult, error) {
	res := &CaseResult{Name: name}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	in, err := modelcase.Parse(raw)
	if err != nil {
		return nil, err
	}
	if why := notComparable(in); why != "" {
		res.Skipped = why
		return res, nil
	}
	objs, err := manifests(in)
	if err != nil {
		return nil, err
	}
	env, err := testenv.Start()
	if err != nil {
		return nil, err
	}
	defer env.Stop()
	crds, err := testenv.IstioCRDs()
	if err != nil {
		return nil, err
	}
	if _, err := env.InstallCRDs(crds); err != nil {
		return nil, err
	}
	if err := apply(ctx, env.Config, env.Client, objs, in); err != nil {
		return nil, err
	}
	logDir := filepath.Join(o.LogDir, name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	istiod, err := startIstiod(ctx, o.Istiod, env.Kubeconfig, filepath.Join(logDir, "istiod.log"))
	if err != nil {
		return nil, err
	}
	defer istiod.stop()
	mp, err := startMeshpilot(ctx, o.Meshpilot, env.Kubeconfig, filepath.Join(logDir, "meshpilot.log"))
	if err != nil {
		return nil, err
	}
	defer mp.stop()

	for _, c := range in.Clients {
		node, err := clientNode(c)
		if err != nil {
			return nil, err
		}
		kind := "envoy"
		if isGRPC(node) {
			kind = "grpc"
		}
		asks := asksOf(c, kind)
		// Both read the cluster through informers and debounce what they
		// learn at start: ask until two answers in a row agree.
		a, err := settled(ctx, istiod.xdsAddr, node, asks)
		if err != nil {
			return nil, fmt.Errorf("client %s: istiod: %w", c.Name, err)
		}
		b, err := settled(ctx, mp.xdsAddr, node, asks)
		if err != nil {
			return nil, fmt.Errorf("client %s: meshpilot: %w", c.Name, err)
		}
		for _, q := range asks {
			typ := typeFile(q.typeURL)
			names := q.names
			if q.wildcard {
				names = unionNames(a[q.typeURL], b[q.typeURL])
			}
			for _, n := range names {
				x, y := a[q.typeURL][n], b[q.typeURL][n]
				res.Compared++
				if x == nil && y != nil && oneSided(o.Intended, typ, kind, n, "meshpilot", y) ||
					y == nil && x != nil && oneSided(o.Intended, typ, kind, n, "istiod", x) {
					res.Intended++
					continue
				}
				res.Intended += strip(x, o.Intended, typ, kind) + strip(y, o.Intended, typ, kind)
				for _, d := range diff("", x, y, nil) {
					d.Client, d.Type, d.Name = c.Name+" ("+kind+")", typ, n
					if x == nil || y == nil {
						d.Path = ""
						d.Istiod, d.Meshpilot = presence(x), presence(y)
					}
					res.Differences = append(res.Differences, d)
					if x == nil || y == nil {
						break
					}
				}
			}
		}
	}
	return res, nil
}

func presence(v any) string {
	if v == nil {
		return "not sent"
	}
	return "sent"
}

func unionNames(a, b map[string]any) []string {
	var out []string
	for n := range a {
		out = append(out, n)
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// settled fetches until two answers in a row are the same.
func settled(ctx context.Context, addr string, node *core.Node, asks []ask) (fetched, error) {
	var last fetched
	for range 10 {
		got, err := fetch(ctx, addr, node, asks)
		if err != nil {
			return nil, err
		}
		if last != nil && equalJSON(last, got) {
			return got, nil
		}
		last = got
		time.Sleep(500 * time.Millisecond)
	}
	return last, nil
}

// clientNode is a case's client as both servers need it: istiod knows a
// proxy by an ID "sidecar~<ip>~<pod>.<namespace>~<namespace>.svc.cluster.local".
func clientNode(c modelcase.Client) (*core.Node, error) {
	node, err := c.Node()
	if err != nil {
		return nil, err
	}
	if node.Id == "" {
		ns := c.Metadata["NAMESPACE"]
		if ns == "" {
			ns = "default"
		}
		node.Id = fmt.Sprintf("sidecar~127.0.0.1~%s.%s~%s.svc.cluster.local", strings.ToLower(c.Name), ns, ns)
	}
	return node, nil
}

func isGRPC(n *core.Node) bool {
	if strings.EqualFold(n.GetMetadata().GetFields()["GENERATOR"].GetStringValue(), "grpc") {
		return true
	}
	return strings.HasPrefix(strings.ToLower(n.GetUserAgentName()), "grpc")
}

// asksOf is what a client asks for: a gRPC client what the case names;
// Envoy the clusters (every one, as Envoy asks) and the endpoints the
// case names. istiod serves Envoy listeners and routes of a sidecar's
// own shape (virtual listeners, per-port routes), which meshpilot does
// not build: they are not compared.
func asksOf(c modelcase.Client, kind string) []ask {
	if kind == "grpc" {
		return []ask{
			{typeURL: resource.ListenerType, names: c.Listeners, wildcard: c.Wildcard},
			{typeURL: resource.RouteType, names: c.Routes},
			{typeURL: resource.ClusterType, names: c.Clusters, wildcard: c.Wildcard},
			{typeURL: resource.EndpointType, names: c.Endpoints},
		}
	}
	return []ask{
		{typeURL: resource.ClusterType, names: c.Clusters, wildcard: c.Wildcard},
		{typeURL: resource.EndpointType, names: c.Endpoints},
	}
}

// apply writes a case's objects, Pods with their status, and its Istio
// objects.
func apply(ctx context.Context, cfg *rest.Config, kc kubernetes.Interface, o *objects, in *modelcase.Input) error {
	create := metav1.CreateOptions{}
	for _, x := range o.Namespaces {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, x, create); err != nil && !strings.Contains(err.Error(), "already exists") {
			return fmt.Errorf("namespace %s: %w", x.Name, err)
		}
	}
	for _, x := range o.Nodes {
		if _, err := kc.CoreV1().Nodes().Create(ctx, x, create); err != nil {
			return fmt.Errorf("node %s: %w", x.Name, err)
		}
	}
	for _, x := range o.Pods {
		status := x.Status
		got, err := kc.CoreV1().Pods(x.Namespace).Create(ctx, x, create)
		if err != nil {
			return fmt.Errorf("pod %s/%s: %w", x.Namespace, x.Name, err)
		}
		got.Status = status
		if _, err := kc.CoreV1().Pods(x.Namespace).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("pod %s/%s status: %w", x.Namespace, x.Name, err)
		}
	}
	for _, x := range o.Services {
		if _, err := kc.CoreV1().Services(x.Namespace).Create(ctx, x, create); err != nil {
			return fmt.Errorf("service %s/%s: %w", x.Namespace, x.Name, err)
		}
	}
	for _, x := range o.EndpointSlices {
		if _, err := kc.DiscoveryV1().EndpointSlices(x.Namespace).Create(ctx, x, create); err != nil {
			return fmt.Errorf("endpointslice %s/%s: %w", x.Namespace, x.Name, err)
		}
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	istio := []struct {
		resource, kind string
		objs           []any
	}{
		{"serviceentries", "ServiceEntry", anySlice(in.ServiceEntries)},
		{"workloadentries", "WorkloadEntry", anySlice(in.WorkloadEntries)},
		{"destinationrules", "DestinationRule", anySlice(in.DestinationRules)},
		{"virtualservices", "VirtualService", anySlice(in.VirtualServices)},
	}
	for _, kind := range istio {
		gvr := schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: kind.resource}
		for _, x := range kind.objs {
			u, err := unstructuredOf(x)
			if err != nil {
				return err
			}
			u.SetAPIVersion("networking.istio.io/v1")
			u.SetKind(kind.kind)
			if _, err := dc.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, create); err != nil {
				return fmt.Errorf("%s %s/%s: %w", kind.resource, u.GetNamespace(), u.GetName(), err)
			}
		}
	}
	return nil
}

func anySlice[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// int64Fields are the Istio API's 64-bit integer fields: their JSON form
// (protojson's) is a string, which the CRDs' schemas refuse.
var int64Fields = map[string]bool{"minimumRingSize": true, "tableSize": true}

// unstructuredOf is an Istio object as the API server takes it.
func unstructuredOf(x any) (*unstructured.Unstructured, error) {
	raw, err := json.Marshal(x)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	fixInt64(m)
	return &unstructured.Unstructured{Object: m}, nil
}

func fixInt64(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if s, ok := c.(string); ok && int64Fields[k] {
				if n, err := strconv.ParseInt(s, 10, 64); err == nil {
					x[k] = n
				}
				continue
			}
			fixInt64(c)
		}
	case []any:
		for _, c := range x {
			fixInt64(c)
		}
	}
}

// Report prints the results: per case, the differences outside the
// intended list.
func Report(w io.Writer, results []CaseResult) (differences int) {
	for _, r := range results {
		switch {
		case r.Err != nil:
			fmt.Fprintf(w, "%s: failed: %v\n", r.Name, r.Err)
			differences++
		case r.Skipped != "":
			fmt.Fprintf(w, "%s: not compared: %s\n", r.Name, r.Skipped)
		case len(r.Differences) == 0:
			fmt.Fprintf(w, "%s: same (%d resources; %d fields left out as intended)\n", r.Name, r.Compared, r.Intended)
		default:
			fmt.Fprintf(w, "%s: %d differences (%d resources; %d fields left out as intended)\n", r.Name, len(r.Differences), r.Compared, r.Intended)
			for _, d := range r.Differences {
				fmt.Fprintf(w, "  %s\n", d)
			}
		}
		differences += len(r.Differences)
	}
	return differences
}
