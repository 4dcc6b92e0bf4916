package fake

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// BenchmarkEchoTurnSandbox is BenchmarkEchoTurn for a fake agent in its
// sandbox (bubblewrap: the agent's process is pid 1 of its own pid
// namespace, a child of its bwrap process) and one out of it, turns sent
// in alternation (the order swapped each time): Send → TurnEnd, the pipe
// round trip to the agent's process and its echo, no daemon, no store.
// Reported: p50 and p95 of each in µs, and on/off (p50 ÷ p50).
func BenchmarkEchoTurnSandbox(b *testing.B) {
	if r := sandbox.Detect(); r.Mechanism != sandbox.Bubblewrap {
		b.Skipf("no bubblewrap here (this test binary is no Landlock helper): %s", r.Why)
	}
	ws := b.TempDir()
	p := sandbox.Build(sandbox.Inputs{Workspace: ws, Project: ws, StateDir: b.TempDir(), Home: b.TempDir(),
		Temp: b.TempDir(), Default: true})
	if !p.On {
		b.Fatal("the policy is off")
	}
	on := startAgent(b, Options{}, engine.StartSpec{Dir: ws, Sandbox: p,
		Key: troupe.RuntimeKey{Project: "p1", Agent: "on"}})
	off := startAgent(b, Options{}, engine.StartSpec{Key: troupe.RuntimeKey{Project: "p1", Agent: "off"}})
	in := engine.Input{Turn: "t", Messages: []troupe.Message{msg("hello")}}
	ctx := context.Background()
	one := func(s *Session) time.Duration {
		t0 := time.Now()
		if err := s.Send(ctx, in); err != nil {
			b.Fatal(err)
		}
		for ev := range s.Events() {
			if ev.Kind == engine.EventTurnEnd {
				break
			}
		}
		return time.Since(t0)
	}
	one(on)
	one(off)
	var lon, loff []time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			lon = append(lon, one(on))
			loff = append(loff, one(off))
		} else {
			loff = append(loff, one(off))
			lon = append(lon, one(on))
		}
		i++
	}
	slices.Sort(lon)
	slices.Sort(loff)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	b.ReportMetric(us(lon[len(lon)/2]), "p50-on-us")
	b.ReportMetric(us(loff[len(loff)/2]), "p50-off-us")
	b.ReportMetric(us(lon[len(lon)*95/100]), "p95-on-us")
	b.ReportMetric(us(loff[len(loff)*95/100]), "p95-off-us")
	b.ReportMetric(float64(lon[len(lon)/2])/float64(loff[len(loff)/2]), "on/off")
}
