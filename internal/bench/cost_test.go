package bench

import (
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseStatParent(t *testing.T) {
	for _, tc := range []struct {
		stat, name string
		ppid       int
		ok         bool
	}{
		{"123 (etcd) S 45 123 45 0 -1", "etcd", 45, true},
		{"123 (kube-apiserver) R 7 1 1", "kube-apiserver", 7, true},
		// A command name may hold spaces and parentheses.
		{"9 (a (b) c) S 8 9 9", "a (b) c", 8, true},
		{"9 (x) S", "", 0, false},
		{"9 (x) S y", "", 0, false},
		{"garbage", "", 0, false},
	} {
		name, ppid, ok := parseStatParent(tc.stat)
		if name != tc.name || ppid != tc.ppid || ok != tc.ok {
			t.Errorf("parseStatParent(%q) = %q, %d, %v; want %q, %d, %v", tc.stat, name, ppid, ok, tc.name, tc.ppid, tc.ok)
		}
	}
}

// TestCPUMeterFindsTheAPIServer: the package's API server and etcd are
// this test binary's children.
func TestCPUMeterFindsTheAPIServer(t *testing.T) {
	m := newCPUMeter()
	if _, err := env.Client.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	us := m.lap()
	byName := map[string]ProcessUsage{}
	for _, u := range us {
		byName[u.Name] = u
	}
	for _, name := range []string{"kube-apiserver", "etcd", selfName} {
		u, ok := byName[name]
		if !ok || u.Count != 1 || u.RSS <= 0 || u.HWM < u.RSS || u.CPUSeconds < 0 {
			t.Errorf("%s: %+v (found %v), want one process with its memory", name, u, ok)
		}
	}
	if us[len(us)-1].Name != selfName {
		t.Errorf("%s is not last: %+v", selfName, us)
	}
	if _, ok := childProcesses(os.Getpid())[os.Getpid()]; ok {
		t.Error("this process counted as its own child")
	}
}
