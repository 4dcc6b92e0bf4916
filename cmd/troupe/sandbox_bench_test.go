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
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// The sandbox's cost (issue 20, docs/TARGETS.md), with the mechanism this
// machine's Detect picks (TROUPE_SANDBOX=landlock forces the other).

// BenchmarkSandboxWarmTurn: a warm turn of a sandboxed agent and of the
// same agent with sandbox = false, in one daemon, asked in alternation
// (the order swapped every iteration) so that both see the same load.
// Each figure is the whole ask as `troupe ask` makes it: the Go client's
// HTTP request to the daemon, the runtime (the ask's three fsync'd SQLite
// commits: request, turn start, turn end with the answer), the turn, the
// answer back. The session is up (warmed by one ask first), so no process
// starts for the agent itself:
//
//   - engine=fake: the turn is a round trip over pipes to the fake agent's
//     process (troupe fake-agent, under bubblewrap a child of its bwrap
//     process, in its own pid namespace), which echoes the ask.
//   - engine=openai: the agent loop in the daemon, two streaming Chat
//     Completions requests over loopback to troupe's fake model (in the
//     benchmark's process), and between them one run_command (`echo pong`):
//     a new process, `sh -c` under the agent's sandbox (a bwrap process
//     and its child, or the Landlock helper that execs sh) or plain.
//     Its on−off difference is the sandbox's start cost per command.
//
// Reported per variant: p50 and p95 in ms (p50-on-ms, p50-off-ms ...);
// on/off is p50-on ÷ p50-off, on-off-ms their difference.
func BenchmarkSandboxWarmTurn(b *testing.B) {
	if r := sandbox.Detect(); r.Mechanism == sandbox.None {
		b.Skipf("no sandbox mechanism here: %s", r.Why)
	}
	model := fakemodel.New(fakemodel.Options{})
	if err := model.Start(""); err != nil {
		b.Fatal(err)
	}
	defer model.Close()
	for _, bc := range []struct {
		engine, agent, ask, want string
	}{
		{"fake", "[[agent]]\nname = %q\nengine = \"fake\"\nsandbox = %v\n", "ping", "echo: ping"},
		{"openai", "[[agent]]\nname = %q\nengine = \"openai\"\nmodel = \"fake-coder\"\npermission_mode = \"bypassPermissions\"\nsandbox = %v\n" +
			"[agent.openai]\nbase_url = \"" + model.URL() + "/v1\"\napi_key_env = \"TROUPE_TEST_OPENAI_KEY\"\n",
			`[[tool:run_command {"command":"echo pong"}]]`, "pong"},
	} {
		b.Run("engine="+bc.engine, func(b *testing.B) {
			state, proj := b.TempDir(), b.TempDir()
			writeTeam(b, proj, fmt.Sprintf(bc.agent, "on", true)+"\n"+fmt.Sprintf(bc.agent, "off", false))
			env := append(os.Environ(), "HOME="+b.TempDir(), "TROUPE_TEST_OPENAI_KEY="+openaiKey)
			d := startDaemonEnv(b, state, env, "--project", proj)
			defer d.stop(syscall.SIGTERM)
			cl, err := client.FromStateDir(state)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			p, err := cl.ResolveProject(ctx, proj)
			if err != nil {
				b.Fatal(err)
			}
			ask := func(agent troupe.AgentID) time.Duration {
				start := time.Now()
				req, err := cl.Ask(ctx, p.ID, agent, bc.ask, 0)
				took := time.Since(start)
				if err != nil || req.State != troupe.ReqAnswered || !strings.Contains(req.Answer, bc.want) {
					b.Fatalf("ask %s: %v %s %q %s", agent, err, req.State, req.Answer, req.Error)
				}
				return took
			}
			ask("on")
			ask("off")
			var on, off []time.Duration
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					on = append(on, ask("on"))
					off = append(off, ask("off"))
				} else {
					off = append(off, ask("off"))
					on = append(on, ask("on"))
				}
				i++
			}
			slices.Sort(on)
			slices.Sort(off)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			p50 := func(ds []time.Duration) time.Duration { return ds[len(ds)/2] }
			p95 := func(ds []time.Duration) time.Duration { return ds[len(ds)*95/100] }
			b.ReportMetric(ms(p50(on)), "p50-on-ms")
			b.ReportMetric(ms(p50(off)), "p50-off-ms")
			b.ReportMetric(ms(p95(on)), "p95-on-ms")
			b.ReportMetric(ms(p95(off)), "p95-off-ms")
			b.ReportMetric(float64(p50(on))/float64(p50(off)), "on/off")
			b.ReportMetric(ms(p50(on)-p50(off)), "on-off-ms")
		})
	}
}

