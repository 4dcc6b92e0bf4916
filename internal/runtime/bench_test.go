package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/fake"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/runtime"
	"github.com/troupe-dev/troupe/internal/store/sqlite"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestMain(m *testing.M) {
	fake.MaybeRunChild()
	os.Exit(m.Run())
}

type teams struct {
	dir    string
	agents []troupe.AgentSpec
}

func (t teams) Agent(k troupe.RuntimeKey) (troupe.AgentSpec, string, bool) {
	for _, a := range t.agents {
		if a.Name == k.Agent {
			return a, t.dir, true
		}
	}
	return troupe.AgentSpec{}, "", false
}
func (t teams) Agents(troupe.ProjectID) []troupe.AgentSpec { return t.agents }

// realRuntime runs a runtime on the SQLite store (fsync on) and fake-agent
// child processes: what the daemon runs, without HTTP.
func realRuntime(b *testing.B) (*runtime.Runtime, *events.Hub) {
	b.Helper()
	dir := b.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "troupe.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	hub := events.New(events.Options{})
	spec := func(n string) troupe.AgentSpec {
		return troupe.AgentSpec{Name: troupe.AgentID(n), Engine: troupe.EngineFake, Mode: troupe.ModeStructured, TurnTimeout: 10 * time.Minute}
	}
	rt := runtime.New(runtime.Options{Store: db.Inbox(), Journal: db.Journal(), Hub: hub, Teams: teams{dir: dir, agents: []troupe.AgentSpec{spec("lead"), spec("researcher")}},
		Engines: map[troupe.Engine]engine.Engine{troupe.EngineFake: fake.New(fake.Options{Command: fake.TestCommand()})}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done; db.Close() })
	return rt, hub
}

func report(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	q := func(f float64) float64 { return float64(ds[int(f*float64(len(ds)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// BenchmarkAskRoundTrip: lead asks researcher (a warm fake agent that
// echoes at once) through the runtime, as its ask_agent tool does. The
// agent's own work is ~0, so the time is troupe's overhead: request and
// message rows, turn start and end, answer capture — four fsync'd commits —
// plus one pipe round trip to the child.
func BenchmarkAskRoundTrip(b *testing.B) {
	rt, _ := realRuntime(b)
	ctx := context.Background()
	to := troupe.RuntimeKey{Project: "p", Agent: "researcher"}
	if _, err := rt.Ask(ctx, to, "lead", "warm up", 0); err != nil {
		b.Fatal(err)
	}
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		req, err := rt.Ask(ctx, to, "lead", "ping", 0)
		ds = append(ds, time.Since(start))
		if err != nil || req.Answer != "echo: ping" {
			b.Fatalf("ask = %+v, %v", req, err)
		}
	}
	report(b, ds)
}

// BenchmarkWakeLatency: a message appended to an idle agent's inbox (its
// message.queued event, published once the append committed) → the agent's
// turn started (turn.started, published once the turn is recorded, just
// before the input is written to the agent).
func BenchmarkWakeLatency(b *testing.B) {
	rt, hub := realRuntime(b)
	ctx := context.Background()
	to := troupe.RuntimeKey{Project: "p", Agent: "researcher"}
	if _, err := rt.Ask(ctx, to, "lead", "warm up", 0); err != nil {
		b.Fatal(err)
	}
	var ds []time.Duration
	for b.Loop() {
		_, sub, _ := hub.Subscribe(hub.Last())
		if _, err := rt.Send(ctx, to, "lead", troupe.KindMessage, "wake"); err != nil {
			b.Fatal(err)
		}
		var queued, started time.Time
		for ev := range sub.C() {
			switch ev.Type {
			case "message.queued":
				queued = ev.Time
			case "turn.started":
				started = ev.Time
			}
			if ev.Type == "turn.ended" {
				break
			}
		}
		sub.Close()
		ds = append(ds, started.Sub(queued))
	}
	report(b, ds)
}
