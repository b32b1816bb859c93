package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"text/tabwriter"
)

// writeHarnessCPU sets meshbench's CPU time per phase against
// meshpilot's, and both against what the machine had: when the two
// together near every CPU, the harness was part of the bottleneck.
func (r *Result) writeHarnessCPU(out io.Writer) {
	if len(r.Phases) == 0 {
		return
	}
	fmt.Fprintf(out, "\nCPU per phase, meshpilot against meshbench itself (its clients, the workload's writes; the API server and etcd not counted), %d CPUs:\n", r.Machine.CPUs)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\twall s\tmeshpilot CPU s\tmeshbench CPU s\tof the machine %\tmeshbench RSS MiB\t")
	for _, p := range r.Phases {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.0f\t%.1f\t\n", p.Name, p.WallSeconds, p.CPUDelta, p.HarnessCPUDelta,
			busyPct(p.CPUDelta+p.HarnessCPUDelta, p.WallSeconds, r.Machine.CPUs), mib(p.Harness.RSS))
	}
	tw.Flush()
	if cv := r.Convergence; cv.Connections > 0 {
		fmt.Fprintf(out, "clients: %d ADS streams over %d connections\n", cv.Clients, cv.Connections)
	}
}

// busyPct is cpu seconds as a share of what cpus CPUs offer in wall
// seconds.
func busyPct(cpu, wall float64, cpus int) float64 {
	if wall <= 0 || cpus <= 0 {
		return 0
	}
	return 100 * cpu / (wall * float64(cpus))
}

// selfCPU starts a CPU profile of meshbench itself into file in the
// profile folder and returns what stops it: with meshpilot's own
// profile of the same phase, it shows what each side spent.
func (p *profiler) selfCPU(file string) (stop func()) {
	if p == nil {
		return func() {}
	}
	path := filepath.Join(p.dir, file)
	f, err := os.Create(path)
	if err != nil {
		p.logf("profile %s: %v", file, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		p.logf("profile %s: %v", file, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			p.logf("profile %s: %v", file, err)
			return
		}
		p.logf("profile saved: %s", path)
	}
}

// selfHeap writes meshbench's own heap profile into file in the profile
// folder, after a collection as meshpilot's are.
func (p *profiler) selfHeap(file string) {
	if p == nil {
		return
	}
	runtime.GC()
	path := filepath.Join(p.dir, file)
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		p.logf("profile %s: %v", file, err)
		return
	}
	p.logf("profile saved: %s", path)
}
