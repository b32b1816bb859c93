package e2e

// The container image. hack/image.sh builds it with podman from no base
// image; the Dockerfile builds the same image for Docker users. runImage
// (the README flow "the container image", run by TestReadmeCommands) runs
// the README's build and push commands as written and checks what the
// image holds against what deploy/'s Deployment expects of it;
// TestImageAgreesWithDockerfile checks that the Dockerfile describes the
// same image, since no test can run a Docker build.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	appsv1 "k8s.io/api/apps/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/meshpilot/meshpilot/internal/testutil"
)

// imageTestVersion is the version the test builds the README's default
// image with (VERSION, the one variable it adds to the command).
const imageTestVersion = "v0.0.0-image-test"

// The README's image for a registry: REGISTRY is the variable the test
// sets to its own registry's address.
const (
	readmeImageRepo = "meshpilot"
	readmeImageTag  = "v0.1.0"
)

// imageFileModes are the image's only files, and their modes; every
// other entry must be a folder holding one of them.
var imageFileModes = map[string]int64{
	"meshpilot":                         0o755,
	"etc/passwd":                        0o644,
	"etc/group":                         0o644,
	"etc/ssl/certs/ca-certificates.crt": 0o644,
}

// runImage: the README's build command makes the image the Deployment
// names, whose entrypoint, numeric non-root user, ports and files are
// what deploy/ expects, and whose /meshpilot is the release build of the
// version passed; a second build of the same commit in another storage
// gives the same image ID; the README's build and push commands for a
// registry put that image there (the registry's manifest names the local
// image's config, and its layers unpack to the local image's layers).
func runImage(t *testing.T, cmds []testutil.ReadmeCommand) {
	build, buildForRegistry, push := cmds[0], cmds[1], cmds[2]
	root := testutil.RepoRoot(t)
	deployments := imageDeployments(t)
	ref := deployments[0].Spec.Template.Spec.Containers[0].Image

	pm := newPodman(t)
	runReadme(t, build, root, testutil.UntilDeadline(t), pm.env("VERSION="+imageTestVersion)...)
	img := pm.inspect(t, ref)
	t.Logf("%s: image %s, %s/%s, user %s, entrypoint %q, ports %v", build.Line, img.ID, img.OS, img.Architecture, img.Config.User, img.Config.Entrypoint, slices.Sorted(maps.Keys(img.Config.ExposedPorts)))

	epoch := commitTime(t)
	files := pm.files(t, ref)
	checkImageFiles(t, files, epoch)
	if !img.Created.Equal(epoch) {
		t.Errorf("the image was created at %s, not at the commit's time %s (SOURCE_DATE_EPOCH)", img.Created, epoch)
	}
	if img.OS != "linux" || img.Architecture != runtime.GOARCH {
		t.Errorf("the image is for %s/%s, want linux/%s (go env GOARCH)", img.OS, img.Architecture, runtime.GOARCH)
	}
	uid, gid := imageUser(t, img, files)
	bin := filepath.Join(t.TempDir(), "meshpilot")
	if err := os.WriteFile(bin, files["meshpilot"].data, 0o755); err != nil {
		t.Fatal(err)
	}
	checkReleaseBinary(t, bin, imageTestVersion)
	for _, d := range deployments {
		checkDeploymentFitsImage(t, d, img, uid, gid, bin)
	}
	if v := img.Config.Labels["org.opencontainers.image.version"]; v != imageTestVersion {
		t.Errorf("label org.opencontainers.image.version is %q, want %q", v, imageTestVersion)
	}
	if s := img.Config.Labels["org.opencontainers.image.source"]; s != "https://github.com/meshpilot/meshpilot" {
		t.Errorf("label org.opencontainers.image.source is %q", s)
	}

	t.Run("a second build of the commit is the same image", func(t *testing.T) {
		again := newPodman(t)
		runReadme(t, build, root, testutil.UntilDeadline(t), again.env("VERSION="+imageTestVersion)...)
		if id := again.inspect(t, ref).ID; id != img.ID {
			t.Errorf("built twice from one commit in fresh storages, the image is %s, then %s", img.ID, id)
		}
	})

	t.Run("built for a registry and pushed", func(t *testing.T) {
		reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		t.Cleanup(reg.Close)
		host := strings.TrimPrefix(reg.URL, "http://")
		pm.allowPlainHTTP(t, host)
		vars := pm.env("REGISTRY=" + host)
		runReadme(t, buildForRegistry, root, testutil.UntilDeadline(t), vars...)
		pushed := pm.inspect(t, host+"/"+readmeImageRepo+":"+readmeImageTag)
		if v := pushed.Config.Labels["org.opencontainers.image.version"]; v != readmeImageTag {
			t.Errorf("%s: label org.opencontainers.image.version is %q, want %q", buildForRegistry.Line, v, readmeImageTag)
		}
		runReadme(t, push, root, testutil.UntilDeadline(t), vars...)
		checkPushed(t, reg.URL, pushed)
	})
}

