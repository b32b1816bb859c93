package file

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/meshpilot/meshpilot/internal/testenv"
)

// env is the package's real API server: the registry's claim is to read a
// folder as a cluster would hold it, so the cluster is the reference.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// apiServer sends manifest files to env as kubectl does: document by
// document and a List item by item, each to the resource its apiVersion
// and kind name, as written (YAML stays YAML, so the API server decodes
// it itself), with strict field validation. A Pod's status is then
// written through the status subresource, as a kubelet would.
type apiServer struct {
	rest   rest.Interface
	mapper meta.RESTMapper
}

func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = rest.NoWarnings{} // deprecation notes (FQDN slices) are no verdict
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &apiServer{rest: dc.RESTClient(), mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// manifestDoc is one object as kubectl sends it.
type manifestDoc struct {
	body        []byte
	contentType string
	header      docHeader
}

// docHeader is what kubectl reads of an object to know where it goes.
type docHeader struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Status json.RawMessage `json:"status"`
}

// splitManifests cuts a file into the objects kubectl would send; an
// error is a file kubectl refuses before the API server sees it.
func splitManifests(data []byte) ([]manifestDoc, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []manifestDoc
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := sigsyaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("kubectl cannot read a document: %w", err)
		}
		if js = bytes.TrimSpace(js); string(js) == "null" {
			continue // only comments
		}
		var h docHeader
		if err := json.Unmarshal(js, &h); err != nil {
			return nil, fmt.Errorf("kubectl cannot read a document: %w", err)
		}
		if h.Kind != "List" {
			out = append(out, manifestDoc{body: doc, contentType: "application/yaml", header: h})
			continue
		}
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(js, &list); err != nil {
			return nil, fmt.Errorf("kubectl cannot read a List: %w", err)
		}
		for _, item := range list.Items {
			var ih docHeader
			if err := json.Unmarshal(item, &ih); err != nil {
				return nil, fmt.Errorf("kubectl cannot read a List item: %w", err)
			}
			out = append(out, manifestDoc{body: item, contentType: "application/json", header: ih})
		}
	}
}

// create sends every object of a file, objects without a namespace into
// ns. With dryRun the API server only judges them, except Namespaces,
// which are created because the file's other objects live in them, and
// Pods with a status, which must exist for their status to be judged.
// It returns what was refused.
func (a *apiServer) create(ctx context.Context, ns string, data []byte, dryRun bool) []error {
	docs, err := splitManifests(data)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, d := range docs {
		if err := a.createOne(ctx, ns, d, dryRun); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", d.header.Kind, d.header.Metadata.Name, err))
		}
	}
	return errs
}

func (a *apiServer) createOne(ctx context.Context, ns string, d manifestDoc, dryRun bool) error {
	if d.header.Kind == "" {
		return errors.New("kubectl refuses it: Object 'Kind' is missing")
	}
	gvk := schema.FromAPIVersionAndKind(d.header.APIVersion, d.header.Kind)
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("the API server serves no such resource: %w", err)
	}
	if d.header.Metadata.Namespace != "" {
		ns = d.header.Metadata.Namespace
	}
	collection := resourcePath(m, ns)
	isNamespace := m.Resource.Resource == "namespaces"
	hasPodStatus := m.Resource.Resource == "pods" && len(d.header.Status) > 0 && string(d.header.Status) != "null"
	req := a.rest.Post().AbsPath(collection).Param("fieldValidation", "Strict").
		SetHeader("Content-Type", d.contentType).Body(d.body)
	if dryRun && !isNamespace && !hasPodStatus {
		req = req.Param("dryRun", "All")
	}
	err = req.Do(ctx).Error()
	if isNamespace && apierrors.IsAlreadyExists(err) {
		return nil // as kubectl apply: the namespace is there
	}
	if err != nil || !hasPodStatus {
		return err
	}
	pod := collection + "/" + d.header.Metadata.Name
	if dryRun {
		// Only a verdict was asked for: the Pod goes again, at once (no
		// kubelet will confirm a graceful deletion).
		defer a.rest.Delete().AbsPath(pod).Param("gracePeriodSeconds", "0").Do(context.WithoutCancel(ctx))
	}
	return a.writeStatus(ctx, pod, d.header.Status, dryRun)
}

// writeStatus replaces the status of the object at path.
func (a *apiServer) writeStatus(ctx context.Context, path string, status json.RawMessage, dryRun bool) error {
	raw, err := a.rest.Get().AbsPath(path).Do(ctx).Raw()
	if err != nil {
		return err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return err
	}
	obj["status"] = status
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	req := a.rest.Put().AbsPath(path+"/status").Param("fieldValidation", "Strict").
		SetHeader("Content-Type", "application/json").Body(body)
	if dryRun {
		req = req.Param("dryRun", "All")
	}
	return req.Do(ctx).Error()
}

func resourcePath(m *meta.RESTMapping, ns string) string {
	gv := m.Resource.GroupVersion()
	p := "/apis/" + gv.String()
	if gv.Group == "" {
		p = "/api/" + gv.Version
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		p += "/namespaces/" + ns
	}
	return p + "/" + m.Resource.Resource
}

// verdictCase is one file to judge, and how the registry judges it.
type verdictCase struct {
	name, data string
	verdict    func(t *testing.T, data string) []Problem
}

