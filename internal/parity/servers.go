package parity

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// server is a control plane under comparison, run as a process against
// the case's API server.
type server struct {
	name    string
	xdsAddr string
	cmd     *exec.Cmd
	log     *os.File
	exited  chan struct{} // closed once the process ended
}

// startIstiod runs pilot-discovery standalone: plaintext xDS, no CA, no
// webhooks, its root namespace istio-system (its default).
func startIstiod(ctx context.Context, bin, kubeconfig, logPath string) (*server, error) {
	xds, err := freeAddr()
	if err != nil {
		return nil, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"discovery", "--kubeconfig", kubeconfig, "--grpcAddr", xds, "--httpAddr", httpAddr,
		"--secureGRPCAddr", "", "--httpsAddr", "", "--monitoringAddr", "", "--ctrlz_port", "0", "--clusterID", "Kubernetes"}
	env := []string{"ENABLE_CA_SERVER=false", "POD_NAMESPACE=istio-system", "PILOT_ENABLE_CROSS_CLUSTER_WORKLOAD_ENTRY=false"}
	return start(ctx, "istiod", bin, args, env, logPath, xds, "http://"+httpAddr+"/ready")
}

// startMeshpilot runs meshpilot serve with Istio's root namespace, as
// istiod has it.
func startMeshpilot(ctx context.Context, bin, kubeconfig, logPath string) (*server, error) {
	xds, err := freeAddr()
	if err != nil {
		return nil, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--kubeconfig", kubeconfig, "--xds-addr", xds, "--http-addr", httpAddr, "--cluster-id", "Kubernetes"}
	return start(ctx, "meshpilot", bin, args, nil, logPath, xds, "http://"+httpAddr+"/readyz")
}

func start(ctx context.Context, name, bin string, args, env []string, logPath, xds, ready string) (*server, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	s := &server{name: name, xdsAddr: xds, cmd: cmd, log: log, exited: make(chan struct{})}
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			log.Close()
			return nil, fmt.Errorf("%s exited before it was ready (%v); its log is %s", name, waitErr, logPath)
		case <-ctx.Done():
			s.stop()
			return nil, context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s not ready at %s after 60 s; its log is %s", name, ready, logPath)
		}
	}
}

func (s *server) stop() {
	if s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
	}
	s.log.Close()
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
