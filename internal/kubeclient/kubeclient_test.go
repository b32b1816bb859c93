package kubeclient

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

const kubeconfigTemplate = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: SERVER
contexts:
- name: ctx
  context:
    cluster: c
    user: u
    namespace: NAMESPACE
current-context: ctx
users:
- name: u
  user:
    token: abc
`

func writeKubeconfig(t *testing.T, dir, server, namespace string) string {
	t.Helper()
	body := strings.NewReplacer("SERVER", server, "NAMESPACE", namespace).Replace(kubeconfigTemplate)
	p := filepath.Join(dir, "config-"+namespace)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// isolate makes the test independent of the machine's own configuration.
func isolate(t *testing.T) string {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	return home
}

func TestLoadExplicit(t *testing.T) {
	isolate(t)
	p := writeKubeconfig(t, t.TempDir(), "https://192.0.2.1:6443", "team-a")
	l, err := LoadWithNamespace(p)
	if err != nil {
		t.Fatal(err)
	}
	if l.Config.Host != "https://192.0.2.1:6443" || l.Namespace != "team-a" {
		t.Errorf("host %q namespace %q", l.Config.Host, l.Namespace)
	}
	if l.Config.QPS != QPS || l.Config.Burst != Burst {
		t.Errorf("QPS %v burst %d, want %d/%d", l.Config.QPS, l.Config.Burst, QPS, Burst)
	}
	if !strings.Contains(l.Source, p) || !strings.Contains(l.Source, `"ctx"`) {
		t.Errorf("source %q does not name the file and context", l.Source)
	}
}

func TestLoadExplicitMissing(t *testing.T) {
	isolate(t)
	_, _, err := Load("/nonexistent/kubeconfig")
	want := "the kubeconfig file /nonexistent/kubeconfig given by --kubeconfig does not exist; check the path"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

func TestLoadEnvList(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	p := writeKubeconfig(t, dir, "https://192.0.2.2:6443", "team-b")
	t.Setenv("KUBECONFIG", filepath.Join(dir, "missing")+string(filepath.ListSeparator)+p)
	l, err := LoadWithNamespace("")
	if err != nil {
		t.Fatal(err)
	}
	if l.Config.Host != "https://192.0.2.2:6443" || l.Namespace != "team-b" {
		t.Errorf("host %q namespace %q", l.Config.Host, l.Namespace)
	}
}

func TestLoadHome(t *testing.T) {
	home := isolate(t)
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	p := writeKubeconfig(t, filepath.Join(home, ".kube"), "https://192.0.2.3:6443", "x")
	if err := os.Rename(p, filepath.Join(home, ".kube", "config")); err != nil {
		t.Fatal(err)
	}
	cfg, source, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://192.0.2.3:6443" || !strings.Contains(source, filepath.Join(home, ".kube", "config")) {
		t.Errorf("host %q source %q", cfg.Host, source)
	}
}

func TestLoadNothingFound(t *testing.T) {
	home := isolate(t)
	_, _, err := Load("")
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{"no Kubernetes configuration found", "--kubeconfig", "$KUBECONFIG (not set)", filepath.Join(home, ".kube", "config"), "in-cluster", "pass --kubeconfig FILE or set KUBECONFIG"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans lines: %q", msg)
	}

	t.Setenv("KUBECONFIG", filepath.Join(home, "a")+string(filepath.ListSeparator)+filepath.Join(home, "b"))
	_, _, err = Load("")
	if err == nil || !strings.Contains(err.Error(), "$KUBECONFIG ("+filepath.Join(home, "a")) {
		t.Errorf("error %v does not name the $KUBECONFIG files", err)
	}
}

func TestLoadNoCurrentContext(t *testing.T) {
	isolate(t)
	p := filepath.Join(t.TempDir(), "kc")
	body := strings.Replace(kubeconfigTemplate, "current-context: ctx", "", 1)
	body = strings.NewReplacer("SERVER", "https://192.0.2.4", "NAMESPACE", "nsx").Replace(body)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), "has no current context") {
		t.Fatalf("error %v", err)
	}
}

func TestLoadInCluster(t *testing.T) {
	isolate(t)
	nsFile := filepath.Join(t.TempDir(), "namespace")
	if err := os.WriteFile(nsFile, []byte("mesh-system\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	oldFile, oldFn := inClusterNamespaceFile, inClusterConfig
	t.Cleanup(func() { inClusterNamespaceFile, inClusterConfig = oldFile, oldFn })
	inClusterNamespaceFile = nsFile
	inClusterConfig = func() (*rest.Config, error) { return &rest.Config{Host: "https://192.0.2.5:443"}, nil }
	l, err := LoadWithNamespace("")
	if err != nil {
		t.Fatal(err)
	}
	if l.Namespace != "mesh-system" || l.Source != "in-cluster service account" || l.Config.QPS != QPS {
		t.Errorf("%+v", l)
	}
}

func tlsServer(t *testing.T, code int) (*httptest.Server, *rest.Config) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code == http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"denied by test","code":` + strconv.Itoa(code) + `}`))
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, &rest.Config{Host: srv.URL, BearerToken: "abc", TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

func checkErr(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	start := time.Now()
	err := Check(context.Background(), cfg)
	if time.Since(start) > CheckTimeout+time.Second {
		t.Errorf("Check took %s", time.Since(start))
	}
	if err == nil {
		t.Fatal("Check succeeded")
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error spans lines: %q", err)
	}
	return err.Error()
}

func TestCheckOK(t *testing.T) {
	_, cfg := tlsServer(t, http.StatusOK)
	if err := Check(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
}

func TestCheckUnauthorized(t *testing.T) {
	srv, cfg := tlsServer(t, http.StatusUnauthorized)
	msg := checkErr(t, cfg)
	want := "the API server at " + srv.URL + " refused the credentials (401 Unauthorized)"
	if !strings.HasPrefix(msg, want) {
		t.Errorf("error %q, want prefix %q", msg, want)
	}
}

func TestCheckForbidden(t *testing.T) {
	srv, cfg := tlsServer(t, http.StatusForbidden)
	msg := checkErr(t, cfg)
	want := "the API server at " + srv.URL + " accepted the credentials but forbids this request (403 Forbidden: denied by test)"
	if !strings.HasPrefix(msg, want) {
		t.Errorf("error %q, want prefix %q", msg, want)
	}
}

func TestCheckServerError(t *testing.T) {
	srv, cfg := tlsServer(t, http.StatusInternalServerError)
	msg := checkErr(t, cfg)
	if !strings.HasPrefix(msg, "the API server at "+srv.URL+" answered 500 Internal Server Error") {
		t.Errorf("error %q", msg)
	}
}

func TestCheckUnknownAuthority(t *testing.T) {
	srv, cfg := tlsServer(t, http.StatusOK)
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	msg := checkErr(t, cfg)
	if !strings.HasPrefix(msg, "TLS with the API server at "+srv.URL+" failed: its certificate is signed by an unknown authority") {
		t.Errorf("error %q", msg)
	}
}

func TestCheckPlainHTTPServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	host := "https://" + srv.Listener.Addr().String()
	msg := checkErr(t, &rest.Config{Host: host, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if !strings.HasPrefix(msg, "TLS with the API server at "+host+" failed: the server does not speak TLS") {
		t.Errorf("error %q", msg)
	}
}

func TestCheckClosedPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := "https://" + l.Addr().String()
	l.Close()
	msg := checkErr(t, &rest.Config{Host: host, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	want := "cannot reach the API server at " + host + ": connection refused; is it running? is the address in the kubeconfig right?"
	if msg != want {
		t.Errorf("error %q, want %q", msg, want)
	}
}

func TestCheckSilentServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	// Accept connections and never answer.
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	host := "https://" + l.Addr().String()
	msg := checkErr(t, &rest.Config{Host: host, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if !strings.HasPrefix(msg, "the API server at "+host+" did not answer within 5s") {
		t.Errorf("error %q", msg)
	}
}