// BenchmarkSandboxIdleMemory: N fake agents (in projects of 10: a team
// holds at most 64; --max-sessions N keeps them all live), each woken by
// one ask so its session is up, then idle; sandboxed (the default) or all
// with sandbox = false. Reported once the asks are answered: the processes
// troupe started for them (every descendant of the daemon: the fake
// agents, and when sandboxed the bubblewrap process around each; the
// Landlock helper execs the agent, so adds none), their summed RSS and PSS
// read from /proc/<pid>/smaps_rollup (PSS: each shared page divided among
// the processes sharing it, what they cost together), PSS per agent, and
// the daemon's own RSS (its children excluded); and how long the N asks
// took from idle (start-all-s: every session started, each agent's first
// turn) and the daemon's stop with them all up (stop-s). Two sizes, 10 and
// 100, so the growth shows; benchreport prints the ratios.
func BenchmarkSandboxIdleMemory(b *testing.B) {
	if r := sandbox.Detect(); r.Mechanism == sandbox.None {
		b.Skipf("no sandbox mechanism here: %s", r.Why)
	}
	for _, n := range []int{10, 100} {
		for _, on := range []bool{true, false} {
			b.Run(fmt.Sprintf("agents=%d/sandbox=%v", n, on), func(b *testing.B) {
				// A team holds at most project.MaxAgents: 10 agents per
				// project, in n/10 projects.
				const perProject = 10
				var team strings.Builder
				for i := range perProject {
					fmt.Fprintf(&team, "[[agent]]\nname = \"a%02d\"\nengine = \"fake\"\nsandbox = %v\n\n", i, on)
				}
				for b.Loop() {
					state := b.TempDir()
					args := []string{"--max-sessions", fmt.Sprint(n)} // all live at once (default 32)
					projs := make([]string, n/perProject)
					for i := range projs {
						projs[i] = b.TempDir()
						writeTeam(b, projs[i], team.String())
						args = append(args, "--project", projs[i])
					}
					d := startDaemon(b, state, args...)
					pid := d.cmd.Process.Pid
					cl, err := client.FromStateDir(state)
					if err != nil {
						b.Fatal(err)
					}
					ctx := context.Background()
					start := time.Now()
					var wg sync.WaitGroup
					for _, proj := range projs {
						p, err := cl.ResolveProject(ctx, proj)
						if err != nil {
							b.Fatal(err)
						}
						for i := range perProject {
							wg.Go(func() {
								agent := troupe.AgentID(fmt.Sprintf("a%02d", i))
								if req, err := cl.Ask(ctx, p.ID, agent, "hi", 0); err != nil || req.State != troupe.ReqAnswered {
									b.Errorf("ask %s: %v %s", agent, err, req.State)
								}
							})
						}
					}
					wg.Wait()
					woken := time.Since(start)
					if b.Failed() {
						b.FailNow()
					}
					m := descendantsMemory(b, pid)
					if got := len(fakeAgentProcs(b, pid)); got != n {
						b.Fatalf("%d fake agent processes up, want %d", got, n)
					}
					b.ReportMetric(float64(m.procs), "procs")
					b.ReportMetric(float64(m.rssKB)/1024, "children-rss-MB")
					b.ReportMetric(float64(m.pssKB)/1024, "children-pss-MB")
					b.ReportMetric(float64(m.pssKB)/1024/float64(n), "pss-MB/agent")
					b.ReportMetric(float64(rssKB(b, pid))/1024, "daemon-rss-MB")
					b.ReportMetric(woken.Seconds(), "start-all-s")
					start = time.Now()
					d.stop(syscall.SIGTERM)
					b.ReportMetric(time.Since(start).Seconds(), "stop-s")
				}
			})
		}
	}
}
