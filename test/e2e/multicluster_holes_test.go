package e2e

import (
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// TestServeRefusesRemoteKubeconfigExec runs the real binary with a remote
// Secret whose kubeconfig has an exec credential (a script that leaves a
// marker and prints a token) and names an API server of its author's, a
// TLS server recording the Authorization header: serve logs the refusal,
// the script never runs and the server gets no request. With
// --insecure-multicluster-kubeconfig-options=exec the same Secret runs
// the script and its token reaches the server, which is what the
// refusal prevents.
func TestServeRefusesRemoteKubeconfigExec(t *testing.T) {
	for _, allowed := range []bool{false, true} {
		t.Run(fmt.Sprintf("allowed=%v", allowed), func(t *testing.T) {
			var mu sync.Mutex
			var auth []string
			api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				auth = append(auth, r.Header.Get("Authorization"))
				mu.Unlock()
				http.Error(w, "no", http.StatusForbidden)
			}))
			defer api.Close()
			dir := t.TempDir()
			marker := filepath.Join(dir, "ran")
			script := filepath.Join(dir, "cred.sh")
			if err := os.WriteFile(script, fmt.Appendf(nil, "#!/bin/sh\ntouch %s\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-exec\"}}'\n", marker), 0o755); err != nil {
				t.Fatal(err)
			}
			ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw})
			kc := fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: evil, cluster: {server: %s, certificate-authority-data: %s}}]
contexts: [{name: evil, context: {cluster: evil, user: evil}}]
current-context: evil
users:
- name: evil
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: %s
      interactiveMode: Never
`, api.URL, base64.StdEncoding.EncodeToString(ca), script)
			system := env.Namespace(t, nil)
			createRemoteSecret(t, system, "istio-remote-secret-evil", map[string][]byte{"evil": kc})

			args := []string{"serve", "--kubeconfig", env.Kubeconfig, "--namespaces", env.Namespace(t, nil),
				"--system-namespace", system, "--xds-addr", testutil.FreeAddr(t), "--http-addr", testutil.FreeAddr(t)}
			if allowed {
				args = append(args, "--insecure-multicluster-kubeconfig-options=exec")
			}
			out := startProcess(t, testutil.BuildMeshpilot(t), args...)
			ran := func() bool { _, err := os.Stat(marker); return err == nil }
			seen := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(auth) }
			if !allowed {
				want := []string{"remote secret key is not a usable kubeconfig", "cluster=evil", "exec is not allowed", "--insecure-multicluster-kubeconfig-options=exec"}
				testenv.Eventually(t, "the refusal logged", func() (bool, string) {
					return slices.ContainsFunc(strings.Split(out.String(), "\n"), func(l string) bool { return containsAll(l, want) }), out.String()
				})
				// Had it been built, the registry would have asked its
				// API server at once.
				time.Sleep(time.Second)
				if ran() || len(seen()) > 0 {
					t.Fatalf("the Secret's command ran (%v) or its server was asked (%q)", ran(), seen())
				}
				return
			}
			testenv.Eventually(t, "the allowed exec's token at the Secret's server", func() (bool, string) {
				return ran() && slices.Contains(seen(), "Bearer from-exec"), fmt.Sprintf("ran %v, Authorization %q\n%s", ran(), seen(), out.String())
			})
			for _, want := range [][]string{{"remote kubeconfigs may use credentials that run commands", "allowed=[exec]"}, {"allowed by --insecure-multicluster-kubeconfig-options", "cluster=evil", "options=[exec]"}} {
				if !slices.ContainsFunc(strings.Split(out.String(), "\n"), func(l string) bool { return containsAll(l, want) }) {
					t.Errorf("no log line with %q:\n%s", want, out.String())
				}
			}
		})
	}
}
