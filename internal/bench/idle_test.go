package bench

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMedianOf(t *testing.T) {
	cases := []struct {
		rss  []int64
		want int64
	}{
		{[]int64{5}, 5},
		{[]int64{9, 1, 5}, 5},
		{[]int64{3, 3, 1}, 3},
	}
	for _, c := range cases {
		runs := make([]Usage, len(c.rss))
		for i, r := range c.rss {
			runs[i].RSS = r
		}
		if got := medianOf(runs, func(u Usage) int64 { return u.RSS }); got != c.want {
			t.Errorf("median of %v = %d, want %d", c.rss, got, c.want)
		}
	}
}

// TestDropPageCache: the kernel takes the advice for a file, and a
// missing binary is an error that names it.
func TestDropPageCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := dropPageCache(path); err != nil {
		t.Fatal(err)
	}
	if err := dropPageCache(path + "-missing"); err == nil {
		t.Fatal("no error for a missing file")
	}
}
