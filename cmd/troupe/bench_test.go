package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
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

// BenchmarkIdleAgents: a daemon with 100 fake agents, each woken once so its
// session (a child process) is up, then left idle for 30 s. Reported: the
// daemon's own CPU use over those 30 s (percent of one core) and its RSS
// (its children excluded).
func BenchmarkIdleAgents(b *testing.B) {
	var team strings.Builder
	for i := range 100 {
		fmt.Fprintf(&team, "[[agent]]\nname = \"a%03d\"\nengine = \"fake\"\n\n", i)
	}
	for b.Loop() {
		state, proj := b.TempDir(), b.TempDir()
		writeTeam(b, proj, team.String())
		d := startDaemon(b, state, "--project", proj)
		cl, err := client.FromStateDir(state)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		p, err := cl.ResolveProject(ctx, proj)
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Go(func() {
				if _, err := cl.Ask(ctx, p.ID, troupe.AgentID(fmt.Sprintf("a%03d", i)), "hi", 0); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		cpu0 := cpuTicks(b, d.cmd.Process.Pid)
		<-time.After(30 * time.Second)
		cpu1 := cpuTicks(b, d.cmd.Process.Pid)
		b.ReportMetric(float64(cpu1-cpu0)/100/30*100, "cpu-%")
		b.ReportMetric(float64(rssKB(b, d.cmd.Process.Pid))/1024, "rss-MB")
		d.stop(syscall.SIGTERM)
	}
}

// cpuTicks is utime+stime of pid in clock ticks (1/100 s).
func cpuTicks(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	var u, s int64
	fmt.Sscan(f[11], &u) // field 14 of the whole line
	fmt.Sscan(f[12], &s) // field 15
	return u + s
}

func rssKB(b testing.TB, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(v), &kb)
			return kb
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
