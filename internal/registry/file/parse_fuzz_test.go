package file

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

// fuzzBase is a second file of the fuzzed folder, so that the fuzzed
// file's objects can pass the checks that span files (a namespace that
// exists, a slice whose Service exists) and reach the conversion.
const fuzzBase = `apiVersion: v1
kind: Namespace
metadata: {name: demo}
---
apiVersion: v1
kind: Service
metadata: {name: greeter, namespace: demo}
spec:
  ports: [{name: grpc, port: 7070, targetPort: 50051}]
`

// FuzzParseFile feeds a manifest file through what `serve --from DIR`
// does with it: ParseFile (YAML or JSON, every Kubernetes and Istio kind,
// strict decoding, validation), then a reload of a folder holding it
// (checks across files, conversion to the model, Istio store events).
// Whatever the bytes, nothing panics, a file is accepted whole or refused
// with problems that say where, the verdict is the same every time (the
// registry logs a file's problems only when they change), and what is
// accepted is accepted again once written back as JSON.
func FuzzParseFile(f *testing.F) {
	for _, c := range validManifests {
		f.Add([]byte(c.data))
	}
	for _, c := range invalidManifests {
		f.Add([]byte(c.data))
	}
	examples, err := filepath.Glob("../../../examples/mesh/*.yaml")
	if err != nil || len(examples) == 0 {
		f.Fatalf("no example manifests: %v", err)
	}
	for _, path := range examples {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}

	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "base.yaml"), []byte(fuzzBase), 0o644); err != nil {
		f.Fatal(err)
	}
	fuzzed := filepath.Join(dir, "fuzzed.yaml")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	f.Fuzz(func(t *testing.T, data []byte) {
		objs, problems := ParseFile(fuzzed, data)
		checkVerdict(t, objs, problems)
		again, problemsAgain := ParseFile(fuzzed, data)
		if len(again) != len(objs) || describe(problemsAgain) != describe(problems) {
			t.Fatalf("two reads of one file disagree:\n%d objects, problems:\n%s\nthen %d objects, problems:\n%s",
				len(objs), describe(problems), len(again), describe(problemsAgain))
		}
		checkRoundTrip(t, objs)

		if err := os.WriteFile(fuzzed, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := New(Options{Dir: dir, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		r.reload(nil, time.Time{})
		for _, p := range r.Problems() {
			if p.File != fuzzed {
				t.Fatalf("a problem outside the fuzzed file: %v", p)
			}
		}
		if len(problems) > 0 && len(r.Problems()) < len(problems) {
			t.Fatalf("the registry reports %d problems, the file has %d:\n%s", len(r.Problems()), len(problems), describe(problems))
		}
		// The base file is valid whatever the fuzzed one holds, and the
		// first definition of an object wins.
		if r.GetService("greeter.demo.svc.cluster.local") == nil {
			t.Fatal("the base file's service is gone")
		}
		for _, svc := range r.Services() {
			for _, p := range svc.Ports {
				_ = r.EndpointsByPortName(svc.Hostname, p.Name, nil)
			}
		}
	})
}

// checkVerdict: a file gives objects or problems, never both; each problem
// says where it is and what is wrong; each object is a complete object of
// a kind the registry reads.
func checkVerdict(t *testing.T, objs []*Object, problems []Problem) {
	t.Helper()
	if objs != nil && problems != nil {
		t.Fatalf("both objects and problems:\n%s", describe(problems))
	}
	for _, p := range problems {
		if p.File == "" || p.Message == "" || p.Document < 0 || (p.Document > 0 && p.Line < 1) {
			t.Fatalf("a problem that does not say where or what: %#v", p)
		}
	}
	for _, o := range objs {
		if o.Name == "" || o.Document < 1 || o.Line < 1 {
			t.Fatalf("an accepted object without a name or a place: %#v", o)
		}
		namespaced := true
		switch o.Obj.(type) {
		case *corev1.Namespace, *corev1.Node:
			namespaced = false
		case *corev1.Service, *corev1.Pod, *discoveryv1.EndpointSlice,
			*networkingv1.DestinationRule, *networkingv1.VirtualService, *networkingv1.ServiceEntry, *networkingv1.WorkloadEntry,
			*securityv1.PeerAuthentication, *securityv1.AuthorizationPolicy,
			*gatewayv1.HTTPRoute, *gatewayv1.GRPCRoute, *gatewayv1beta1.ReferenceGrant:
		default:
			t.Fatalf("an accepted %s of type %T", o.Kind, o.Obj)
		}
		if namespaced != (o.Namespace != "") {
			t.Fatalf("%s: namespace %q", o.describe(), o.Namespace)
		}
	}
}

// checkRoundTrip: a Kubernetes object that was accepted is accepted again,
// as the same object, once written back as JSON: a check that passes only
// for one spelling of a value would let a cluster and a folder disagree.
// Istio objects are left out: their JSON writes 64-bit integers as
// strings, which their CRDs' schemas refuse.
func checkRoundTrip(t *testing.T, objs []*Object) {
	t.Helper()
	for _, o := range objs {
		if _, istio := istioKinds[o.Kind]; istio {
			continue
		}
		js, err := json.Marshal(o.Obj)
		if err != nil {
			t.Fatalf("%s: %v", o.describe(), err)
		}
		back, problems := ParseFile("roundtrip.json", js)
		if len(problems) > 0 || len(back) != 1 {
			t.Fatalf("%s is refused once written back as %s:\n%s", o.describe(), js, describe(problems))
		}
		if back[0].key() != o.key() {
			t.Fatalf("%s came back as %s", o.describe(), back[0].describe())
		}
	}
}
