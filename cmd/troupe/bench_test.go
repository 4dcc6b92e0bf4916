package main

import (
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStartup measures the whole process: exec of `troupe serve` until
// it prints its ready line (it listens and has written its addr file by
// then), on a state dir with one registered project. Reported: median and
// worst in ms.
func BenchmarkStartup(b *testing.B) {
	state, proj := b.TempDir(), b.TempDir()
	writeTeam(b, proj, twoAgents)
	d := startDaemon(b, state, "--project", proj)
	d.stop(syscall.SIGTERM)
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		d := startDaemon(b, state)
		ds = append(ds, time.Since(start))
		b.StopTimer()
		d.stop(syscall.SIGTERM)
		b.StartTimer()
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, "max-ms")
}
