package kubeclient

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// OutageOptions tune WithOutageGate. The zero value gives the defaults.
type OutageOptions struct {
	// Logger gets one line when the API server turns unreachable and one
	// when it is back (default slog.Default()).
	Logger *slog.Logger
	// ProbeMin is the first interval between two probes of /readyz in an
	// outage (default 250 ms); it doubles up to ProbeMax (default 500 ms),
	// which bounds how long after its return the API server is found.
	// Two probes a second, jittered, are nothing to a down or starting
	// API server (a refused connection, a /readyz answered from memory).
	ProbeMin, ProbeMax time.Duration
	// ProbeJitter spreads each interval by up to this fraction of itself,
	// either way (default 0.2).
	ProbeJitter float64
	// ProbeTimeout bounds one probe (default 2 s).
	ProbeTimeout time.Duration
}

// Outage gate defaults.
const (
	DefaultProbeMin     = 250 * time.Millisecond
	DefaultProbeMax     = 500 * time.Millisecond
	DefaultProbeJitter  = 0.2
	DefaultProbeTimeout = 2 * time.Second
)

// WithOutageGate returns a copy of cfg whose requests, once the API server
// has turned out unreachable, wait until it answers /readyz again instead
// of failing (see gate). Every client built from the copy shares one gate
// and one prober, so build all the clients of one API server from it.
// Requests keep their deadlines: one whose context ends while it waits
// fails then.
func WithOutageGate(cfg *rest.Config, opts OutageOptions) *rest.Config {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	g := &gate{
		host:         cfg.Host,
		probe:        readyzProbe(cfg),
		delays:       probeDelays{Min: opts.ProbeMin, Max: opts.ProbeMax, Jitter: opts.ProbeJitter},
		probeTimeout: opts.ProbeTimeout,
		log:          opts.Logger,
	}
	if g.delays.Min <= 0 {
		g.delays.Min = DefaultProbeMin
	}
	if g.delays.Max <= 0 {
		g.delays.Max = max(DefaultProbeMax, g.delays.Min)
	}
	if g.delays.Jitter <= 0 {
		g.delays.Jitter = DefaultProbeJitter
	}
	if g.probeTimeout <= 0 {
		g.probeTimeout = DefaultProbeTimeout
	}
	out := rest.CopyConfig(cfg)
	out.Wrap(func(base http.RoundTripper) http.RoundTripper {
		return &gatedTransport{gate: g, base: base}
	})
	return out
}

// readyzProbe asks cfg's API server for /readyz, with cfg's credentials
// but through a client of its own: the probe must not wait in the gate it
// opens.
func readyzProbe(cfg *rest.Config) func(context.Context) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = 0 // each probe has its own deadline
	client, clientErr := rest.HTTPClientFor(c)
	base, _, urlErr := rest.DefaultServerUrlFor(c)
	return func(ctx context.Context) error {
		if clientErr != nil {
			return clientErr // not unreachability: opens the gate
		}
		if urlErr != nil {
			return urlErr
		}
		u := base.JoinPath("/readyz")
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			return nil
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			return notReady{status: resp.Status}
		default:
			// Answered, but /readyz is not ours to read (401, 403, a
			// proxy's 404): an answer is all this probe can learn.
			return nil
		}
	}
}
