package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestTransient(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewServerTimeout(pods, "create", 1), true},
		{apierrors.NewTimeoutError("request did not complete within requested timeout", 1), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewServiceUnavailable("etcd"), true},
		{apierrors.NewInternalError(errors.New("rpc error: code = Unavailable desc = error reading from server: connection reset by peer")), true},
		{fmt.Errorf("post: %w", syscall.ECONNRESET), true},
		{&url.Error{Op: "Post", URL: "https://127.0.0.1/api/v1/pods", Err: io.ErrUnexpectedEOF}, true},
		{apierrors.NewConflict(pods, "p", errors.New("changed")), false},
		{apierrors.NewAlreadyExists(pods, "p"), false},
		{apierrors.NewBadRequest("no"), false},
		{context.Canceled, false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestRetried: transient failures are retried, each attempt counted as a
// write and told that one before it failed; other failures end at once.
func TestRetried(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	timeout := apierrors.NewServerTimeout(pods, "create", 1)
	for _, tc := range []struct {
		name    string
		errs    []error // of each attempt; nil past the end
		want    error
		retries []bool
	}{
		{"succeeds", nil, nil, []bool{false}},
		{"times out twice", []error{timeout, timeout}, nil, []bool{false, true, true}},
		{"a conflict is final", []error{apierrors.NewConflict(pods, "p", errors.New("changed"))}, errConflict, []bool{false}},
		{"gives up", []error{timeout, timeout, timeout, timeout, timeout, timeout, timeout, timeout}, timeout,
			[]bool{false, true, true, true, true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &workload{retryWait: time.Microsecond}
			var retries []bool
			err := w.retried(t.Context(), func(retry bool) error {
				retries = append(retries, retry)
				if n := len(retries) - 1; n < len(tc.errs) {
					return tc.errs[n]
				}
				return nil
			})
			if (err == nil) != (tc.want == nil) || (tc.want == errConflict && !apierrors.IsConflict(err)) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if fmt.Sprint(retries) != fmt.Sprint(tc.retries) || w.writes.Load() != int64(len(tc.retries)) {
				t.Errorf("attempts told retry %v, %d writes counted; want %v", retries, w.writes.Load(), tc.retries)
			}
		})
	}
}

// errConflict stands for any conflict in TestRetried's table.
var errConflict = errors.New("a conflict")

func TestMadeBefore(t *testing.T) {
	exists := apierrors.NewAlreadyExists(schema.GroupResource{Resource: "pods"}, "p")
	if madeBefore(true, exists) != nil || madeBefore(false, exists) == nil || madeBefore(true, nil) != nil {
		t.Error("madeBefore: AlreadyExists counts as made only on a retry")
	}
}