// parserVerdict judges a file alone, as the parser tables do.
func parserVerdict(_ *testing.T, data string) []Problem {
	_, problems := ParseFile("f.yaml", []byte(data))
	return problems
}

// folderVerdict judges a folder that holds only this file, read as at
// start, so that the checks that span files apply.
func folderVerdict(t *testing.T, data string) []Problem {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.yaml"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r.reload(nil, time.Time{})
	return r.Problems()
}

// folderCases are the checks that span files, on a folder of one file.
var folderCases = []verdictCase{
	{name: "a slice whose Service no file defines", data: goodSlice},
	{name: "an object in a namespace no file defines", data: strings.Replace(goodService, "name: echo", "name: echo\n  namespace: elsewhere", 1)},
}

// documentedDifferences are the cases where the registry and the API
// server disagree on purpose (validate.go says why). Each must still
// disagree: a difference that goes away must leave this list and the
// documentation.
var documentedDifferences = map[string]string{
	"loopback endpoints are allowed":                "the API server refuses loopback endpoint addresses; the registry allows them so that a folder can describe servers on 127.0.0.x",
	"a Pod without containers":                      "the registry checks the fields it reads only, and a Pod's containers are not among them",
	"a value of a field the registry does not read": "the registry checks the fields it reads only",
	"unknown kind":                                  "the registry reads Namespace, Service, EndpointSlice, Pod and Node only, and refuses other kinds rather than ignore them",
	"same object twice in a file":                   "kubectl would apply the second over the first; the registry refuses the file rather than pick one silently",
	"pod phase":                                     "the API server stores any Pod phase; the registry refuses an unknown one, which would hide the Pod",
	"slice port out of range":                       "the API server stores any EndpointSlice port number; the registry refuses one no client can dial",
	"slice without a service label":                 "the API server stores a slice that names no Service; the registry refuses it, as it would serve nothing",
	"a slice whose Service no file defines":         "the API server stores a slice for a Service that does not exist; the registry refuses it, as it would serve nothing",
}

// apiFieldAliases: where the API server's refusal of the same mistake
// names another field, what its message says instead.
var apiFieldAliases = map[string]string{
	"status.podIP":       "status.podIPs", // it checks podIPs, which it fills from podIP
	"spec.clusterIP":     "spec.clusterIPs",
	"metadata.namespace": `namespaces "`, // namespaces "x" not found
	"apiVersion":         "no matches for kind",
}

var fieldIndex = regexp.MustCompile(`\[\d+\]`)

// sameMistake says whether the API server's refusal names the field the
// registry names, so that the two refuse for the same reason.
func sameMistake(field string, refused []error) bool {
	if field == "" {
		return true // the file as a whole: not YAML, not an object
	}
	want := strings.TrimPrefix(fieldIndex.ReplaceAllString(field, ""), "items.")
	if alias, ok := apiFieldAliases[want]; ok {
		want = alias
	}
	got := fieldIndex.ReplaceAllString(fmt.Sprint(refused), "")
	return strings.Contains(strings.ToLower(got), strings.ToLower(want))
}

// The registry validates objects as the API server would: for every case
// of the parser's tables, and for the checks that span files, its verdict
// (accept or refuse) must be the API server's on the same bytes (a
// server-side dry run), and a refusal must be for the same field; but for
// the documented differences.
func TestVerdictsAgreeWithTheAPIServer(t *testing.T) {
	var cases []verdictCase
	for _, c := range validManifests {
		cases = append(cases, verdictCase{name: c.name, data: c.data, verdict: parserVerdict})
	}
	for _, c := range invalidManifests {
		cases = append(cases, verdictCase{name: c.name, data: c.data, verdict: parserVerdict})
	}
	for _, c := range folderCases {
		c.verdict = folderVerdict
		cases = append(cases, c)
	}
	env.InstallIstioCRDs(t)                  // the Istio kinds' cases (istio_parse_test.go)
	env.InstallGatewayAPICRDs(t, "standard") // the Gateway API kinds' cases (gateway_parse_test.go)
	api := newAPIServer(t)
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			refused := api.create(ctx, env.Namespace(t, nil), []byte(tc.data), true)
			problems := tc.verdict(t, tc.data)
			apiRefuses, fileRefuses := len(refused) > 0, len(problems) > 0
			if why, ok := documentedDifferences[tc.name]; ok {
				if apiRefuses == fileRefuses {
					t.Fatalf("documented as a difference (%s), but both %s it (API server: %v; registry: %s): update the list and validate.go",
						why, verb(apiRefuses), refused, describe(problems))
				}
				return
			}
			switch {
			case apiRefuses != fileRefuses:
				t.Fatalf("the API server %s it (%v); the registry %s it (%s)", verb(apiRefuses), refused, verb(fileRefuses), describe(problems))
			case fileRefuses && !sameMistake(problems[0].Field, refused):
				t.Fatalf("both refuse it, but the registry for %q and the API server for another reason: %v", problems[0].Field, refused)
			}
		})
	}
	for name := range documentedDifferences {
		if !seen[name] {
			t.Errorf("documented difference %q names no case", name)
		}
	}
}

func verb(refused bool) string {
	if refused {
		return "refuses"
	}
	return "accepts"
}
