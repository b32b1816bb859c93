package kubeconv_test

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/meshpilot/meshpilot/internal/golden"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/file"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// TestGolden is the manifests -> model layer: each testdata/in/<case>.yaml
// holds Kubernetes objects (Services, EndpointSlices, Pods, Nodes, as the
// API server would hold them) showing one conversion rule, which its
// header names; testdata/out/<case>.json is the model the conversion
// makes of them: every Service with its endpoints, ordered by namespace
// and name, and the workload of every Pod. The manifests are read by the
// file registry's parser, so an input must be a valid manifest; the
// objects are handed to kubeconv as both registries hand them: a Service's
// EndpointSlices are those of its namespace labelled with its name, Pods
// are looked up by name and by IP (kubeconv.PodForIP), Nodes by name.
// The same objects stripped as the informers strip them must give the
// same model. -update rewrites the outputs and removes those no case makes.
func TestGolden(t *testing.T) {
	cases := &golden.Cases{In: "testdata/in/*.yaml", Out: "testdata/out", Rerun: "go test ./internal/registry/kubeconv -run TestGolden -update"}
	cases.Run(t, func(t *testing.T, name string, raw []byte) {
		objs, problems := file.ParseFile(name+".yaml", raw)
		for _, p := range problems {
			t.Error(p)
		}
		if len(problems) > 0 {
			t.FailNow()
		}
		b, err := json.MarshalIndent(convertObjects(objs), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		cases.Check(t, name+".json", append(b, '\n'))

		stripped, err := json.MarshalIndent(convertObjects(strippedObjects(objs)), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if string(stripped) != string(b) {
			t.Errorf("the Services and EndpointSlices the informers cache (stripped) give another model:\n%s", stripped)
		}
	})
}

// strippedObjects replaces Services and EndpointSlices with what the
// informers' transforms keep of them.
func strippedObjects(objs []*file.Object) []*file.Object {
	out := make([]*file.Object, len(objs))
	for i, o := range objs {
		c := *o
		switch obj := o.Obj.(type) {
		case *corev1.Service:
			c.Obj = kubeconv.StrippedService(obj)
		case *discoveryv1.EndpointSlice:
			c.Obj = kubeconv.StrippedEndpointSlice(obj)
		}
		out[i] = &c
	}
	return out
}

// convertedModel is the output of a golden case.
type convertedModel struct {
	Services  []convertedService `json:"services,omitempty"`
	Workloads []*model.Workload  `json:"workloads,omitempty"`
}

type convertedService struct {
	Service   *model.Service    `json:"service"`
	Endpoints []*model.Endpoint `json:"endpoints"`
}

// objectSet holds a case's objects as a registry's caches would.
type objectSet struct {
	services []*corev1.Service
	slices   map[string][]*discoveryv1.EndpointSlice // by "<namespace>/<service>"
	pods     map[string]*kubeconv.PodInfo            // by "<namespace>/<name>"
	podsByIP map[string][]*kubeconv.PodInfo
	nodes    map[string]*corev1.Node
}

func convertObjects(objs []*file.Object) convertedModel {
	set := objectSet{
		slices:   map[string][]*discoveryv1.EndpointSlice{},
		pods:     map[string]*kubeconv.PodInfo{},
		podsByIP: map[string][]*kubeconv.PodInfo{},
		nodes:    map[string]*corev1.Node{},
	}
	for _, o := range objs {
		switch obj := o.Obj.(type) {
		case *corev1.Service:
			set.services = append(set.services, obj)
		case *discoveryv1.EndpointSlice:
			key := obj.Namespace + "/" + obj.Labels[discoveryv1.LabelServiceName]
			set.slices[key] = append(set.slices[key], obj)
		case *corev1.Pod:
			p := kubeconv.NewPodInfo(obj)
			set.pods[p.Namespace+"/"+p.Name] = p
			for _, ip := range p.IPs {
				set.podsByIP[ip] = append(set.podsByIP[ip], p)
			}
		case *corev1.Node:
			set.nodes[obj.Name] = obj
		}
	}
	lookup := kubeconv.EndpointLookup{
		Pod: func(namespace, name string) *kubeconv.PodInfo { return set.pods[namespace+"/"+name] },
		PodByIP: func(namespace, ip string) *kubeconv.PodInfo {
			return kubeconv.PodForIP(namespace, slices.Values(set.podsByIP[ip]))
		},
		Node: func(name string) *corev1.Node { return set.nodes[name] },
	}

	var out convertedModel
	slices.SortFunc(set.services, func(a, b *corev1.Service) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, s := range set.services {
		svc := kubeconv.ConvertService(s, model.DefaultDomainSuffix)
		eps := kubeconv.BuildEndpoints(svc, set.slices[s.Namespace+"/"+s.Name], lookup)
		if eps == nil {
			eps = []*model.Endpoint{} // "endpoints": [], plainly none
		}
		out.Services = append(out.Services, convertedService{Service: svc, Endpoints: eps})
	}
	for _, key := range slices.Sorted(maps.Keys(set.pods)) {
		p := set.pods[key]
		out.Workloads = append(out.Workloads, kubeconv.ConvertWorkload(p, set.nodes[p.NodeName]))
	}
	return out
}
