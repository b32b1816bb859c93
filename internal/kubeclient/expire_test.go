package kubeclient

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestResumableWatch(t *testing.T) {
	tests := []struct {
		method, query string
		want          bool
	}{
		{"GET", "watch=true&resourceVersion=42&allowWatchBookmarks=true&timeoutSeconds=300", true},
		{"GET", "watch=1&resourceVersion=42", true},
		{"GET", "watch=true&resourceVersion=0", false},                                                           // from any state: nothing to resume
		{"GET", "watch=true", false},                                                                             // from now
		{"GET", "watch=true&resourceVersion=42&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", false}, // watch-list
		{"GET", "resourceVersion=42", false},                                                                     // a list
		{"GET", "watch=false&resourceVersion=42", false},
		{"POST", "watch=true&resourceVersion=42", false},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.query, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, "https://apiserver.test/api/v1/pods?"+tt.query, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := resumableWatch(req); got != tt.want {
				t.Errorf("resumableWatch = %v, want %v", got, tt.want)
			}
		})
	}
}

func watchRequest(t *testing.T) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://apiserver.test/api/v1/pods?watch=true&resourceVersion=42", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// assertExpired checks that resp is an API server's 410 Expired Status.
func assertExpired(t *testing.T, resp *http.Response, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("watch: error %v, want a 410 answer", err)
	}
	defer resp.Body.Close()
	var st metav1.Status
	if resp.StatusCode != http.StatusGone || resp.Header.Get("Content-Type") != "application/json" ||
		json.NewDecoder(resp.Body).Decode(&st) != nil || st.Kind != "Status" || st.Reason != metav1.StatusReasonExpired || st.Code != http.StatusGone {
		t.Fatalf("watch answered %d %+v, want 410 with an Expired Status", resp.StatusCode, st)
	}
	if !strings.Contains(st.Message, "unreachable since") {
		t.Fatalf("message %q does not say since when the API server is unreachable", st.Message)
	}
}

// TestGateExpiresResumedWatches: while the API server is unreachable, a
// watch that would resume from a resourceVersion is answered 410 Expired
// at once, neither sent nor held back, so that its reflector's backoff
// step elapses during the outage; the watch that met the outage is
// answered so too.
func TestGateExpiresResumedWatches(t *testing.T) {
	t.Run("gate closed", func(t *testing.T) {
		rt, _ := closedGate(t)
		resp, err := rt.RoundTrip(watchRequest(t))
		assertExpired(t, resp, err)
		if n := rt.base.(*fakeBase).count(); n != 1 {
			t.Fatalf("base saw %d requests, want only the POST that closed the gate", n)
		}
	})
	t.Run("watch refused", func(t *testing.T) {
		base := &fakeBase{script: []error{errRefused}}
		rt, _ := testGate(t, base, &fakeProbe{})
		resp, err := rt.RoundTrip(watchRequest(t))
		assertExpired(t, resp, err)
		if rt.gate.downSince() == nil {
			t.Fatal("the refused watch left the gate open")
		}
	})
	t.Run("gate open", func(t *testing.T) {
		rt, _ := testGate(t, &fakeBase{script: []error{errors.New("boom")}}, &fakeProbe{})
		if _, err := rt.RoundTrip(watchRequest(t)); err == nil || err.Error() != "boom" {
			t.Fatalf("watch with the API server up: error %v, want the base's", err)
		}
	})
}
