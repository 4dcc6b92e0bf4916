package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine/acp/opencodetest"
	"github.com/troupe-dev/troupe/internal/engine/claude/claudetest"
	"github.com/troupe-dev/troupe/internal/engine/codex/codextest"
	"github.com/troupe-dev/troupe/internal/fakemodel"
)

// The Claude benchmarks run the real pinned CLI against the fake model
// (which answers at once), side by side in one run:
//
//   - BenchmarkClaudeWarmTurn: `troupe ask` of a Claude agent whose session
//     is up: the person's ask over the API, the runtime, one stream-json
//     turn of the long-lived CLI process, its model request, the answer.
//   - BenchmarkClaudeProcessPerTurn: what a tool that starts a CLI per turn
//     pays: `claude -p … --output-format json` run to its end, same model.
//
// The ratio of the two medians is the warm-turn gain (docs/TARGETS.md).

func BenchmarkClaudeWarmTurn(b *testing.B) {
	r := newClaudeRig(b, "2m")
	r.answer("claude", "[[text:warm up]]")
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		if got := r.answer("claude", "[[text:pong]]"); got != "pong" {
			b.Fatalf("answer %q", got)
		}
		ds = append(ds, time.Since(start))
	}
	reportPercentiles(b, ds)
}

func BenchmarkClaudeProcessPerTurn(b *testing.B) {
	bin := claudetest.Bin(b)
	model := fakemodel.New(fakemodel.Options{})
	if err := model.Start(""); err != nil {
		b.Fatal(err)
	}
	defer model.Close()
	dir := b.TempDir()
	env := claudetest.Env(b, claudetest.Home(b, dir), model.URL())
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		cmd := exec.Command(bin, "-p", "[[text:pong]]", "--output-format", "json")
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("claude -p: %v: %s", err, out)
		}
		ds = append(ds, time.Since(start))
	}
	reportPercentiles(b, ds)
}

// BenchmarkClaudeAsksFakeAgent: a Claude agent asks a fake agent through
// troupe's MCP tool and gets the answer. Reported: the time from the model
// asking for the tool call to the model receiving its result, i.e. the
// CLI's MCP client, troupe's /mcp endpoint, the ask (its SQLite commits),
// the fake agent's turn (a child process) and back. Compare with
// internal/mcp BenchmarkMCPAskRoundTrip (the same ask from the go-sdk
// client, no CLI): the difference is the CLI's share.
func BenchmarkClaudeAsksFakeAgent(b *testing.B) {
	r := newClaudeRig(b, "2m")
	var mu sync.Mutex
	var toolAt time.Time
	var gaps []time.Duration
	r.model.SetScript(func(q fakemodel.Request) fakemodel.Reply {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case q.Side != "":
		case q.AfterTool:
			if !toolAt.IsZero() {
				gaps = append(gaps, time.Since(toolAt))
				toolAt = time.Time{}
			}
		default:
			toolAt = time.Now()
		}
		return fakemodel.DefaultScript(q)
	})
	const ask = `[[tool:mcp__troupe__ask_agent {"to":"helper","question":"ping"}]]`
	r.answer("claude", ask) // warm: the session and the helper are up
	mu.Lock()
	gaps = nil
	mu.Unlock()
	for b.Loop() {
		if got := r.answer("claude", ask); got != "TOOL_RESULT_SEEN: helper knows: ping" {
			b.Fatalf("answer %q", got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	reportPercentiles(b, gaps)
}

// reportPercentiles reports the median and the 95th percentile in ms.
func reportPercentiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*95/100].Microseconds())/1000, "p95-ms")
}

// The same comparison for Codex and OpenCode: a warm turn through troupe
// (`troupe ask` of an agent whose session is up) against a CLI process per
// turn (`codex exec`, `opencode run`), same fake model, side by side.

func benchWarmTurn(b *testing.B, eng, bin string) {
	r := newEngineRigTB(b, eng, bin, "2m")
	r.answer("x", "[[text:warm up]]")
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		if got := r.answer("x", "[[text:pong]]"); got != "pong" {
			b.Fatalf("answer %q", got)
		}
		ds = append(ds, time.Since(start))
	}
	reportPercentiles(b, ds)
}

func BenchmarkCodexWarmTurn(b *testing.B) { benchWarmTurn(b, "codex", codextest.Bin(b)) }

func BenchmarkOpenCodeWarmTurn(b *testing.B) { benchWarmTurn(b, "opencode", opencodetest.Bin(b)) }

// benchProcessPerTurn runs argv (its last element the prompt) to its end
// per iteration, in a project folder, with the CLIs' offline environment.
func benchProcessPerTurn(b *testing.B, argv []string) {
	model := fakemodel.New(fakemodel.Options{})
	if err := model.Start(""); err != nil {
		b.Fatal(err)
	}
	defer model.Close()
	dir := b.TempDir()
	env := mixedEnv(b, model.URL(), dir)
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v: %.500s", argv[0], err, out)
		}
		ds = append(ds, time.Since(start))
	}
	reportPercentiles(b, ds)
}

func BenchmarkCodexExecPerTurn(b *testing.B) {
	benchProcessPerTurn(b, []string{codextest.Bin(b), "exec", "--json", "--skip-git-repo-check", "--ephemeral", "[[text:pong]]"})
}

func BenchmarkOpenCodeRunPerTurn(b *testing.B) {
	benchProcessPerTurn(b, []string{opencodetest.Bin(b), "run", "--format", "json", "[[text:pong]]"})
}

// BenchmarkClaudeAsksCodex: the person asks a Claude agent, which asks a
// Codex agent through troupe's MCP tool; the model answers at once.
// Reported: the whole round trip as the person sees it (both CLIs' turns,
// the MCP call, troupe's ask).
func BenchmarkClaudeAsksCodex(b *testing.B) {
	bins := []string{claudetest.Bin(b), codextest.Bin(b), opencodetest.Bin(b)}
	model := fakemodel.New(fakemodel.Options{})
	if err := model.Start(""); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { model.Close() })
	r := &claudeRig{t: b, model: model, state: b.TempDir(), proj: filepath.Join(b.TempDir(), "app")}
	writeTeam(b, r.proj, fmt.Sprintf(mixedTeam, bins[0], bins[1], bins[2]))
	r.env = mixedEnv(b, model.URL(), r.proj)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	r.ctx = ctx
	r.start()
	b.Cleanup(func() {
		r.d.stop(syscall.SIGTERM)
		waitNoProcessIn(b, r.proj)
	})
	const ask = `[[tool:mcp__troupe__ask_agent {"to":"codex","question":"[[text:pong]]"}]]`
	r.answer("claude", ask) // both sessions up
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		if got := r.answer("claude", ask); !strings.HasSuffix(got, "pong") {
			b.Fatalf("answer %q", got)
		}
		ds = append(ds, time.Since(start))
	}
	reportPercentiles(b, ds)
}
