package main

import (
	"context"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// BenchmarkCheckRun measures what a check run adds beyond its command's
// own time: `troupe check`'s request for a check whose command is `true`,
// from the POST to the result recorded and answered: the approved check
// looked up, the agent's workspace and sandbox, a supervisor started and
// its job run in the sandbox, the end read, the result written to SQLite
// and published. p50-ms and p99-ms are that round trip; daemon-ms is the
// part the daemon measured itself (the result's duration); command-ms is
// `sh -c true` started directly, the command's own time.
func BenchmarkCheckRun(b *testing.B) {
	state, proj := b.TempDir(), b.TempDir()
	writeTeam(b, proj, "[[agent]]\nname = \"dev\"\nengine = \"fake\"\n\n[checks]\nnoop = \"true\"\n")
	d := startDaemon(b, state, "--project", proj)
	defer d.stop(syscall.SIGTERM)
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		b.Fatal(err)
	}
	if r, err := cl.RunCheck(ctx, p.ID, "dev", "noop"); err != nil || r.State != troupe.CheckPassed {
		b.Fatalf("warm-up check: %+v, %v", r, err)
	}
	var ds, own []time.Duration
	for b.Loop() {
		start := time.Now()
		r, err := cl.RunCheck(ctx, p.ID, "dev", "noop")
		ds = append(ds, time.Since(start))
		if err != nil || r.State != troupe.CheckPassed {
			b.Fatalf("check: %+v, %v", r, err)
		}
		own = append(own, time.Duration(r.DurationMS)*time.Millisecond)
	}
	// The command's own time, for comparison: `sh -c true` started from
	// here, on the same machine at the same time.
	var sh []time.Duration
	for range len(ds) {
		start := time.Now()
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
		sh = append(sh, time.Since(start))
	}
	slices.Sort(ds)
	slices.Sort(own)
	slices.Sort(sh)
	b.ReportMetric(float64(sh[len(sh)/2].Microseconds())/1000, "command-ms")
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(own[len(own)/2].Microseconds())/1000, "daemon-ms")
}
