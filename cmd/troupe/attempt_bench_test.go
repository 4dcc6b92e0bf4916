package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// BenchmarkAttemptThree measures an attempt of three agents end to end on
// the fake engine: the attempt demo's fixer, breaker and idle (each
// writes add.sh with one shell command, or nothing), from the POST that
// starts it — the project's HEAD read, three worktrees brought to it, three
// delegations — to its attempt.changed event saying it is done: three
// turns, three checks (`sh test.sh`, sandboxed), three diff counts, the
// ranking saved. p50-ms and p99-ms are that; start-ms is the POST's own
// answer (the worktrees prepared and the tasks given). Between iterations
// the worktrees are reset (not counted).
func BenchmarkAttemptThree(b *testing.B) {
	proj := attemptDemo(b, "")
	state := b.TempDir()
	d := startDaemon(b, state, "--project", proj)
	defer d.stop(syscall.SIGTERM)
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		b.Fatal(err)
	}
	agents := []troupe.AgentID{"fixer", "breaker", "idle"}
	one := func() (total, start time.Duration) {
		st, err := cl.Status(ctx)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		a, err := cl.StartAttempt(ctx, p.ID, api.AttemptRequest{Task: "make sh test.sh pass", Agents: agents})
		start = time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		_, err = cl.Events(ctx, st.LastEvent, nil, func(ev events.Event) error {
			if ev.Type != events.TypeAttemptChanged {
				return nil
			}
			var c events.AttemptChanged
			if json.Unmarshal(ev.Data, &c) == nil && c.ID == int64(a.ID) && c.State == "done" {
				if c.Winner != "fixer" {
					b.Fatalf("attempt %d won by %q, want fixer", a.ID, c.Winner)
				}
				return errStop
			}
			return nil
		})
		total = time.Since(t0)
		if !errors.Is(err, errStop) {
			b.Fatalf("waiting for attempt %d: %v", a.ID, err)
		}
		for _, ag := range agents {
			if err := cl.ResetWorktree(ctx, p.ID, ag); err != nil {
				b.Fatal(err)
			}
		}
		return total, start
	}
	one() // warm-up: the worktrees made, the sessions started
	var totals, starts []time.Duration
	for b.Loop() {
		total, start := one()
		totals, starts = append(totals, total), append(starts, start)
	}
	slices.Sort(totals)
	slices.Sort(starts)
	b.ReportMetric(float64(totals[len(totals)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(totals[len(totals)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(starts[len(starts)/2].Microseconds())/1000, "start-ms")
}
