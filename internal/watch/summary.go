package watch

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Field is one item of an object's summary, such as type=ClusterIP.
type Field struct {
	Key   string
	Value string
}

// Summarize returns the short summary printed for an object: for Services
// the type, cluster IP and ports; for EndpointSlices the service, ready and
// total endpoints and ports; for Pods the phase, readiness, IP and node; for
// Nodes the zone and readiness; for Namespaces the phase and labels; for
// every other kind its labels, when it has any.
func Summarize(group, kind string, obj *unstructured.Unstructured) []Field {
	switch {
	case group == "" && kind == "Service":
		return serviceSummary(obj)
	case group == "discovery.k8s.io" && kind == "EndpointSlice":
		return sliceSummary(obj)
	case group == "" && kind == "Pod":
		return podSummary(obj)
	case group == "" && kind == "Node":
		return nodeSummary(obj)
	case group == "" && kind == "Namespace":
		return []Field{{"phase", str(obj.Object, "status", "phase")}, {"labels", labelString(obj.GetLabels())}}
	}
	if l := obj.GetLabels(); len(l) > 0 {
		return []Field{{"labels", labelString(l)}}
	}
	return nil
}

func serviceSummary(obj *unstructured.Unstructured) []Field {
	typ := str(obj.Object, "spec", "type")
	if typ == "" {
		typ = "ClusterIP"
	}
	out := []Field{{"type", typ}}
	if typ == "ExternalName" {
		out = append(out, Field{"externalName", str(obj.Object, "spec", "externalName")})
	} else {
		out = append(out, Field{"clusterIP", str(obj.Object, "spec", "clusterIP")})
	}
	ports, _, _ := unstructured.NestedSlice(obj.Object, "spec", "ports")
	return append(out, Field{"ports", portList(ports)})
}

func sliceSummary(obj *unstructured.Unstructured) []Field {
	eps, _, _ := unstructured.NestedSlice(obj.Object, "endpoints")
	ready := 0
	for _, e := range eps {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		// An unset ready condition counts as ready, as the API says.
		if r, found, _ := unstructured.NestedBool(m, "conditions", "ready"); !found || r {
			ready++
		}
	}
	ports, _, _ := unstructured.NestedSlice(obj.Object, "ports")
	return []Field{
		{"service", obj.GetLabels()["kubernetes.io/service-name"]},
		{"ready", fmt.Sprintf("%d/%d", ready, len(eps))},
		{"addressType", str(obj.Object, "addressType")},
		{"ports", portList(ports)},
	}
}

func podSummary(obj *unstructured.Unstructured) []Field {
	return []Field{
		{"phase", str(obj.Object, "status", "phase")},
		{"ready", strconv.FormatBool(condition(obj, "Ready") == "True")},
		{"ip", str(obj.Object, "status", "podIP")},
		{"node", str(obj.Object, "spec", "nodeName")},
	}
}

func nodeSummary(obj *unstructured.Unstructured) []Field {
	l := obj.GetLabels()
	zone := l["topology.kubernetes.io/zone"]
	if zone == "" {
		zone = l["failure-domain.beta.kubernetes.io/zone"]
	}
	ready := condition(obj, "Ready")
	if ready == "" {
		ready = "Unknown"
	}
	return []Field{{"zone", zone}, {"ready", ready}}
}

// portList formats Service or EndpointSlice ports as name:port/protocol
// (port/protocol for an unnamed port), comma separated.
func portList(ports []any) string {
	var parts []string
	for _, p := range ports {
		m, ok := p.(map[string]any)
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(m, "name")
		proto, _, _ := unstructured.NestedString(m, "protocol")
		if proto == "" {
			proto = "TCP"
		}
		port, found, _ := unstructured.NestedFieldNoCopy(m, "port")
		s := "?"
		if found {
			s = fmt.Sprint(port)
		}
		s += "/" + proto
		if name != "" {
			s = name + ":" + s
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

// condition returns the status of the condition of the given type, or "".
func condition(obj *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if t, _, _ := unstructured.NestedString(m, "type"); t == typ {
			s, _, _ := unstructured.NestedString(m, "status")
			return s
		}
	}
	return ""
}

func labelString(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, ",")
}

func str(obj map[string]any, path ...string) string {
	s, _, _ := unstructured.NestedString(obj, path...)
	return s
}
