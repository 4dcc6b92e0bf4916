package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// The cost of running an agent on a runner (issue 24, docs/TARGETS.md):
// a daemon started with --runners on loopback and one `troupe runner`
// process with its own HOME and root (startRunner), the fake engine on
// both sides, nothing shared but the bus. Each benchmark measures the
// same work on a local agent beside it, in the same daemon or with the
// same method, so both see the same load of the shared machine.

// runnerDaemon starts a daemon serving projs with the runners' bus on
// 127.0.0.1 and runner r1 with extra arguments, once it is connected; it
// returns the daemon, the runner, the daemon's client and the projects.
func runnerDaemon(b *testing.B, daemonArgs, runnerArgs []string, projs ...string) (*daemon, *runnerProc, *client.Client, []api.Project) {
	b.Helper()
	state := b.TempDir()
	args := append([]string{"--runners", "127.0.0.1:0"}, daemonArgs...)
	for _, p := range projs {
		args = append(args, "--project", p)
	}
	d := startDaemon(b, state, args...)
	r := startRunner(b, state, "r1", filepath.Join(b.TempDir(), "r1.creds"), runnerArgs...)
	cl, err := client.FromStateDir(state)
	if err != nil {
		b.Fatal(err)
	}
	var ps []api.Project
	for _, proj := range projs {
		p, err := cl.ResolveProject(context.Background(), proj)
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, p)
	}
	return d, r, cl, ps
}

// stopRunnerDaemon stops the runner, then the daemon (the benchmark's
// cleanup would SIGKILL them; a loop of several runs stops each set).
func stopRunnerDaemon(d *daemon, r *runnerProc) {
	stopRunner(r)
	d.stop(syscall.SIGTERM)
}

// stopRunner stops r: SIGTERM, then SIGKILL to its group after 10 s.
func stopRunner(r *runnerProc) {
	syscall.Kill(r.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
	}
}

// runnerAskTeam: local and remote are the same fake agent, one in the
// daemon and one on runner r1. An agent on a runner always works in a
// worktree (of the runner's clone, its files brought back to the daemon's
// worktree of it after each turn), so the local one has a worktree too:
// both pay a turn's checkpoints (C18) on the daemon's side.
const runnerAskTeam = `
[[agent]]
name = "local"
engine = "fake"
workspace = "worktree"

[[agent]]
name = "remote"
engine = "fake"
runner = "r1"
`

