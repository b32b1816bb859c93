package memlimit

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	automemlimit "github.com/KimMachineGun/automemlimit/memlimit"
)

const (
	mib                   = 1 << 20
	ninetyPercentOf512MiB = 483183820 // 0.9 x 536870912 = 483183820.8, rounded down
)

func TestApply(t *testing.T) {
	// A limit no case sets, to tell "left alone" from "set".
	const before = 777 * mib
	env := func(v string) func(string) (string, bool) {
		return func(name string) (string, bool) {
			if name == "GOMEMLIMIT" && v != "" {
				return v, true
			}
			return "", false
		}
	}
	limit := func(n uint64) automemlimit.Provider {
		return func() (uint64, error) { return n, nil }
	}
	failing := func(err error) automemlimit.Provider {
		return func() (uint64, error) { return 0, err }
	}
	for _, tc := range []struct {
		name     string
		opts     Options
		want     Result
		wantLog  []string // substrings of the one log line
		wantCall bool     // the provider is read
	}{
		{
			name:     "cgroup limit, default ratio",
			opts:     Options{Ratio: DefaultRatio, Provider: limit(512 * mib)},
			want:     Result{Limit: ninetyPercentOf512MiB, Source: SourceCgroup},
			wantLog:  []string{"level=INFO", `msg="memory limit"`, fmt.Sprintf("limit=%d", ninetyPercentOf512MiB), `source=cgroup`, fmt.Sprintf("cgroupLimit=%d", 512*mib), "ratio=0.9"},
			wantCall: true,
		},
		{
			name:     "cgroup limit, ratio 1",
			opts:     Options{Ratio: 1, Provider: limit(256 * mib)},
			want:     Result{Limit: 256 * mib, Source: SourceCgroup},
			wantLog:  []string{fmt.Sprintf("limit=%d", 256*mib), "source=cgroup"},
			wantCall: true,
		},
		{
			name:     "cgroup limit beyond int64 is capped",
			opts:     Options{Ratio: 1, Provider: limit(math.MaxUint64)},
			want:     Result{Limit: math.MaxInt64, Source: SourceCgroup},
			wantLog:  []string{"source=cgroup"},
			wantCall: true,
		},
		{
			name:     "no cgroup limit (max or unlimited)",
			opts:     Options{Ratio: DefaultRatio, Provider: failing(automemlimit.ErrNoLimit)},
			want:     Result{Limit: before, Source: SourceNone},
			wantLog:  []string{"level=INFO", "source=none", `reason="no cgroup memory limit"`},
			wantCall: true,
		},
		{
			name:     "not in a memory cgroup",
			opts:     Options{Ratio: DefaultRatio, Provider: failing(automemlimit.ErrNoCgroup)},
			want:     Result{Limit: before, Source: SourceNone},
			wantLog:  []string{"level=INFO", "source=none", `reason="not in a memory cgroup"`},
			wantCall: true,
		},
		{
			name:     "GOMEMLIMIT set: it stands, the cgroup is not read",
			opts:     Options{Ratio: DefaultRatio, Provider: limit(512 * mib), LookupEnv: env("777MiB")},
			want:     Result{Limit: before, Source: SourceEnv},
			wantLog:  []string{"level=INFO", fmt.Sprintf("limit=%d", before), `source="GOMEMLIMIT env"`, "GOMEMLIMIT=777MiB"},
			wantCall: false,
		},
		{
			name:     "ratio 0 is off",
			opts:     Options{Ratio: 0, Provider: limit(512 * mib)},
			want:     Result{Limit: before, Source: SourceNone},
			wantLog:  []string{"level=INFO", "source=none", `reason="memory limit ratio is 0"`},
			wantCall: false,
		},
		{
			name:     "provider error: logged, nothing set, no error",
			opts:     Options{Ratio: DefaultRatio, Provider: failing(errors.New("read /sys/fs/cgroup/memory.max: permission denied"))},
			want:     Result{Limit: before, Source: SourceNone},
			wantLog:  []string{"level=WARN", "memory limit not set", "permission denied"},
			wantCall: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer debug.SetMemoryLimit(debug.SetMemoryLimit(before))
			var buf bytes.Buffer
			tc.opts.Logger = slog.New(slog.NewTextHandler(&buf, nil))
			if tc.opts.LookupEnv == nil {
				tc.opts.LookupEnv = env("")
			}
			called := false
			if p := tc.opts.Provider; p != nil {
				tc.opts.Provider = func() (uint64, error) { called = true; return p() }
			}
			got, err := Apply(tc.opts)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if got != tc.want {
				t.Errorf("Apply = %+v, want %+v", got, tc.want)
			}
			if inForce := debug.SetMemoryLimit(-1); inForce != tc.want.Limit {
				t.Errorf("Go memory limit in force = %d, want %d", inForce, tc.want.Limit)
			}
			if called != tc.wantCall {
				t.Errorf("provider read = %v, want %v", called, tc.wantCall)
			}
			line := buf.String()
			if n := strings.Count(line, "\n"); n != 1 {
				t.Errorf("logged %d lines, want 1:\n%s", n, line)
			}
			for _, s := range tc.wantLog {
				if !strings.Contains(line, s) {
					t.Errorf("log line lacks %q:\n%s", s, line)
				}
			}
		})
	}
}

func TestApplyRefusesABadRatio(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, r := range []float64{-0.1, 1.1, math.NaN()} {
		if _, err := Apply(Options{Ratio: r, Provider: func() (uint64, error) { return mib, nil }}); err == nil {
			t.Errorf("Apply(ratio %v) = nil error, want one", r)
		}
	}
}
