// Package memlimit sets the Go memory limit from the container's memory
// limit, so that the garbage collector works harder as the heap nears the
// limit instead of letting the kernel kill the process.
package memlimit

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	automemlimit "github.com/KimMachineGun/automemlimit/memlimit"
)

// DefaultRatio is the part of the container's limit given to the Go
// heap, automemlimit's default: the rest is left to what the Go limit does
// not count (the binary's pages, cgo, the kernel's buffers charged to the
// container).
const DefaultRatio = 0.9

// Where the limit in force came from, as logged.
const (
	SourceCgroup = "cgroup"
	SourceEnv    = "GOMEMLIMIT env"
	SourceNone   = "none"
)

// Options configures Apply. The zero value reads nothing and sets nothing
// (a Ratio of 0 is off).
type Options struct {
	// Ratio is the part of the cgroup limit set as the Go memory limit,
	// in (0, 1]; 0 turns this off.
	Ratio float64
	// Provider reads the container's limit in bytes, returning
	// automemlimit.ErrNoLimit when there is none; nil means automemlimit.FromCgroup
	// (cgroup v2 and v1).
	Provider automemlimit.Provider
	// LookupEnv reads the environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Logger gets the one line saying what was set; nil means slog.Default().
	Logger *slog.Logger
}

// Result is what Apply did.
type Result struct {
	Limit  int64  // the Go memory limit in force afterwards
	Source string // SourceCgroup, SourceEnv or SourceNone
}

// CheckRatio refuses a ratio Apply would refuse, so that a command can
// check its flags before it logs anything.
func CheckRatio(r float64) error {
	if math.IsNaN(r) || r < 0 || r > 1 {
		return fmt.Errorf("ratio %v is out of range: use 0 (off) or a ratio in (0, 1]", r)
	}
	return nil
}

// Apply sets the Go memory limit to Ratio of the container's memory limit
// unless the GOMEMLIMIT environment variable is set (the runtime has then
// applied it, and it stands). Without a container limit, or when it cannot
// be read, nothing is set: a failure to read it is logged, never fatal,
// since the process runs as well without a Go limit as before.
func Apply(o Options) (Result, error) {
	if err := CheckRatio(o.Ratio); err != nil {
		return Result{}, err
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	lookup := o.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	current := debug.SetMemoryLimit(-1)
	// Not automemlimit's Set: it also obeys AUTOMEMLIMIT, which would
	// override the ratio given here without a word, and logs its own lines.
	if v, ok := lookup("GOMEMLIMIT"); ok && v != "" {
		log.Info("memory limit", "limit", current, "source", SourceEnv, "GOMEMLIMIT", v)
		return Result{Limit: current, Source: SourceEnv}, nil
	}
	none := func(reason string, args ...any) Result {
		log.Info("memory limit", append([]any{"source", SourceNone, "reason", reason}, args...)...)
		return Result{Limit: current, Source: SourceNone}
	}
	if o.Ratio == 0 {
		return none("memory limit ratio is 0"), nil
	}
	provider := o.Provider
	if provider == nil {
		provider = automemlimit.FromCgroup
	}
	container, err := provider()
	switch {
	case errors.Is(err, automemlimit.ErrNoLimit):
		return none("no cgroup memory limit"), nil
	case errors.Is(err, automemlimit.ErrNoCgroup), errors.Is(err, automemlimit.ErrCgroupsNotSupported):
		return none("not in a memory cgroup", "error", err), nil
	case err != nil:
		log.Warn("memory limit not set: reading the cgroup memory limit failed", "error", err)
		return Result{Limit: current, Source: SourceNone}, nil
	}
	limit := int64(math.MaxInt64)
	if f := float64(container) * o.Ratio; f < math.MaxInt64 {
		limit = int64(f)
	}
	debug.SetMemoryLimit(limit)
	log.Info("memory limit", "limit", limit, "source", SourceCgroup, "cgroupLimit", container, "ratio", o.Ratio)
	return Result{Limit: limit, Source: SourceCgroup}, nil
}
