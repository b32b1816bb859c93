// Package kubeclient finds the Kubernetes client configuration the way
// kubectl does and checks, with one quick request, that the API server
// answers to it. Its errors are single sentences that say what went wrong
// and what to do about it, ready to be shown to a person.
package kubeclient

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"
)

// Client rate limits for an informer-heavy controller: client-go's default
// of 5 QPS / burst 10 is too low for many informers listing at start-up.
const (
	QPS   = 50
	Burst = 100
)

// inClusterNamespaceFile holds the Pod's namespace when running in a cluster.
var inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// inClusterConfig is rest.InClusterConfig, replaceable in tests.
var inClusterConfig = rest.InClusterConfig

// Load finds the client configuration, in kubectl's order: the file given
// by kubeconfigPath (the --kubeconfig flag) when not empty, else the files
// listed in $KUBECONFIG (merged, missing ones skipped), else
// ~/.kube/config, else the in-cluster service account. It returns the
// configuration with QPS and Burst set, and a short description of where
// it came from, for logs.
func Load(kubeconfigPath string) (cfg *rest.Config, source string, err error) {
	l, err := load(kubeconfigPath)
	if err != nil {
		return nil, "", err
	}
	return l.Config, l.Source, nil
}

// Loaded is a client configuration and what Load found along with it.
type Loaded struct {
	Config *rest.Config
	// Source says where the configuration came from, for logs.
	Source string
	// Namespace is the namespace of the kubeconfig's current context, or
	// the Pod's namespace in a cluster; "default" when neither says.
	Namespace string
}

// LoadWithNamespace is Load that also returns the default namespace, for
// commands that follow kubectl's namespace rules.
func LoadWithNamespace(kubeconfigPath string) (*Loaded, error) {
	return load(kubeconfigPath)
}

func load(explicit string) (*Loaded, error) {
	rules := &clientcmd.ClientConfigLoadingRules{}
	var tried []string
	switch {
	case explicit != "":
		if _, err := os.Stat(explicit); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("the kubeconfig file %s given by --kubeconfig does not exist; check the path", explicit)
			}
			return nil, fmt.Errorf("cannot read the kubeconfig file %s given by --kubeconfig: %v", explicit, err)
		}
		rules.ExplicitPath = explicit
	case os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "":
		env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
		rules.Precedence = existing(filepath.SplitList(env))
		tried = append(tried, fmt.Sprintf("$KUBECONFIG (%s: no such file)", env))
	default:
		home := filepath.Join(homedir.HomeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
		rules.Precedence = existing([]string{home})
		tried = append(tried, "--kubeconfig (not given)", "$KUBECONFIG (not set)", home+" (no such file)")
	}

	if rules.ExplicitPath != "" || len(rules.Precedence) > 0 {
		files := rules.GetLoadingPrecedence()
		where := "kubeconfig " + strings.Join(files, string(filepath.ListSeparator))
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
		raw, err := cc.RawConfig()
		if err != nil {
			return nil, fmt.Errorf("cannot load %s: %v", where, oneLine(err))
		}
		if raw.CurrentContext == "" {
			return nil, fmt.Errorf("%s has no current context; choose one with \"kubectl config use-context NAME\"", where)
		}
		cfg, err := cc.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("%s (context %q) is not usable: %v", where, raw.CurrentContext, oneLine(err))
		}
		ns, _, err := cc.Namespace()
		if err != nil || ns == "" {
			ns = "default"
		}
		tune(cfg)
		return &Loaded{Config: cfg, Source: fmt.Sprintf("%s, context %q", where, raw.CurrentContext), Namespace: ns}, nil
	}

	cfg, err := inClusterConfig()
	if err != nil {
		tried = append(tried, "the in-cluster service account (not running in a Pod)")
		return nil, fmt.Errorf("no Kubernetes configuration found: tried %s; pass --kubeconfig FILE or set KUBECONFIG", strings.Join(tried, ", "))
	}
	ns := "default"
	if b, err := os.ReadFile(inClusterNamespaceFile); err == nil && strings.TrimSpace(string(b)) != "" {
		ns = strings.TrimSpace(string(b))
	}
	tune(cfg)
	return &Loaded{Config: cfg, Source: "in-cluster service account", Namespace: ns}, nil
}

func tune(cfg *rest.Config) {
	if cfg.QPS == 0 {
		cfg.QPS = QPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = Burst
	}
}

func existing(paths []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
