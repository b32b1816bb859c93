package audit

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// dropProxy is an HTTP reverse proxy between meshpilot's client and the
// API server that can drop one event from a watch stream: the loss that
// the audit exists to find. Clients reach it over plain HTTP with JSON;
// it reaches the API server with the test's admin credentials.
type dropProxy struct {
	srv *httptest.Server

	mu      sync.Mutex // guards armed and dropped
	armed   *dropRule
	dropped []string // the events dropped, as "TYPE name resourceVersion"
}

// dropRule names the event to drop: of a resource (the URL's last path
// segment, e.g. "endpointslices"), of a type ("MODIFIED"), for an object
// name.
type dropRule struct{ resource, eventType, name string }

func newDropProxy(t *testing.T, apiserver *rest.Config) *dropProxy {
	t.Helper()
	target, err := url.Parse(apiserver.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(apiserver)
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			// The client's own gzip would reach the filter compressed;
			// without it, the proxy's transport asks for gzip and
			// decompresses.
			r.Out.Header.Del("Accept-Encoding")
		},
		Transport:      transport,
		ModifyResponse: p.filter,
		// Watch responses are streamed; flush each event at once.
		FlushInterval: -1,
	}
	p.srv = httptest.NewServer(rp)
	t.Cleanup(p.srv.Close)
	return p
}

// config reaches the API server through the proxy, in JSON so that the
// proxy can read the watch streams.
func (p *dropProxy) config() *rest.Config {
	return &rest.Config{
		Host:          p.srv.URL,
		ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"},
		QPS:           100,
		Burst:         200,
	}
}

// arm drops the next event that matches rule.
func (p *dropProxy) arm(rule dropRule) {
	p.mu.Lock()
	p.armed = &rule
	p.mu.Unlock()
}

func (p *dropProxy) droppedEvents() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.dropped...)
}

// take reports whether an event is to be dropped, and disarms the rule
// when it is.
func (p *dropProxy) take(resource, eventType, name, rv string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.armed
	if r == nil || r.resource != resource || r.eventType != eventType || r.name != name {
		return false
	}
	p.armed = nil
	p.dropped = append(p.dropped, eventType+" "+name+" "+rv)
	return true
}

// filter passes every response through, but a watch's body event by
// event, leaving out the one armed.
func (p *dropProxy) filter(resp *http.Response) error {
	q := resp.Request.URL.Query()
	if q.Get("watch") != "true" && q.Get("watch") != "1" {
		return nil
	}
	resource := resp.Request.URL.Path[strings.LastIndex(resp.Request.URL.Path, "/")+1:]
	body := resp.Body
	pr, pw := io.Pipe()
	go func() {
		dec := json.NewDecoder(body)
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				pw.CloseWithError(err)
				return
			}
			var ev struct {
				Type   string `json:"type"`
				Object struct {
					Metadata struct {
						Name            string `json:"name"`
						ResourceVersion string `json:"resourceVersion"`
					} `json:"metadata"`
				} `json:"object"`
			}
			if json.Unmarshal(raw, &ev) == nil && p.take(resource, ev.Type, ev.Object.Metadata.Name, ev.Object.Metadata.ResourceVersion) {
				continue
			}
			if _, err := pw.Write(append(raw, '\n')); err != nil {
				body.Close()
				return
			}
		}
	}()
	resp.Body = &pipeBody{PipeReader: pr, upstream: body}
	return nil
}

// pipeBody closes the upstream watch with the filtered body.
type pipeBody struct {
	*io.PipeReader
	upstream io.Closer
}

func (b *pipeBody) Close() error {
	b.upstream.Close()
	return b.PipeReader.Close()
}
