package kubeclient

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// TestUncompressed: a client of the Uncompressed copy asks for no gzip,
// while one of the config as loaded does (Go's transport asks by
// default); the original config is left as it was.
func TestUncompressed(t *testing.T) {
	srv, cfg := tlsServer(t, http.StatusOK)
	accepts := make(chan string, 1)
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accepts <- r.Header.Get("Accept-Encoding")
		inner.ServeHTTP(w, r)
	})
	for _, tc := range []struct {
		name     string
		cfg      *rest.Config
		wantGzip bool
	}{
		{"as loaded", cfg, true},
		{"uncompressed", Uncompressed(cfg), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Check(context.Background(), tc.cfg); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(<-accepts, "gzip"); got != tc.wantGzip {
				t.Errorf("asks for gzip: %v, want %v", got, tc.wantGzip)
			}
		})
	}
	if cfg.DisableCompression {
		t.Error("Uncompressed changed the config it copied")
	}
}