// BenchmarkRunnerAsk: the extra cost of an ask to an agent on a runner
// over the same ask to a local agent. Both agents are warm (their session
// was started by one ask first) and are asked in alternation (the order
// swapped every iteration), a trivial message each ("ping", answered
// "echo: ping"). Each figure is the whole ask as `troupe ask` makes it:
//
//   - both: the Go client's HTTP request to the daemon and its answer; the
//     runtime with the ask's fsync'd SQLite commits (request, turn start,
//     turn end with the answer); the turn's checkpoints on the daemon's
//     worktree of the agent (git processes at its start and end);
//   - local: the turn is a pipe round trip to the fake agent's process,
//     a child of the daemon;
//   - remote, in addition: the turn's request daemon → runner over NATS
//     (TCP loopback) and its reply; on the runner, its engine's pipe round
//     trip to its own fake agent process; the turn's events and its end,
//     each a durable publish runner → the daemon's JetStream stream (file
//     store, fsync'd per record) acknowledged on the runner's inbox, then
//     consumed by the daemon and acknowledged; the turn's files as a
//     snapshot from the runner's worktree applied to the daemon's.
//
// Reported: p50 and p99 in ms of each (p50-local-ms, p99-remote-ms ...),
// the difference of the p50s and of the p99s (remote-local-ms,
// remote-local-p99-ms) and the ratio of the p50s (remote/local). A warm
// turn alone is reported too, from the daemon's own events: turn.started
// (after the ask's commits and the start's checkpoint) → turn.ended
// (after the turn's end was committed and its checkpoint made), stamped
// by the daemon's clock: turn-p50-local-ms, turn-p50-remote-ms and their
// difference turn-remote-local-ms. A remote turn runs ~22 git processes
// more than a local one (BENCHMARKS.md, "Issue 24"): git-p50-ms is the p50
// of one git process started from the benchmark once an iteration, and
// extra/git is remote-local-ms in those units.
func BenchmarkRunnerAsk(b *testing.B) {
	proj := gitProject(b, runnerAskTeam)
	d, r, cl, ps := runnerDaemon(b, nil, nil, proj)
	defer stopRunnerDaemon(d, r)
	p := ps[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ask := func(agent troupe.AgentID) time.Duration {
		start := time.Now()
		req, err := cl.Ask(ctx, p.ID, agent, "ping", 0)
		took := time.Since(start)
		if err != nil || req.State != troupe.ReqAnswered || !strings.Contains(req.Answer, "echo: ping") {
			b.Fatalf("ask %s: %v %s %q %s\nrunner:\n%s", agent, err, req.State, req.Answer, req.Error, r.logs.String())
		}
		return took
	}
	ask("local")
	ask("remote")

	// Each agent's turn events, in order; read after each ask.
	type mark struct {
		typ events.Type
		at  time.Time
	}
	marks := map[troupe.AgentID]chan mark{"local": make(chan mark, 8), "remote": make(chan mark, 8)}
	st, err := cl.Status(ctx)
	if err != nil {
		b.Fatal(err)
	}
	go cl.Events(ctx, st.LastEvent, nil, func(ev events.Event) error {
		if c := marks[ev.Agent]; c != nil && ev.Project == p.ID && (ev.Type == events.TypeTurnStarted || ev.Type == events.TypeTurnEnded) {
			c <- mark{ev.Type, ev.Time}
		}
		return nil
	})
	turn := func(agent troupe.AgentID) time.Duration {
		var started time.Time
		for {
			select {
			case m := <-marks[agent]:
				if m.typ == events.TypeTurnStarted {
					started = m.at
				} else if !started.IsZero() {
					return m.at.Sub(started)
				}
			case <-time.After(30 * time.Second):
				b.Fatalf("no turn.started and turn.ended of %s after its ask", agent)
			}
		}
	}
	// A yardstick at the same moments: one git process started from here
	// in the project (`git rev-parse HEAD`), as the turns' checkpoints and
	// the snapshot's transfer start theirs.
	var gits []time.Duration
	gitOnce := func() {
		start := time.Now()
		cmd := exec.Command("git", "rev-parse", "HEAD")
		cmd.Dir = proj
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git rev-parse: %v\n%s", err, out)
		}
		gits = append(gits, time.Since(start))
	}
	var local, remote, localTurn, remoteTurn []time.Duration
	measure := func(agent troupe.AgentID) {
		took := ask(agent)
		t := turn(agent)
		if agent == "local" {
			local, localTurn = append(local, took), append(localTurn, t)
		} else {
			remote, remoteTurn = append(remote, took), append(remoteTurn, t)
		}
	}
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			measure("local")
			measure("remote")
		} else {
			measure("remote")
			measure("local")
		}
		gitOnce()
		i++
	}
	for _, ds := range [][]time.Duration{local, remote, localTurn, remoteTurn, gits} {
		slices.Sort(ds)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p50 := func(ds []time.Duration) time.Duration { return ds[len(ds)/2] }
	p99 := func(ds []time.Duration) time.Duration { return ds[len(ds)*99/100] }
	b.ReportMetric(ms(p50(local)), "p50-local-ms")
	b.ReportMetric(ms(p99(local)), "p99-local-ms")
	b.ReportMetric(ms(p50(remote)), "p50-remote-ms")
	b.ReportMetric(ms(p99(remote)), "p99-remote-ms")
	b.ReportMetric(ms(p50(remote)-p50(local)), "remote-local-ms")
	b.ReportMetric(ms(p99(remote)-p99(local)), "remote-local-p99-ms")
	b.ReportMetric(float64(p50(remote))/float64(p50(local)), "remote/local")
	b.ReportMetric(ms(p50(localTurn)), "turn-p50-local-ms")
	b.ReportMetric(ms(p50(remoteTurn)), "turn-p50-remote-ms")
	b.ReportMetric(ms(p50(remoteTurn)-p50(localTurn)), "turn-remote-local-ms")
	b.ReportMetric(ms(p50(gits)), "git-p50-ms")
	b.ReportMetric(float64(p50(remote)-p50(local))/float64(p50(gits)), "extra/git")
}