// podman runs podman on storage of its own, so that the test neither
// reads nor leaves images in the user's; vfs works on any file system,
// also inside a container where overlay on overlay does not, and the
// image is a few tens of MB.
type podman struct {
	dir  string
	vars []string
}

func newPodman(t *testing.T) *podman {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is not installed (apt-get install -y podman): the README's image commands need it")
	}
	dir := t.TempDir()
	storage := fmt.Sprintf("[storage]\ndriver = \"vfs\"\nrunroot = %q\ngraphroot = %q\n", filepath.Join(dir, "run"), filepath.Join(dir, "root"))
	p := &podman{dir: dir, vars: []string{
		"CONTAINERS_STORAGE_CONF=" + writeIn(t, dir, "storage.conf", storage),
		"CONTAINERS_REGISTRIES_CONF=" + writeIn(t, dir, "registries.conf", ""),
	}}
	// Before t.TempDir's removal: a rootless podman's layers belong to
	// other user IDs, which only podman can remove.
	t.Cleanup(func() {
		cmd := exec.Command("podman", "rmi", "--all", "--force")
		cmd.Env = p.env()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("podman rmi --all --force: %v\n%s", err, out)
		}
	})
	return p
}

func (p *podman) env(extra ...string) []string { return append(slices.Clone(p.vars), extra...) }

// allowPlainHTTP lets podman reach the test's registry, which serves HTTP.
func (p *podman) allowPlainHTTP(t *testing.T, host string) {
	t.Helper()
	writeIn(t, p.dir, "registries.conf", fmt.Sprintf("[[registry]]\nlocation = %q\ninsecure = true\n", host))
}

