package multicluster

import (
	"crypto/sha256"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Label marks the Secrets holding remote clusters' kubeconfigs, as Istio
// names it.
const (
	Label      = "istio/multiCluster"
	LabelValue = "true"
)

// kubeconfig is one data key of a remote Secret: a cluster ID and what
// its value parsed to.
type kubeconfig struct {
	clusterID string
	// sum identifies the kubeconfig's bytes, so that an update of the
	// Secret that leaves a key's value alone rebuilds nothing.
	sum    [sha256.Size]byte
	config *rest.Config
	// err says why the value is not a usable kubeconfig.
	err error
}

// parseSecret returns the clusters of a remote Secret's data, ordered by
// cluster ID so that logs and actions come in a stable order.
func parseSecret(s *corev1.Secret) []kubeconfig {
	ids := make([]string, 0, len(s.Data))
	for id := range s.Data {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]kubeconfig, 0, len(ids))
	for _, id := range ids {
		data := s.Data[id]
		k := kubeconfig{clusterID: id, sum: sha256.Sum256(data)}
		k.config, k.err = parseKubeconfig(data)
		out = append(out, k)
	}
	return out
}

// parseKubeconfig reads a kubeconfig as istioctl's create-remote-secret
// writes it: one cluster, one user, its current context.
func parseKubeconfig(data []byte) (*rest.Config, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("empty kubeconfig")
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, err
	}
	if cfg.Host == "" {
		return nil, fmt.Errorf("kubeconfig names no API server")
	}
	return cfg, nil
}
