package kubeclient

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// resumableWatch reports whether req resumes a watch from a
// resourceVersion: what a reflector asks after its watch ended, and what
// an API server that has restarted meanwhile refuses as too old (410), the
// reflector then sleeping its backoff step after the API server's return
// before it lists again. A watch-list request (sendInitialEvents) brings
// the whole state itself and is not one.
func resumableWatch(req *http.Request) bool {
	if req.Method != http.MethodGet {
		return false
	}
	q := req.URL.Query()
	w, rv := q.Get("watch"), q.Get("resourceVersion")
	return (w == "true" || w == "1") && rv != "" && rv != "0" && q.Get("sendInitialEvents") != "true"
}

// expired answers req as an API server answers a watch from a
// resourceVersion it no longer has: 410 Gone, reason Expired. A reflector
// takes it as "list again" and sleeps its backoff step first: given while
// the API server is unreachable, that step elapses during the outage, and
// the list that follows waits in the gate and goes as soon as the API
// server is back.
func expired(req *http.Request, why error) *http.Response {
	body, _ := json.Marshal(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Code:     http.StatusGone,
		Reason:   metav1.StatusReasonExpired,
		Message:  why.Error() + "; the watch cannot resume, list again",
	})
	return &http.Response{
		Status:        "410 Gone",
		StatusCode:    http.StatusGone,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(strings.NewReader(string(body))),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