// BenchmarkRunnerQueueDrain: BenchmarkQueueDrain's 10,000 messages (~1 KB
// each, sent through the API by 32 senders while dev is busy in a silent
// turn, then that turn interrupted) for a dev on runner r1 and, in
// another daemon with the same bus, for a local dev in a worktree; the
// time from the interrupt until the newest message's turn ended, in turns
// of at most 100 messages. For the remote dev each turn's messages cross
// to the runner in its send request and its events and end come back
// through the runner's stream (see BenchmarkRunnerAsk). Reported as in
// BenchmarkQueueDrain: drain-s, msg/s, fill-s, the daemon's peak RSS
// while draining and its RSS once queued; for the remote dev also the
// runner's RSS at the end (runner-rss-MB) and its peak (runner-peak-rss-MB);
// turns is how many turns delivered the n (every one must end delivered).
func BenchmarkRunnerQueueDrain(b *testing.B) {
	const n = 10000
	for _, where := range []string{"local", "runner"} {
		b.Run(fmt.Sprintf("%d/where=%s", n, where), func(b *testing.B) {
			team := floodTeam + "workspace = \"worktree\"\n"
			if where == "runner" {
				team = floodTeam + "runner = \"r1\"\n"
			}
			var drain, fill time.Duration
			var peak, before, runnerRSS, runnerPeak, turns int64
			runs := 0
			for b.Loop() {
				b.StopTimer()
				proj := gitProject(b, team)
				d, r, cl, ps := runnerDaemon(b, nil, nil, proj)
				if where == "runner" {
					// The session up first: dev's clone and worktree are
					// made on its first turn, not measured here.
					if req, err := cl.Ask(context.Background(), ps[0].ID, "dev", "hi", 0); err != nil || req.State != troupe.ReqAnswered {
						b.Fatalf("warm dev: %+v %v\nrunner:\n%s", req, err, r.logs.String())
					}
				}
				f := fillFlood(b, d, d.state, proj, n)
				if where == "runner" {
					_ = writeClearRefs(r.cmd.Process.Pid)
				}
				b.StartTimer()
				took, kb := f.drain(b, 30*time.Minute)
				b.StopTimer()
				turns += countTurns(b, f)
				if where == "runner" {
					runnerRSS = max(runnerRSS, rssKB(b, r.cmd.Process.Pid))
					runnerPeak = max(runnerPeak, statusField(b, r.cmd.Process.Pid, "VmHWM:"))
				}
				drain, fill, peak, before = drain+took, fill+f.fill, max(peak, kb), max(before, f.rssKB)
				runs++
				stopRunnerDaemon(d, r)
				b.StartTimer()
			}
			b.ReportMetric(drain.Seconds()/float64(runs), "drain-s")
			b.ReportMetric(float64(n)*float64(runs)/drain.Seconds(), "msg/s")
			b.ReportMetric(fill.Seconds()/float64(runs), "fill-s")
			b.ReportMetric(float64(peak)/1024, "peak-rss-MB")
			b.ReportMetric(float64(before)/1024, "queued-rss-MB")
			b.ReportMetric(float64(turns)/float64(runs), "turns")
			if where == "runner" {
				b.ReportMetric(float64(runnerRSS)/1024, "runner-rss-MB")
				b.ReportMetric(float64(runnerPeak)/1024, "runner-peak-rss-MB")
			}
		})
	}
}

