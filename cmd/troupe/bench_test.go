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

// BenchmarkIdleAgentsThreadsAndMemory: a daemon with N fake agents, each
// woken once by an ask so its session (a child process) is up, then left
// idle for 30 s. Reported, at the end of the 30 s: the daemon's CPU use
// (percent of one core), its OS threads and its RSS (its children
// excluded), and its children: how many, their summed RSS and their summed
// PSS (the RSS with each shared page divided among the processes sharing
// it: what they cost together). woken-children-pss-MB is the children's
// PSS right after the asks. With the default idle_timeout (30 min) the
// sessions stay up: the daemon's threads must stay flat in N (no thread
// per child) and the children's memory grows linearly. With idle_timeout
// = "2s" they are stopped during the 30 s: children and their memory go.
func BenchmarkIdleAgentsThreadsAndMemory(b *testing.B) {
	for _, bc := range []struct {
		agents int
		idle   string // the agents' idle_timeout; "" the default
	}{{50, ""}, {200, ""}, {200, "2s"}} {
		name := fmt.Sprintf("agents=%d", bc.agents)
		if bc.idle != "" {
			name += "/idle_timeout=" + bc.idle
		}
		b.Run(name, func(b *testing.B) {
			// A team holds at most 64 agents: the agents are spread over
			// projects of 50, and the daemon keeps them all live
			// (--max-sessions).
			const perProject = 50
			teams := make([]strings.Builder, (bc.agents+perProject-1)/perProject)
			for i := range bc.agents {
				team := &teams[i/perProject]
				fmt.Fprintf(team, "[[agent]]\nname = \"a%03d\"\nengine = \"fake\"\n", i)
				if bc.idle != "" {
					fmt.Fprintf(team, "idle_timeout = %q\n", bc.idle)
				}
				team.WriteString("\n")
			}
			for b.Loop() {
				state := b.TempDir()
				args := []string{"--max-sessions", fmt.Sprint(bc.agents)}
				var projs []string
				for i := range teams {
					proj := b.TempDir()
					writeTeam(b, proj, teams[i].String())
					projs = append(projs, proj)
					args = append(args, "--project", proj)
				}
				d := startDaemon(b, state, args...)
				pid := d.cmd.Process.Pid
				cl, err := client.FromStateDir(state)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				var ids []troupe.ProjectID
				for _, proj := range projs {
					p, err := cl.ResolveProject(ctx, proj)
					if err != nil {
						b.Fatal(err)
					}
					ids = append(ids, p.ID)
				}
				var wg sync.WaitGroup
				for i := range bc.agents {
					wg.Go(func() {
						req, err := cl.Ask(ctx, ids[i/perProject], troupe.AgentID(fmt.Sprintf("a%03d", i)), "hi", 0)
						if err != nil || req.State != troupe.ReqAnswered {
							b.Errorf("ask a%03d: %+v %v", i, req, err)
						}
					})
				}
				wg.Wait()
				woken := descendantsMemory(b, pid)
				cpu0 := cpuTicks(b, pid)
				<-time.After(30 * time.Second)
				cpu1 := cpuTicks(b, pid)
				idle := descendantsMemory(b, pid)
				b.ReportMetric(float64(cpu1-cpu0)/100/30*100, "cpu-%")
				b.ReportMetric(float64(statusField(b, pid, "Threads:")), "daemon-threads")
				b.ReportMetric(float64(statusField(b, pid, "VmRSS:"))/1024, "daemon-rss-MB")
				b.ReportMetric(float64(idle.procs), "children")
				b.ReportMetric(float64(idle.rssKB)/1024, "children-rss-MB")
				b.ReportMetric(float64(idle.pssKB)/1024, "children-pss-MB")
				b.ReportMetric(float64(woken.procs), "woken-children")
				b.ReportMetric(float64(woken.pssKB)/1024, "woken-children-pss-MB")
				d.stop(syscall.SIGTERM)
			}
		})
	}
}

// memory is what a set of processes holds.
type memory struct {
	procs        int
	rssKB, pssKB int64
}

// descendantsMemory sums the RSS and PSS (/proc/<pid>/smaps_rollup) of
// every descendant of pid.
func descendantsMemory(b testing.TB, pid int) memory {
	var m memory
	for _, kid := range children(b, pid) {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", kid))
		if err != nil {
			continue // gone meanwhile
		}
		m.procs++
		for line := range strings.SplitSeq(string(raw), "\n") {
			var kb int64
			if v, ok := strings.CutPrefix(line, "Rss:"); ok {
				fmt.Sscan(strings.TrimSpace(v), &kb)
				m.rssKB += kb
			} else if v, ok := strings.CutPrefix(line, "Pss:"); ok {
				fmt.Sscan(strings.TrimSpace(v), &kb)
				m.pssKB += kb
			}
		}
		sub := descendantsMemory(b, kid)
		m.procs += sub.procs
		m.rssKB += sub.rssKB
		m.pssKB += sub.pssKB
	}
	return m
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

func rssKB(b testing.TB, pid int) int64 { return statusField(b, pid, "VmRSS:") }

// statusField is the number after key (like "VmRSS:", in kB, or
// "Threads:") in /proc/<pid>/status.
func statusField(b testing.TB, pid int, key string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			var n int64
			fmt.Sscan(strings.TrimSpace(v), &n)
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

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
