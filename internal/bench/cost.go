package bench

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// selfName names meshbench's own process in ProcessUsage, whatever its
// binary is called (a test binary, say).
const selfName = "meshbench"

// ProcessUsage is what the processes of one name used over a span of a
// run: the API servers and etcd that the run started, meshpilot, and
// meshbench itself. It tells which of them was the slow part: a process
// near the machine's cores for the whole span bounded it.
type ProcessUsage struct {
	// Name is the command name (kube-apiserver, etcd, meshpilot) or
	// meshbench.
	Name string `json:"name"`
	// Count of processes of that name (several clusters start several
	// API servers).
	Count int `json:"count"`
	// CPUSeconds over the span; Cores is CPUSeconds over the span's wall
	// time.
	CPUSeconds float64 `json:"cpu_seconds"`
	Cores      float64 `json:"cores"`
	// RSS at the span's end and HWM, the peak so far (VmHWM), summed over
	// the processes, in bytes.
	RSS int64 `json:"rss_bytes"`
	HWM int64 `json:"hwm_bytes"`
}

// cpuMeter measures the CPU time of meshbench and its child processes
// between laps. A process that starts during a lap counts from its
// start; one that exits during a lap is lost for it.
type cpuMeter struct {
	self int
	last time.Time
	seen map[int]float64 // CPU seconds of each pid at the last lap
}

func newCPUMeter() *cpuMeter {
	m := &cpuMeter{self: os.Getpid()}
	m.lap()
	return m
}

// lap returns each process name's usage since the previous lap, by
// name, meshbench last.
func (m *cpuMeter) lap() []ProcessUsage {
	now := time.Now()
	wall := now.Sub(m.last).Seconds()
	m.last = now
	seen := map[int]float64{}
	byName := map[string]*ProcessUsage{}
	add := func(pid int, name string) {
		u, err := readUsage(pid)
		if err != nil {
			return
		}
		seen[pid] = u.CPUSeconds
		pu := byName[name]
		if pu == nil {
			pu = &ProcessUsage{Name: name}
			byName[name] = pu
		}
		pu.Count++
		pu.CPUSeconds += u.CPUSeconds - m.seen[pid]
		pu.RSS += u.RSS
		pu.HWM += u.HWM
	}
	add(m.self, selfName)
	for pid, name := range childProcesses(m.self) {
		add(pid, name)
	}
	m.seen = seen
	var out []ProcessUsage
	for _, pu := range byName {
		if wall > 0 {
			pu.Cores = pu.CPUSeconds / wall
		}
		out = append(out, *pu)
	}
	slices.SortFunc(out, func(a, b ProcessUsage) int {
		if (a.Name == selfName) != (b.Name == selfName) {
			if a.Name == selfName {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

// childProcesses returns the command names of the direct children of
// parent, by pid, from /proc.
func childProcesses(parent int) map[int]string {
	out := map[int]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range dirs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		name, ppid, ok := parseStatParent(string(b))
		if !ok || ppid != parent {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		out[pid] = name
	}
	return out
}

// parseStatParent reads the command name and parent pid from a
// /proc/<pid>/stat line: "pid (comm) state ppid ...", where comm may
// hold spaces and parentheses.
func parseStatParent(stat string) (name string, ppid int, ok bool) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	f := strings.Fields(stat[end+1:])
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return "", 0, false
	}
	return stat[open+1 : end], ppid, true
}

// busiest is the usage with the most cores, or false when there is none.
func busiest(us []ProcessUsage) (ProcessUsage, bool) {
	if len(us) == 0 {
		return ProcessUsage{}, false
	}
	return slices.MaxFunc(us, func(a, b ProcessUsage) int { return cmp.Compare(a.Cores, b.Cores) }), true
}
