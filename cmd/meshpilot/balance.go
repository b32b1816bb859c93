package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/replicas"
	"github.com/meshpilot/meshpilot/internal/server"
)

// balanceReplicas publishes this replica's xDS client count in its Lease
// and sheds the clients it holds beyond its fair share, until ctx ends
// (the signal that starts the drain: the Lease is deleted then, so that
// peers take this replica's clients into their shares at once).
func balanceReplicas(client *kubeapi.Client, f serveFlags, log *slog.Logger) func(context.Context, *server.Server) error {
	return func(ctx context.Context, srv *server.Server) error {
		explicit := ""
		if f.systemNamespaceSet {
			explicit = f.systemNamespace
		}
		ns, name, err := replicas.Identity(explicit, f.systemNamespace)
		if err != nil {
			return err
		}
		x := srv.XDS()
		clients := func() int { g, e := x.ClientCounts(); return g + e }
		pub, err := replicas.New(replicas.Options{Client: client, Namespace: ns, Name: name, Clients: clients,
			Period: f.balanceInterval, Log: log})
		if err != nil {
			return err
		}
		bal := replicas.NewBalancer(replicas.BalancerOptions{
			View:    pub.View,
			Self:    name,
			Clients: clients,
			Conns: func() []replicas.Conn {
				open := x.SheddableConns()
				out := make([]replicas.Conn, len(open))
				for i, c := range open {
					out[i] = replicas.Conn{ID: c.ID, Opened: c.Opened, Streams: c.Streams}
				}
				return out
			},
			Shed:      func(ids []int64) int { return x.Shed(ids...) },
			Tolerance: f.balanceTolerance,
			Rate:      f.shedRate,
			MinAge:    f.shedMinAge,
			Settle:    replicas.SettleFor(f.balanceInterval),
			Log:       log,
		})
		log.Info("balancing xDS clients across replicas", "lease", ns+"/"+name, "tolerance", f.balanceTolerance, "shedRate", f.shedRate,
			"interval", f.balanceInterval, "shedMinAge", f.shedMinAge)
		var wg sync.WaitGroup
		wg.Go(func() { pub.Run(ctx) })
		wg.Go(func() { bal.Run(ctx) })
		wg.Wait()
		return nil
	}
}
