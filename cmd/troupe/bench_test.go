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

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
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

func rssKB(b testing.TB, pid int) int64 { return statusKB(b, pid, "VmRSS:") }

// BenchmarkTaskExitToOwnerTurn: a background task owned by an idle agent
// exits → the agent's turn with the completion has started. Measured from
// the task's end as its supervisor recorded it to the turn.started event
// (both stamped by this machine's clock), through the real daemon: pidfd
// wake-up, status file, one SQLite transaction, wake, turn start.
func BenchmarkTaskExitToOwnerTurn(b *testing.B) {
	state, proj := b.TempDir(), b.TempDir()
	writeTeam(b, proj, "[[agent]]\nname = \"lead\"\nengine = \"fake\"\n")
	d := startDaemon(b, state, "--project", proj)
	defer d.stop(syscall.SIGTERM)
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := cl.Ask(ctx, p.ID, "lead", "warm up", 0); err != nil {
		b.Fatal(err)
	}
	st, _ := cl.Status(ctx)
	turns := make(chan time.Time, 16)
	go cl.Events(ctx, st.LastEvent, nil, func(ev events.Event) error {
		if ev.Type == "turn.started" && ev.Agent == "lead" {
			turns <- ev.Time
		}
		return nil
	})
	var ds []time.Duration
	for b.Loop() {
		tk, err := cl.RunTask(ctx, p.ID, api.RunTaskRequest{Command: "true", Owner: "lead"})
		if err != nil {
			b.Fatal(err)
		}
		started := <-turns
		tk, err = cl.Task(ctx, p.ID, tk.ID)
		if err != nil || !tk.State.Final() {
			b.Fatalf("task after its completion turn: %+v %v", tk, err)
		}
		ds = append(ds, started.Sub(tk.EndedAt))
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
}
