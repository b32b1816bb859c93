package testenv

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunningPod creates pod and sets its status as a kubelet would: running
// and ready at ip. The test API server has no kubelet, so without this a
// Pod never gets an address.
func (e *Env) RunningPod(t testing.TB, pod *corev1.Pod, ip string) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods := e.Client.CoreV1().Pods(pod.Namespace)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	created.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		PodIP:      ip,
		PodIPs:     []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
	}
	out, err := pods.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("setting status of pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return out
}

// ApplyEndpointSlice creates the slice, or replaces the one of that name:
// tests write slices as the EndpointSlice controller, which the test API
// server does not run, would.
func (e *Env) ApplyEndpointSlice(t testing.TB, s *discoveryv1.EndpointSlice) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	api := e.Client.DiscoveryV1().EndpointSlices(s.Namespace)
	cur, err := api.Get(ctx, s.Name, metav1.GetOptions{})
	if err == nil {
		s.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(ctx, s, metav1.UpdateOptions{})
	} else {
		_, err = api.Create(ctx, s, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("writing slice %s/%s: %v", s.Namespace, s.Name, err)
	}
}
