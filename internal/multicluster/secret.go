package multicluster

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Label marks the Secrets holding remote clusters' kubeconfigs, as Istio
// names it.
const (
	Label      = "istio/multiCluster"
	LabelValue = "true"
)

// The kubeconfig credentials a remote Secret may use only when
// Options.InsecureKubeconfigOptions names them (serve's
// --insecure-multicluster-kubeconfig-options), with istiod's names for
// them (PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS). Each makes
// meshpilot act on its own machine for whoever can write a Secret in the
// system namespace: exec runs a command in meshpilot's container,
// tokenFile, clientCertificate and clientKey read a file of it (such as
// meshpilot's own service-account token) and send what it proves to the
// kubeconfig's server, which the Secret's author chooses. Auth providers
// other than oidc (gcp, azure, openstack) run commands or read files too
// and are named by their provider name.
const (
	OptionExec              = "exec"
	OptionTokenFile         = "tokenFile"
	OptionClientCertificate = "clientCertificate"
	OptionClientKey         = "clientKey"
)

// InsecureKubeconfigOptions are the values Options.InsecureKubeconfigOptions
// takes besides an auth provider's name, for the flag's help and checks.
var InsecureKubeconfigOptions = []string{OptionExec, OptionTokenFile, OptionClientCertificate, OptionClientKey}

// kubeconfig is one data key of a remote Secret: a cluster ID and what
// its value parsed to.
type kubeconfig struct {
	clusterID string
	// sum identifies the kubeconfig's bytes, so that an update of the
	// Secret that leaves a key's value alone rebuilds nothing.
	sum    [sha256.Size]byte
	config *rest.Config
	// insecure are the options of InsecureKubeconfigOptions (or auth
	// providers) the kubeconfig uses, allowed by the operator: each is
	// logged when its cluster is built.
	insecure []string
	// err says why the value is not a usable kubeconfig.
	err error
}

// parseSecret returns the clusters of a remote Secret's data, ordered by
// cluster ID so that logs and actions come in a stable order; allowed are
// the insecure kubeconfig options the operator allows.
func parseSecret(s *corev1.Secret, allowed []string) []kubeconfig {
	ids := make([]string, 0, len(s.Data))
	for id := range s.Data {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]kubeconfig, 0, len(ids))
	for _, id := range ids {
		data := s.Data[id]
		k := kubeconfig{clusterID: id, sum: sha256.Sum256(data)}
		k.config, k.insecure, k.err = parseKubeconfig(data, allowed)
		out = append(out, k)
	}
	return out
}

// parseKubeconfig reads a kubeconfig as istioctl's create-remote-secret
// writes it: one cluster, one user, its current context. Its author is
// not trusted: credentials that run a command or read a file of
// meshpilot's are refused unless allowed names them (see OptionExec), as
// istiod's NewUntrustedRestConfig does; it returns those it allowed.
func parseKubeconfig(data []byte, allowed []string) (*rest.Config, []string, error) {
	if len(data) == 0 {
		return nil, nil, fmt.Errorf("empty kubeconfig")
	}
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, nil, err
	}
	if err := clientcmd.Validate(*raw); err != nil {
		return nil, nil, err
	}
	insecure, err := sanitizeKubeconfig(raw, allowed)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, nil, err
	}
	if cfg.Host == "" {
		return nil, nil, fmt.Errorf("kubeconfig names no API server")
	}
	return cfg, insecure, nil
}

// sanitizeKubeconfig refuses the users of raw that would run a command
// or send a local file's credentials, unless allowed names the option,
// and rebuilds every user from the fields reviewed here, so that a field
// client-go adds later is not acted on unseen. It returns the insecure
// options used and allowed, sorted.
//
// What stays allowed, as istiod allows it: a token, client certificate
// and key given inline, a username and password, impersonation, the oidc
// auth provider (it neither reads files nor runs commands); and of the
// cluster, its server and proxy URL (the author chooses where meshpilot
// connects, but sends nothing of meshpilot's there), a CA file (read
// locally, never sent) and insecure-skip-tls-verify (what it exposes is
// the Secret's own credentials).
func sanitizeKubeconfig(raw *clientcmdapi.Config, allowed []string) ([]string, error) {
	var used []string
	use := func(user, option, why string) error {
		if !slices.Contains(allowed, option) {
			return fmt.Errorf("user %q: %s is not allowed in a remote kubeconfig (%s); --insecure-multicluster-kubeconfig-options=%s allows it", user, option, why, option)
		}
		if !slices.Contains(used, option) {
			used = append(used, option)
		}
		return nil
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range raw.AuthInfos {
			if !yield(n) {
				return
			}
		}
	}) {
		a := raw.AuthInfos[name]
		if ap := a.AuthProvider; ap != nil && ap.Name != "oidc" {
			if err := use(name, ap.Name, "an auth provider that runs commands or reads files"); err != nil {
				return nil, err
			}
		}
		if a.Exec != nil {
			if err := use(name, OptionExec, "it would run "+a.Exec.Command+" in meshpilot's container"); err != nil {
				return nil, err
			}
		}
		if a.TokenFile != "" {
			if err := use(name, OptionTokenFile, "it would send the token in meshpilot's file "+a.TokenFile); err != nil {
				return nil, err
			}
		}
		if a.ClientCertificate != "" {
			if err := use(name, OptionClientCertificate, "it would send the certificate in meshpilot's file "+a.ClientCertificate); err != nil {
				return nil, err
			}
		}
		if a.ClientKey != "" {
			if err := use(name, OptionClientKey, "it would use the key in meshpilot's file "+a.ClientKey); err != nil {
				return nil, err
			}
		}
		raw.AuthInfos[name] = &clientcmdapi.AuthInfo{
			ClientCertificate:     a.ClientCertificate,
			ClientCertificateData: a.ClientCertificateData,
			ClientKey:             a.ClientKey,
			ClientKeyData:         a.ClientKeyData,
			Token:                 a.Token,
			TokenFile:             a.TokenFile,
			Impersonate:           a.Impersonate,
			ImpersonateUID:        a.ImpersonateUID,
			ImpersonateGroups:     a.ImpersonateGroups,
			ImpersonateUserExtra:  a.ImpersonateUserExtra,
			Username:              a.Username,
			Password:              a.Password,
			AuthProvider:          a.AuthProvider,
			Exec:                  a.Exec,
		}
	}
	slices.Sort(used)
	return used, nil
}

// CheckInsecureKubeconfigOptions refuses a value of
// --insecure-multicluster-kubeconfig-options that names nothing known,
// so that a typo does not silently leave a Secret refused.
func CheckInsecureKubeconfigOptions(opts []string) error {
	for _, o := range opts {
		switch o {
		case OptionExec, OptionTokenFile, OptionClientCertificate, OptionClientKey, "gcp", "azure", "openstack":
		default:
			return fmt.Errorf("unknown kubeconfig option %q: use %s, or an auth provider's name (gcp, azure, openstack)", o, strings.Join(InsecureKubeconfigOptions, ", "))
		}
	}
	return nil
}