func (p *podman) run(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(testutil.Context(t), "podman", args...)
	cmd.Env = append(os.Environ(), p.env()...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// podmanImage is what the test reads of podman image inspect.
type podmanImage struct {
	ID           string    `json:"Id"`
	Created      time.Time `json:"Created"`
	OS           string    `json:"Os"`
	Architecture string    `json:"Architecture"`
	Config       struct {
		User         string              `json:"User"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Labels       map[string]string   `json:"Labels"`
	} `json:"Config"`
	RootFS struct {
		Layers []string `json:"Layers"`
	} `json:"RootFS"`
}

func (p *podman) inspect(t *testing.T, ref string) podmanImage {
	t.Helper()
	var imgs []podmanImage
	out := p.run(t, "image", "inspect", ref)
	if err := json.Unmarshal(out, &imgs); err != nil || len(imgs) != 1 {
		t.Fatalf("podman image inspect %s (%v):\n%s", ref, err, out)
	}
	return imgs[0]
}

// imageFile is an entry of the image's file system.
type imageFile struct {
	hdr  *tar.Header
	data []byte
}

// files returns the image's file system, its layers unpacked in order as
// podman save writes them (an OCI layout).
func (p *podman) files(t *testing.T, ref string) map[string]imageFile {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "oci")
	p.run(t, "save", "--format", "oci-dir", "-o", dir, ref)
	var index struct {
		Manifests []ociDescriptor `json:"manifests"`
	}
	if err := readJSON(filepath.Join(dir, "index.json"), &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("podman save wrote %d manifests, want 1", len(index.Manifests))
	}
	var m ociManifest
	if err := readJSON(blobPath(dir, index.Manifests[0].Digest), &m); err != nil {
		t.Fatal(err)
	}
	files := map[string]imageFile{}
	for _, l := range m.Layers {
		f, err := os.Open(blobPath(dir, l.Digest))
		if err != nil {
			t.Fatal(err)
		}
		unpackLayer(t, f, l.MediaType, files)
		f.Close()
	}
	return files
}

type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
}

type ociManifest struct {
	Config ociDescriptor   `json:"config"`
	Layers []ociDescriptor `json:"layers"`
}

func blobPath(dir, digest string) string {
	return filepath.Join(dir, "blobs", strings.Replace(digest, ":", string(filepath.Separator), 1))
}

// maxImageFile bounds what the test reads of one file of the image.
const maxImageFile = 256 << 20

// unpackLayer adds a layer's entries to files. No layer of this image may
// delete what another wrote: a whiteout fails the test.
func unpackLayer(t *testing.T, r io.Reader, mediaType string, files map[string]imageFile) {
	t.Helper()
	if strings.HasSuffix(mediaType, "gzip") {
		z, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		defer z.Close()
		r = z
	}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("a layer of type %s: %v", mediaType, err)
		}
		name := strings.TrimSuffix(path.Clean(strings.TrimPrefix(hdr.Name, "./")), "/")
		if strings.HasPrefix(path.Base(name), ".wh.") {
			t.Errorf("a layer deletes %s (whiteout %s)", strings.TrimPrefix(path.Base(name), ".wh."), hdr.Name)
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, maxImageFile+1))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > maxImageFile {
			t.Fatalf("%s is over %d bytes", name, maxImageFile)
		}
		files[name] = imageFile{hdr: hdr, data: data}
	}
}

// checkImageFiles: the image holds imageFileModes' files and the folders
// above them, nothing else, all root's (the user can change none) and
// dated at the commit's time.
func checkImageFiles(t *testing.T, files map[string]imageFile, epoch time.Time) {
	t.Helper()
	dirs := map[string]bool{}
	for name := range imageFileModes {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		hdr := files[name].hdr
		mode, isFile := imageFileModes[name]
		switch {
		case isFile && hdr.Typeflag == tar.TypeReg:
		case dirs[name] && hdr.Typeflag == tar.TypeDir:
			mode = 0o755
		case name == "." && hdr.Typeflag == tar.TypeDir:
			continue // the root folder, which some layers list
		default:
			t.Errorf("the image holds %s (type %q), which it should not", name, hdr.Typeflag)
			continue
		}
		if hdr.Mode&0o7777 != mode {
			t.Errorf("%s has mode %o, want %o", name, hdr.Mode&0o7777, mode)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 {
			t.Errorf("%s belongs to %d:%d, want 0:0", name, hdr.Uid, hdr.Gid)
		}
		if !hdr.ModTime.Equal(epoch) {
			t.Errorf("%s is dated %s, want the commit's time %s", name, hdr.ModTime, epoch)
		}
	}
	for name := range imageFileModes {
		if _, ok := files[name]; !ok {
			t.Errorf("the image has no %s", name)
		}
	}
	if f, ok := files["etc/ssl/certs/ca-certificates.crt"]; ok {
		checkCABundle(t, f.data)
	}
}

// checkCABundle: the bundle is PEM certificates only, each a CA's that Go
// parses, and about as many as Mozilla's store holds.
func checkCABundle(t *testing.T, data []byte) {
	t.Helper()
	n := 0
	for rest := data; len(bytes.TrimSpace(rest)) > 0; n++ {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil || b.Type != "CERTIFICATE" {
			t.Fatalf("the CA bundle holds something other than PEM certificates after %d of them", n)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("the CA bundle's certificate %d: %v", n+1, err)
		}
		if !c.IsCA {
			t.Errorf("the CA bundle's %s is no CA", c.Subject)
		}
	}
	if n < 100 {
		t.Errorf("the CA bundle holds %d certificates; Mozilla's store has over 100", n)
	}
}

// imageUser returns the image's user and group IDs: numeric, not root, and
// the nonroot user and group of the image's passwd and group files.
func imageUser(t *testing.T, img podmanImage, files map[string]imageFile) (uid, gid int64) {
	t.Helper()
	u, g, ok := strings.Cut(img.Config.User, ":")
	uid, errU := strconv.ParseInt(u, 10, 32)
	gid, errG := strconv.ParseInt(g, 10, 32)
	if !ok || errU != nil || errG != nil {
		t.Fatalf("the image's user is %q, not numeric uid:gid (runAsNonRoot needs a numeric user)", img.Config.User)
	}
	if uid == 0 || gid == 0 {
		t.Fatalf("the image runs as %q, root's", img.Config.User)
	}
	user := colonFile(t, files, "etc/passwd", 7)[u]
	if user == nil || user[0] != "nonroot" || user[3] != g {
		t.Errorf("etc/passwd: user %s is %q, want nonroot with group %s", u, user, g)
	}
	if group := colonFile(t, files, "etc/group", 4)[g]; group == nil || group[0] != "nonroot" {
		t.Errorf("etc/group: group %s is %q, want nonroot", g, group)
	}
	return uid, gid
}

// colonFile reads a passwd or group file of the image: its entries of n
// fields by their third, the ID.
func colonFile(t *testing.T, files map[string]imageFile, name string, n int) map[string][]string {
	t.Helper()
	byID := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(files[name].data))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) != n {
			t.Errorf("%s: %q has %d fields, want %d", name, sc.Text(), len(f), n)
			continue
		}
		byID[f[2]] = f
	}
	return byID
}

// checkReleaseBinary: the image's /meshpilot, run here, is the release
// build of version: it prints version, and go's build information and the
// ELF file show the Dockerfile's flags. (With -trimpath go leaves -ldflags
// out of the build information: -s -w show as the missing symbol table
// and DWARF, -X as the version printed.)
func checkReleaseBinary(t *testing.T, bin, version string) {
	t.Helper()
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	if first, _, _ := strings.Cut(string(out), "\n"); first != "meshpilot "+version {
		t.Errorf("the image's meshpilot version prints %q, want %q", first, "meshpilot "+version)
	}
	out, err = exec.Command("go", "version", "-m", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, out)
	}
	settings := map[string]string{}
	for l := range strings.SplitSeq(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(l, "\tbuild\t"), "="); ok && strings.HasPrefix(l, "\tbuild\t") {
			settings[k] = v
		}
	}
	for k, want := range map[string]string{"-trimpath": "true", "CGO_ENABLED": "0", "-tags": "grpcnotrace", "GOOS": "linux", "GOARCH": runtime.GOARCH} {
		if settings[k] != want {
			t.Errorf("go version -m: the image's meshpilot was built with %s=%q, want %q\n%s", k, settings[k], want, out)
		}
	}
	if !strings.Contains(string(out), "\tpath\tgithub.com/meshpilot/meshpilot/cmd/meshpilot\n") {
		t.Errorf("go version -m: the image's binary is not cmd/meshpilot:\n%s", out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, s := range f.Sections {
		if s.Name == ".symtab" || strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			t.Errorf("the image's meshpilot has section %s: not linked with -s -w", s.Name)
		}
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the image's meshpilot is dynamically linked (%s): it would not start in an image without libc", p.Type)
		}
	}
}

// checkDeploymentFitsImage: the Deployment's Pod may run the image as
// written: runAsNonRoot with the image's numeric user (or its own, the
// same), no command of its own so that the image's entrypoint runs its
// args, which meshpilot accepts, and its container ports the image's.
func checkDeploymentFitsImage(t *testing.T, d *appsv1.Deployment, img podmanImage, uid, gid int64, bin string) {
	t.Helper()
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	sc := spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("%s: the Pod does not set runAsNonRoot", d.Name)
	}
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != uid || sc.RunAsGroup == nil || *sc.RunAsGroup != gid {
		t.Errorf("%s: the Pod's securityContext %+v, the image's user %d:%d", d.Name, sc, uid, gid)
	}
	if len(c.Command) > 0 {
		t.Errorf("%s: the container's command %q replaces the image's entrypoint", d.Name, c.Command)
	}
	if !slices.Equal(img.Config.Entrypoint, []string{"/meshpilot"}) || len(img.Config.Cmd) > 0 {
		t.Errorf("the image's entrypoint is %q and command %q, want [/meshpilot] alone: the Deployment passes only args", img.Config.Entrypoint, img.Config.Cmd)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("%s: the container's args %q do not start with serve", d.Name, c.Args)
	}
	// --help after the args: meshpilot parses every flag, and refuses an
	// unknown one, before it prints the help and exits.
	if out, err := exec.Command(bin, append(slices.Clone(c.Args), "--help")...).CombinedOutput(); err != nil {
		t.Errorf("%s: the image's /meshpilot refuses the Deployment's args %q: %v\n%s", d.Name, c.Args, err, out)
	}
	var ports []string
	for _, p := range c.Ports {
		proto := strings.ToLower(string(p.Protocol))
		if proto == "" {
			proto = "tcp"
		}
		ports = append(ports, fmt.Sprintf("%d/%s", p.ContainerPort, proto))
	}
	slices.Sort(ports)
	if exposed := slices.Sorted(maps.Keys(img.Config.ExposedPorts)); !slices.Equal(ports, exposed) {
		t.Errorf("%s: the container's ports are %v, the image exposes %v", d.Name, ports, exposed)
	}
}

// imageDeployments returns the Deployments of deploy/, of the secured
// variant (kustomized as kubectl apply -k does) and of the chart,
// deploy/'s first.
func imageDeployments(t *testing.T) []*appsv1.Deployment {
	t.Helper()
	var out []*appsv1.Deployment
	for _, u := range readManifests(t) {
		if u.GetKind() == "Deployment" {
			var d appsv1.Deployment
			if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, &d)
		}
	}
	if len(out) != 1 {
		t.Fatalf("deploy/ has %d Deployments, want 1", len(out))
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(kubectl(t, "kubectl kustomize deploy-secure/")), 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if d.Kind == "Deployment" {
			out = append(out, &d)
		}
	}
	if len(out) != 2 {
		t.Fatalf("deploy-secure/ renders %d Deployments, want 1", len(out)-1)
	}
	if a, b := out[0].Spec.Template.Spec.Containers[0].Image, out[1].Spec.Template.Spec.Containers[0].Image; a != b {
		t.Fatalf("deploy/ runs image %s, deploy-secure/ %s", a, b)
	}
	// The chart's Deployment, with its defaults and with each value set
	// it ships, runs the same image the same way.
	for _, values := range append([]string{""}, chartValueSets...) {
		var extra []string
		if values != "" {
			extra = []string{"-f", filepath.Join(chartDir, values)}
		}
		d := renderedDeployment(t, renderChart(t, "meshpilot", "meshpilot-system", extra...), "meshpilot")
		if a, b := out[0].Spec.Template.Spec.Containers[0].Image, d.Spec.Template.Spec.Containers[0].Image; a != b {
			t.Fatalf("deploy/ runs image %s, the chart (values %q) %s", a, values, b)
		}
		out = append(out, d)
	}
	return out
}

// checkPushed: the registry holds the image under the README's name: its
// manifest names the local image's config, whose blob is that config, and
// each layer unpacks to the layer the local image lists.
func checkPushed(t *testing.T, registryURL string, img podmanImage) {
	t.Helper()
	get := func(path, accept string) []byte {
		req, err := http.NewRequestWithContext(testutil.Context(t), http.MethodGet, registryURL+"/v2/"+readmeImageRepo+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxImageFile))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %v\n%.300s", path, resp.Status, err, body)
		}
		return body
	}
	var m ociManifest
	raw := get("/manifests/"+readmeImageTag, "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("the registry's manifest: %v\n%s", err, raw)
	}
	if m.Config.Digest != "sha256:"+img.ID {
		t.Fatalf("the registry's %s:%s has config %s; the image built is %s", readmeImageRepo, readmeImageTag, m.Config.Digest, img.ID)
	}
	if got := sha256Digest(get("/blobs/"+m.Config.Digest, "")); got != m.Config.Digest {
		t.Errorf("the registry's config blob %s has digest %s", m.Config.Digest, got)
	}
	if len(m.Layers) != len(img.RootFS.Layers) {
		t.Fatalf("the registry's image has %d layers, the image built %d", len(m.Layers), len(img.RootFS.Layers))
	}
	for i, l := range m.Layers {
		blob := get("/blobs/"+l.Digest, "")
		if got := sha256Digest(blob); got != l.Digest {
			t.Errorf("the registry's layer %s has digest %s", l.Digest, got)
		}
		var r io.Reader = bytes.NewReader(blob)
		if strings.HasSuffix(l.MediaType, "gzip") {
			z, err := gzip.NewReader(r)
			if err != nil {
				t.Fatal(err)
			}
			r = z
		}
		h := sha256.New()
		if _, err := io.Copy(h, io.LimitReader(r, maxImageFile)); err != nil {
			t.Fatal(err)
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != img.RootFS.Layers[i] {
			t.Errorf("the registry's layer %d unpacks to %s; the image built has %s", i, got, img.RootFS.Layers[i])
		}
	}
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// commitTime is the time of the commit checked out: the script's default
// SOURCE_DATE_EPOCH.
func commitTime(t *testing.T) time.Time {
	t.Helper()
	cmd := exec.Command("git", "log", "-1", "--format=%ct")
	cmd.Dir = testutil.RepoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git log: %v", err)
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("git log -1 --format=%%ct printed %q", out)
	}
	return time.Unix(sec, 0)
}

func writeIn(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImageAgreesWithDockerfile: the Dockerfile, which no test can build,
// describes the image hack/image.sh builds: its last stage is
// hack/Containerfile's but for where the files come from (the same base,
// user, ports, entrypoint, labels and arguments, in the same order), and
// each file it copies is made by the command that makes the same file for
// hack/Containerfile in the script (the same go build, environment and
// flags, but for the output path).
func TestImageAgreesWithDockerfile(t *testing.T) {
	root := testutil.RepoRoot(t)
	docker := containerfileStages(t, filepath.Join(root, "Dockerfile"))
	contained := containerfileStages(t, filepath.Join(root, "hack", "Containerfile"))
	if len(docker) < 2 || len(contained) != 1 {
		t.Fatalf("the Dockerfile has %d stages, want a build stage and the image's; hack/Containerfile %d, want 1", len(docker), len(contained))
	}
	image := docker[len(docker)-1]
	settings := imageSettings(t, contained[0])
	if a := imageSettings(t, image); !slices.Equal(a, settings) {
		t.Errorf("the image's settings differ:\nDockerfile:          %q\nhack/Containerfile:  %q", a, settings)
	}
	for _, op := range []string{"FROM scratch", "USER ", "EXPOSE ", "ENTRYPOINT ", "LABEL "} {
		if !slices.ContainsFunc(settings, func(s string) bool { return strings.HasPrefix(s, op) }) {
			t.Errorf("hack/Containerfile has no %s: %q", op, settings)
		}
	}

	// What the Dockerfile's build stages make, by output path.
	made := map[string]string{}
	for _, stage := range docker[:len(docker)-1] {
		for _, in := range stage {
			if in.op == "RUN" {
				if out, cmd := goCommand(shellWords(in.args)); out != "" {
					made[path.Clean(out)] = cmd
				}
			}
		}
	}
	// What the script makes in its context folder, by path in it.
	script, err := os.ReadFile(filepath.Join(root, "hack", "image.sh"))
	if err != nil {
		t.Fatal(err)
	}
	staged := map[string]string{}
	for l := range strings.SplitSeq(string(script), "\n") {
		if out, cmd := goCommand(shellWords(l)); out != "" {
			staged[path.Clean(strings.TrimPrefix(out, "$ctx/"))] = cmd
		}
	}
	a := imageCopies(t, image, made)
	b := imageCopies(t, contained[0], staged)
	if !slices.Equal(a, b) {
		t.Errorf("the images' files are made differently:\nDockerfile:                       %q\nhack/Containerfile, hack/image.sh: %q", a, b)
	}
	if !slices.ContainsFunc(a, func(c string) bool { return strings.Contains(c, " go build ") && strings.HasPrefix(c, "/meshpilot ") }) {
		t.Errorf("no go build makes /meshpilot: %q", a)
	}
}

// instruction is one instruction of a Containerfile.
type instruction struct{ op, args string }

// containerfileStages reads a Containerfile's instructions, stage by
// stage: continuation lines joined, comments and blank lines left out.
func containerfileStages(t *testing.T, file string) [][]instruction {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]instruction
	var cont string
	for l := range strings.SplitSeq(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if more, ok := strings.CutSuffix(l, `\`); ok {
			cont += more + " "
			continue
		}
		l, cont = cont+l, ""
		op, args, _ := strings.Cut(l, " ")
		in := instruction{op: strings.ToUpper(op), args: strings.TrimSpace(args)}
		if in.op == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("%s: %q before FROM", file, l)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	return stages
}

// imageSettings are a stage's instructions but COPY, each made
// comparable: words joined by one space, LABEL's pairs and EXPOSE's ports
// sorted, ENTRYPOINT's JSON decoded.
func imageSettings(t *testing.T, stage []instruction) []string {
	t.Helper()
	var out []string
	for _, in := range stage {
		w := shellWords(in.args)
		switch in.op {
		case "COPY":
			continue
		case "LABEL", "EXPOSE":
			slices.Sort(w)
		case "ENTRYPOINT", "CMD":
			if err := json.Unmarshal([]byte(in.args), &w); err != nil {
				t.Errorf("%s %s is not in JSON form, which runs the binary without a shell: %v", in.op, in.args, err)
			}
		}
		out = append(out, in.op+" "+strings.Join(w, " "))
	}
	return out
}

// imageCopies describes a stage's COPY instructions as "destination
// command", the command being the one of made that wrote the source.
func imageCopies(t *testing.T, stage []instruction, made map[string]string) []string {
	t.Helper()
	var out []string
	for _, in := range stage {
		if in.op != "COPY" {
			continue
		}
		var flags, paths []string
		for _, w := range shellWords(in.args) {
			switch {
			case strings.HasPrefix(w, "--from="):
			case strings.HasPrefix(w, "--"):
				flags = append(flags, w)
			default:
				paths = append(paths, w)
			}
		}
		if len(paths) != 2 {
			t.Fatalf("COPY %s: want one source and one destination", in.args)
		}
		cmd, ok := made[path.Clean(paths[0])]
		if !ok {
			t.Fatalf("COPY %s: nothing in the build makes %s (made: %q)", in.args, paths[0], made)
		}
		out = append(out, strings.Join(append(append([]string{paths[1]}, flags...), cmd), " "))
	}
	return out
}

// goCommand reads a go build or go run command, after environment
// assignments: the path it writes (go build's -o, go run's last argument)
// and the command without that path; "" for other commands.
func goCommand(words []string) (out, cmd string) {
	i := slices.Index(words, "go")
	if i < 0 || i+1 >= len(words) {
		return "", ""
	}
	for _, w := range words[:i] {
		if !strings.Contains(w, "=") {
			return "", ""
		}
	}
	var kept []string
	switch {
	case words[i+1] == "build":
		for j := 0; j < len(words); j++ {
			if words[j] == "-o" && j+1 < len(words) {
				out = words[j+1]
				j++
				continue
			}
			kept = append(kept, words[j])
		}
	case slices.Contains(words[i+1:], "run") && len(words) > i+3:
		out, kept = words[len(words)-1], words[:len(words)-1]
	default:
		return "", ""
	}
	return out, strings.Join(kept, " ")
}

// shellWords splits a line into words as a shell would the simple lines
// of these files: on blanks, quotes grouping and removed.
func shellWords(line string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '"' || r == '\''):
			quote, inWord = r, true
		case quote == 0 && (r == ' ' || r == '\t'):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}