// writeClearRefs resets pid's peak RSS (VmHWM) to its current RSS
// (Linux 4.0+).
func writeClearRefs(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// BenchmarkRunnerIdleAgents: N fake agents on R runners (r1…rR, each a
// process with its own HOME and root; in projects of 20 agents, git
// repositories, agent i of a project on runner i mod R; --max-sessions
// and --max-agents N so all are live), each woken by one ask so its
// session is up on its runner, then left idle for 10 s. Sizes: 20 and 100
// agents on one runner (agents=N), and on 4 runners (agents=N,runners=4),
// so the growth shows either way. Reported: the daemon's RSS and OS
// threads (its children excluded), its CPU during the 10 s idle (percent
// of one core: the heartbeats) and its children (none expected: the agents
// run on the runners); each runner's RSS and threads (their children
// excluded) and idle CPU, as the largest of the runners (runner-rss-MB,
// runner-threads, runner-cpu-%) and summed over them (runners-rss-MB);
// the runners' children (the fake agents and the sandbox's processes
// around them) and their summed PSS; how long the N first asks took
// (start-all-s: each runner's clone of each project, a worktree and a
// session per agent, each one's first turn; one project's agents one
// after another, the projects at once).
func BenchmarkRunnerIdleAgents(b *testing.B) {
	const perProject = 20
	for _, c := range []struct{ n, runners int }{{20, 1}, {100, 1}, {20, 4}, {100, 4}} {
		n := c.n
		name := fmt.Sprintf("agents=%d", n)
		if c.runners > 1 {
			name += fmt.Sprintf(",runners=%d", c.runners)
		}
		b.Run(name, func(b *testing.B) {
			var team strings.Builder
			for i := range perProject {
				fmt.Fprintf(&team, "[[agent]]\nname = \"a%02d\"\nengine = \"fake\"\nrunner = \"r%d\"\n\n", i, i%c.runners+1)
			}
			for b.Loop() {
				projs := make([]string, n/perProject)
				for i := range projs {
					projs[i] = gitProject(b, team.String())
				}
				d, r, cl, ps := runnerDaemon(b, []string{"--max-sessions", fmt.Sprint(n)}, []string{"--max-agents", fmt.Sprint(n)}, projs...)
				rs := []*runnerProc{r}
				for i := 2; i <= c.runners; i++ {
					name := fmt.Sprintf("r%d", i)
					rs = append(rs, startRunner(b, d.state, name, filepath.Join(b.TempDir(), name+".creds"), "--max-agents", fmt.Sprint(n)))
				}
				dpid := d.cmd.Process.Pid
				ctx := context.Background()
				start := time.Now()
				var wg sync.WaitGroup
				// One project's agents one after another: concurrent first
				// turns in one repository race in `git worktree add` (see
				// BENCHMARKS.md); projects at once.
				for _, p := range ps {
					wg.Go(func() {
						for i := range perProject {
							agent := troupe.AgentID(fmt.Sprintf("a%02d", i))
							if req, err := cl.Ask(ctx, p.ID, agent, "hi", 0); err != nil || req.State != troupe.ReqAnswered {
								b.Errorf("ask %s: %v %s %s", agent, err, req.State, req.Error)
							}
						}
					})
				}
				wg.Wait()
				woken := time.Since(start)
				if b.Failed() {
					for _, r := range rs {
						b.Logf("runner:\n%s", tail(r.logs.String(), 4000))
					}
					b.FailNow()
				}
				agents := 0
				for _, r := range rs {
					agents += len(fakeAgentProcs(b, r.cmd.Process.Pid))
				}
				if agents != n {
					b.Fatalf("%d fake agent processes up on the runners, want %d", agents, n)
				}
				rcpu0 := make([]int64, len(rs))
				for i, r := range rs {
					rcpu0[i] = cpuTicks(b, r.cmd.Process.Pid)
				}
				dcpu0 := cpuTicks(b, dpid)
				<-time.After(10 * time.Second)
				dcpu1 := cpuTicks(b, dpid)
				var rssMax, rssSum, threadsMax, cpuMax, pssSum, kids int64
				for i, r := range rs {
					rpid := r.cmd.Process.Pid
					cpu := cpuTicks(b, rpid) - rcpu0[i]
					rss := int64(rssKB(b, rpid))
					rm := descendantsMemory(b, rpid)
					rssMax, rssSum = max(rssMax, rss), rssSum+rss
					threadsMax, cpuMax = max(threadsMax, int64(statusField(b, rpid, "Threads:"))), max(cpuMax, cpu)
					pssSum, kids = pssSum+int64(rm.pssKB), kids+int64(rm.procs)
				}
				dm := descendantsMemory(b, dpid)
				b.ReportMetric(float64(rssKB(b, dpid))/1024, "daemon-rss-MB")
				b.ReportMetric(float64(statusField(b, dpid, "Threads:")), "daemon-threads")
				b.ReportMetric(float64(dcpu1-dcpu0)/10, "daemon-cpu-%")
				b.ReportMetric(float64(dm.procs), "daemon-children")
				b.ReportMetric(float64(rssMax)/1024, "runner-rss-MB")
				b.ReportMetric(float64(rssSum)/1024, "runners-rss-MB")
				b.ReportMetric(float64(threadsMax), "runner-threads")
				b.ReportMetric(float64(cpuMax)/10, "runner-cpu-%")
				b.ReportMetric(float64(kids), "runner-children")
				b.ReportMetric(float64(pssSum)/1024, "runner-children-pss-MB")
				b.ReportMetric(woken.Seconds(), "start-all-s")
				for _, r := range rs[1:] {
					stopRunner(r)
				}
				stopRunnerDaemon(d, r)
			}
		})
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// countTurns is how many turns delivered f's messages to dev; it fails
// the benchmark when one of them did not end delivered.
func countTurns(b *testing.B, f *flood) int64 {
	b.Helper()
	ctx := context.Background()
	turns := map[troupe.TurnID]bool{}
	after := f.first.ID
	for {
		ms, err := f.cl.Messages(ctx, f.p, "dev", after, api.MaxMessages)
		if err != nil {
			b.Fatal(err)
		}
		if len(ms) == 0 {
			return int64(len(turns))
		}
		for _, m := range ms {
			after = m.ID
			if m.From == "dev" || m.ID == f.first.ID {
				continue
			}
			if m.State != troupe.MsgDelivered {
				b.Fatalf("message %d ended %s (%s), want delivered", m.ID, m.State, m.Reason)
			}
			turns[m.Turn] = true
		}
	}
}
