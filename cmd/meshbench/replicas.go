package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/meshpilot/meshpilot/internal/bench"
)

// addReplicaFlags adds the replica run's flags: --replicas and how the
// replicas balance, and --plot.
func addReplicaFlags(f *pflag.FlagSet, c *bench.ReplicasConfig, plot *string) {
	f.IntVar(&c.Count, "replicas", c.Count, "above 1: run that many meshpilot replicas with --balance behind a simulated Service (a random ready replica per new connection, as kube-proxy), open the clients through it, restart one replica and record clients per replica every second until they are balanced and for --observe after; no churn")
	f.Float64Var(&c.Tolerance, "balance-tolerance", c.Tolerance, "with --replicas: each replica's --balance-tolerance, and the band fair share x (1 ± it) that counts as balanced")
	f.Float64Var(&c.ShedRate, "shed-rate", c.ShedRate, "with --replicas: each replica's --shed-rate")
	f.DurationVar(&c.Interval, "balance-interval", c.Interval, "with --replicas: each replica's --balance-interval (Lease renewal)")
	f.DurationVar(&c.MinAge, "shed-min-age", c.MinAge, "with --replicas: each replica's --shed-min-age; the restart waits this long after every client is complete, so that every connection may be shed")
	f.DurationVar(&c.Within, "balance-within", c.Within, "with --replicas: the longest the replicas may take to balance once the restarted one is ready; the run fails beyond it")
	f.DurationVar(&c.Observe, "observe", c.Observe, "with --replicas: how long to go on recording once balanced")
	f.StringVar(plot, "plot", "", "with --replicas: write an SVG plot of clients per replica around the restart to this file; with --soak: of meshpilot's memory, goroutines and open streams over the soak")
}

// finishReplicas writes the plot and fails a replica run that did not
// balance in time or left a client without its configuration for more
// than one reconnect.
func finishReplicas(res *bench.Result, plot string) error {
	r := res.Replicas
	if r == nil {
		return nil
	}
	if err := writePlot(plot, r.WritePlot); err != nil {
		return err
	}
	switch {
	case !r.Balanced:
		return fmt.Errorf("the replicas did not balance within %s of the restart", res.Config.Replicas.Within)
	case r.Lives.Violations > 0 || r.Lives.IncompleteAtEnd > 0:
		return fmt.Errorf("%d streams lost before their client had its configuration back, %d clients without it at the end",
			r.Lives.Violations, r.Lives.IncompleteAtEnd)
	}
	return nil
}

// writePlot writes a plot to the file path, unless path is empty.
func writePlot(path string, write func(io.Writer) error) error {
	if path == "" {
		return nil
	}
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
