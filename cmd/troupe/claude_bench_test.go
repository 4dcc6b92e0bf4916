package main

import (
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine/claude/claudetest"
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
// The ratio of the two medians is the warm-turn gain (design.md §8).

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
