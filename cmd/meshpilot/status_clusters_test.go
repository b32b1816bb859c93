package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/multicluster"
	"github.com/meshpilot/meshpilot/internal/multicluster/clusterstate"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// TestStatusClustersTable: one line per cluster, the local one marked,
// and exit 69 only when a cluster is not synced.
func TestStatusClustersTable(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	local := clusterstate.Cluster{ID: "Kubernetes", APIServer: "https://10.0.0.1:443", State: clusterstate.Synced, Local: true}
	east := clusterstate.Cluster{ID: "east", Secret: "meshpilot-system/istio-remote-secret-east", APIServer: "https://east.example:6443",
		State: clusterstate.Synced, Since: now.Add(-90 * time.Second)}
	west := clusterstate.Cluster{ID: "west", Secret: "meshpilot-system/istio-remote-secret-west", APIServer: "https://west.example:6443",
		State: clusterstate.Unreachable, Since: now.Add(-5 * time.Second), LastError: "GET https://west.example:6443/readyz: connection refused"}
	for _, tc := range []struct {
		name     string
		clusters []clusterstate.Cluster
		want     string
		wantCode int
	}{
		{"a folder: no clusters", nil, "No clusters: meshpilot serves a folder (serve --from).\n", 0},
		{"all synced", []clusterstate.Cluster{local, east},
			"CLUSTER              SECRET                                      API SERVER                  STATE    SINCE       LAST ERROR\n" +
				"Kubernetes (local)   -                                           https://10.0.0.1:443        synced   -           -\n" +
				"east                 meshpilot-system/istio-remote-secret-east   https://east.example:6443   synced   1m30s ago   -\n", 0},
		{"one unreachable", []clusterstate.Cluster{local, east, west},
			"CLUSTER              SECRET                                      API SERVER                  STATE         SINCE       LAST ERROR\n" +
				"Kubernetes (local)   -                                           https://10.0.0.1:443        synced        -           -\n" +
				"east                 meshpilot-system/istio-remote-secret-east   https://east.example:6443   synced        1m30s ago   -\n" +
				"west                 meshpilot-system/istio-remote-secret-west   https://west.example:6443   unreachable   5s ago      GET https://west.example:6443/readyz: connection refused\n", exitNotSynced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := printClusters(&out, tc.clusters, now)
			code := 0
			if e, ok := err.(exitError); ok {
				code = e.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want || code != tc.wantCode {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d, output:\n%s", code, out.String(), tc.wantCode, tc.want)
			}
		})
	}
	// Through the command: the page read, the code kept.
	url := debugPages(t, map[string]any{"/debug/clusterz": []clusterstate.Cluster{local, west}})
	out, code := runStatus(t, "--server", url, "clusters")
	if code != exitNotSynced || !strings.Contains(out, "meshpilot: not synced: west (unreachable)") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

// TestStatusClustersFromServe runs serve with a remote Secret naming an
// API server that never answers: /debug/clusterz, `status clusters` (exit
// 69) and meshpilot_remote_cluster_state show it in state "timeout"
// after --remote-sync-timeout, beside the local cluster, synced.
func TestStatusClustersFromServe(t *testing.T) {
	ns := env.Namespace(t, nil)
	system := env.Namespace(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := env.Client.CoreV1().Secrets(system).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "istio-remote-secret-east", Namespace: system,
			Labels: map[string]string{multicluster.Label: multicluster.LabelValue}},
		Data: map[string][]byte{"east": []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	httpAddr := closedPort(t)
	p := start(t, nil, "serve", "--kubeconfig", env.Kubeconfig, "--namespaces", ns, "--system-namespace", system,
		"--remote-sync-timeout", "1s", "--xds-addr", "127.0.0.1:0", "--http-addr", httpAddr)
	server := "http://" + httpAddr
	testenv.Eventually(t, "east in state timeout on /debug/clusterz", func() (bool, string) {
		var got []clusterstate.Cluster
		if err := getJSON(context.Background(), statusFlags{server: server, timeout: 5 * time.Second}, "/debug/clusterz", &got); err != nil {
			return false, err.Error()
		}
		ok := len(got) == 2 && got[0].ID == "Kubernetes" && got[0].Local && got[0].State == clusterstate.Synced &&
			got[1].ID == "east" && got[1].Secret == system+"/istio-remote-secret-east" && got[1].State == clusterstate.Timeout &&
			strings.Contains(got[1].LastError, "127.0.0.1:1")
		return ok, fmt.Sprintf("%+v", got)
	})
	out, code := runStatus(t, "--server", server, "clusters")
	if code != exitNotSynced || !strings.Contains(out, "meshpilot: not synced: east (timeout)") {
		t.Fatalf("status clusters: exit %d, output:\n%s", code, out)
	}
	m := readPage(t, server+"/metrics")
	for _, series := range []string{
		`meshpilot_remote_cluster_state{cluster="east",state="timeout"} 1`,
		`meshpilot_remote_cluster_state{cluster="east",state="synced"} 0`,
	} {
		if !strings.Contains(m, series) {
			t.Errorf("/metrics has no %s", series)
		}
	}
	p.interrupt()
}
