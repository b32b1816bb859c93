package multicluster

import (
	"context"
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

	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/model"
)

// authRecorder is an API server of the Secret author's choosing: it
// records the Authorization header of every request.
type authRecorder struct {
	srv  *httptest.Server
	mu   sync.Mutex // guards seen
	seen []string
}

func newAuthRecorder(t *testing.T) *authRecorder {
	a := &authRecorder{}
	a.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r.Header.Get("Authorization"))
		a.mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *authRecorder) headers() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

// kubeconfig is a kubeconfig for a's server whose user is user (YAML
// indented under "user:").
func (a *authRecorder) kubeconfig(user string) []byte {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.srv.Certificate().Raw})
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: %s
    server: %s
  name: remote
contexts:
- context:
    cluster: remote
    user: remote
  name: remote
current-context: remote
users:
- name: remote
  user:
%s`, base64.StdEncoding.EncodeToString(ca), a.srv.URL, user)
}

// holesFixture is what the two attacks need: a script that leaves a
// marker when run and prints a credential, and a file standing for
// meshpilot's service-account token.
type holesFixture struct {
	marker, script, tokenFile string
}

func newHolesFixture(t *testing.T) holesFixture {
	dir := t.TempDir()
	f := holesFixture{marker: filepath.Join(dir, "ran"), script: filepath.Join(dir, "cred.sh"), tokenFile: filepath.Join(dir, "token")}
	script := fmt.Sprintf("#!/bin/sh\ntouch %s\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-exec\"}}'\n", f.marker)
	if err := os.WriteFile(f.script, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.tokenFile, []byte("meshpilot-service-account-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f holesFixture) ran() bool {
	_, err := os.Stat(f.marker)
	return err == nil
}

// TestRemoteKubeconfigCredentialsFromMeshpilotsMachine: a Secret whose
// kubeconfig runs a command (exec) or sends a file of meshpilot's
// (tokenFile, here standing for its service-account token) is refused
// with a log saying why: the command never runs and the token never
// reaches the author's server. With the option allowed, both work, which
// is what a refusal prevents.
func TestRemoteKubeconfigCredentialsFromMeshpilotsMachine(t *testing.T) {
	for _, tc := range []struct {
		name, option, reason, wantAuth string
		user                           func(holesFixture) string
	}{
		{
			name: "exec", option: OptionExec, reason: "exec is not allowed", wantAuth: "Bearer from-exec",
			user: func(f holesFixture) string {
				return fmt.Sprintf("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: %s\n      interactiveMode: Never\n", f.script)
			},
		},
		{
			name: "tokenFile", option: OptionTokenFile, reason: "tokenFile is not allowed", wantAuth: "Bearer meshpilot-service-account-token",
			user: func(f holesFixture) string { return "    tokenFile: " + f.tokenFile + "\n" },
		},
	} {
		for _, allowed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s allowed=%v", tc.name, allowed), func(t *testing.T) {
				fx := newHolesFixture(t)
				api := newAuthRecorder(t)
				var opts []string
				if allowed {
					opts = []string{tc.option}
				}
				h := startWith(t, func(o *Options) {
					o.InsecureKubeconfigOptions = opts
					// What a registry does first: a request to its API
					// server with the kubeconfig's credentials.
					o.NewRegistry = func(id string, cfg *rest.Config, scope Scope) (Registry, error) {
						client, err := kubeapi.NewRawClient(cfg)
						if err != nil {
							return nil, err
						}
						if err := client.Get().AbsPath("/api").Do(context.Background()).Error(); err != nil {
							return nil, err
						}
						return &fakeRegistry{Store: model.NewStore(), host: "attacker", scope: scope}, nil
					}
				}, remoteSecret("remote-evil", map[string][]byte{"evil": api.kubeconfig(tc.user(fx))}))
				if !allowed {
					h.awaitLog(t, "remote secret key is not a usable kubeconfig", "cluster=evil", tc.reason,
						"--insecure-multicluster-kubeconfig-options="+tc.option)
					// A refused key is done with once logged: nothing
					// builds a client of it.
					if fx.ran() {
						t.Error("the Secret's exec command ran")
					}
					if got := api.headers(); len(got) != 0 {
						t.Errorf("the Secret's server got requests with Authorization %q", got)
					}
					return
				}
				h.rec.waitFor(t, "add cluster/evil attacker")
				h.awaitLog(t, "allowed by --insecure-multicluster-kubeconfig-options", "cluster=evil", "options=["+tc.option+"]")
				if got := api.headers(); !slices.Contains(got, tc.wantAuth) {
					t.Errorf("Authorization headers %q, want %q", got, tc.wantAuth)
				}
				if tc.option == OptionExec && !fx.ran() {
					t.Error("the allowed exec command did not run")
				}
			})
		}
	}
}

func TestSanitizeKubeconfig(t *testing.T) {
	for _, tc := range []struct {
		name, user, allowed, wantErr, wantUsed string
	}{
		{name: "inline token", user: "    token: abc\n"},
		{name: "username and password", user: "    username: a\n    password: b\n"},
		{name: "oidc", user: "    auth-provider:\n      name: oidc\n      config:\n        client-id: x\n"},
		{name: "gcp", user: "    auth-provider:\n      name: gcp\n", wantErr: "gcp is not allowed"},
		{name: "gcp allowed", user: "    auth-provider:\n      name: gcp\n", allowed: "gcp", wantUsed: "gcp"},
		{name: "client certificate file", user: "    client-certificate: FILE\n    client-key-data: a2V5\n", wantErr: "clientCertificate is not allowed"},
		{name: "client key file", user: "    client-certificate-data: Y2VydA==\n    client-key: FILE\n", wantErr: "clientKey is not allowed"},
		{name: "token file", user: "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n", wantErr: "tokenFile is not allowed"},
		{name: "token file, another allowed", user: "    tokenFile: /t\n", allowed: "exec", wantErr: "tokenFile is not allowed"},
		{name: "exec", user: "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [-c, id]\n      interactiveMode: Never\n", wantErr: "exec is not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Validation refuses a file that cannot be read before
			// the check of the option would.
			file := filepath.Join(t.TempDir(), "pem")
			if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			user := strings.ReplaceAll(tc.user, "FILE", file)
			data := []byte(strings.Replace(string(kubeconfigFor("https://b.example")), "    token: secret-token\n", user, 1))
			var allowed []string
			if tc.allowed != "" {
				allowed = []string{tc.allowed}
			}
			_, used, err := parseKubeconfig(data, allowed)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case strings.Join(used, ",") != tc.wantUsed:
				t.Fatalf("insecure options used %q, want %q", used, tc.wantUsed)
			}
		})
	}
}

func TestCheckInsecureKubeconfigOptions(t *testing.T) {
	if err := CheckInsecureKubeconfigOptions([]string{"exec", "tokenFile", "clientKey", "clientCertificate", "gcp"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckInsecureKubeconfigOptions([]string{"tokenfile"}); err == nil {
		t.Fatal("a misspelt option was taken")
	}
}
