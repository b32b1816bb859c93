package testenv

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

var env *Env

func TestMain(m *testing.M) { Main(m, &env) }

func TestServerVersionAndNamespace(t *testing.T) {
	v, err := env.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.37.2" {
		t.Errorf("server version = %q, want v1.37.2 (the build must set it)", v.GitVersion)
	}
	ns := env.Namespace(t, map[string]string{"team": "a"})
	got, err := env.Client.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["team"] != "a" {
		t.Errorf("namespace labels = %v", got.Labels)
	}
}

func TestRestartKeepsDataAndClients(t *testing.T) {
	ns := env.Namespace(t, nil)
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	// The clientset made before the restart must still work (same CA).
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true,
		func(ctx context.Context) (bool, error) {
			_, err := env.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err == nil, nil
		})
	if err != nil {
		t.Fatalf("namespace %s not readable after restart: %v", ns, err)
	}
}

// TestEtcdQuota: etcd runs with the raised quota, which it reports
// among its metrics.
func TestEtcdQuota(t *testing.T) {
	resp, err := http.Get(env.env.ControlPlane.Etcd.URL.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "etcd_server_quota_backend_bytes "); ok {
			if got, err := strconv.ParseFloat(v, 64); err != nil || got != EtcdQuotaBytes {
				t.Errorf("etcd's quota is %s, want %d", v, EtcdQuotaBytes)
			}
			return
		}
	}
	t.Errorf("etcd's metrics have no etcd_server_quota_backend_bytes:\n%.2000s", body)
}
