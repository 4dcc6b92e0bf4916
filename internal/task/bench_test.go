package task

import (
	"slices"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// BenchmarkTaskExitToNotify measures the latency from a job's exit (the
// end time its supervisor records) to the owner's notification
// (docs/TARGETS.md: task exit → owner woken, p99 ≤ 50 ms). The
// path: supervisor writes status.json (fsync, rename, fsync) and exits →
// pidfd readable → watcher reaps, reads the status and the output tail →
// CompleteTask → Notify.
func BenchmarkTaskExitToNotify(b *testing.B) {
	type stamped struct {
		msg troupe.Message
		at  time.Time
	}
	notes := make(chan stamped, 16)
	h := newHarness(b, func(o *Options) { o.Logger = nil })
	h.notify = func(m troupe.Message) { notes <- stamped{m, time.Now()} }
	m, stop := h.run(b)
	defer stop()
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		tk := h.start(b, m, "true", 0)
		var n stamped
		select {
		case n = <-notes:
		case <-time.After(patience):
			b.Fatalf("no notification within %v", patience)
		}
		got := h.task(b, "p1", tk.ID)
		if got.State != Exited {
			b.Fatalf("task %+v", got)
		}
		lat = append(lat, n.at.Sub(got.EndedAt))
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}
