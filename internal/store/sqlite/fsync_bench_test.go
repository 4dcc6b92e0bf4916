package sqlite

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// BenchmarkFsyncWrite is the floor under every durable commit: a write and
// one fsync of a file in the directory the store's benchmarks use (the temp
// dir, on the same disk), without SQLite; 4 KB (one page), and 44 KB, what
// one inbox append writes to the WAL (11 pwrite64 of a page and one fsync
// per append, counted with strace -c). A commit with synchronous=FULL in
// WAL mode costs one such fsync, so the single-writer append rate is
// bounded by fsyncs/s of the 44 KB case, and an ask (three commits) costs
// at least three of them.
func BenchmarkFsyncWrite(b *testing.B) {
	for _, kb := range []int{4, 44} {
		b.Run(strconv.Itoa(kb)+"KB", func(b *testing.B) { benchFsync(b, kb<<10) })
	}
}

func benchFsync(b *testing.B, size int) {
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, size)
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	q := func(p float64) float64 { return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fsyncs/s")
}
