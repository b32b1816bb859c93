package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"
)

// writeHarnessCPU sets meshbench's CPU time per phase against
// meshpilot's, and both against what every process on the machine used:
// when the machine was busy and the two were not, other work bounded
// the phase; when meshbench used as much as meshpilot, the harness was
// part of the bottleneck.
func (r *Result) writeHarnessCPU(out io.Writer) {
	if len(r.Phases) == 0 {
		return
	}
	fmt.Fprintf(out, "\nCPU per phase: meshpilot, meshbench itself (its clients, the workload's writes), and every process on the machine (%d CPUs):\n", r.Machine.CPUs)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\twall s\tmeshpilot CPU s\tmeshbench CPU s\tmachine busy cores\t")
	for i, p := range r.Phases {
		busy := "-"
		if i > 0 {
			busy = fmt.Sprintf("%.2f", p.MachineBusyCores)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%s\t\n", p.Name, p.WallSeconds, p.CPUDelta, p.HarnessCPUDelta, busy)
	}
	tw.Flush()
	if cv := r.Convergence; cv.Connections > 0 {
		fmt.Fprintf(out, "clients: %d ADS streams over %d connections\n", cv.Clients, cv.Connections)
	}
}

// machineCPU is the CPU time of every process on the machine since it
// booted, from /proc/stat, in seconds.
type machineCPU struct {
	busy, total float64
	cpus        int // the cpuN lines, which share out total
}

func readMachineCPU() (machineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}, err
	}
	return parseMachineCPU(string(b))
}

// parseMachineCPU reads /proc/stat's first line, "cpu user nice system
// idle iowait irq softirq steal guest guest_nice" in clock ticks: idle
// and iowait are idle time; guest time is counted in user already.
func parseMachineCPU(stat string) (machineCPU, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineCPU{}, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	var ticks [8]float64
	for i := range ticks {
		v, err := strconv.ParseUint(f[1+i], 10, 64)
		if err != nil {
			return machineCPU{}, fmt.Errorf("/proc/stat: %w", err)
		}
		ticks[i] = float64(v) / clockTicks
	}
	idle := ticks[3] + ticks[4]
	var all float64
	for _, t := range ticks {
		all += t
	}
	cpus := 0
	for l := range strings.Lines(stat) {
		if len(l) > 3 && strings.HasPrefix(l, "cpu") && l[3] >= '0' && l[3] <= '9' {
			cpus++
		}
	}
	return machineCPU{busy: all - idle, total: all, cpus: max(cpus, 1)}, nil
}

// busyCores is how many cores were busy on average between before and
// m: busy time over wall time, the total being wall time times cores.
func (m machineCPU) busyCores(before machineCPU) float64 {
	total := m.total - before.total
	if total <= 0 || before.total == 0 {
		return 0
	}
	return math.Round(100*(m.busy-before.busy)/total*float64(m.cpus)) / 100
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
