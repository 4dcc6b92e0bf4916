package runtime_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/fake"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/runtime"
	"github.com/troupe-dev/troupe/internal/store/sqlite"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// BenchmarkSessionStart: a runtime (SQLite, fsync on) with N fake agents,
// none started; each is asked a question at once, concurrently, which
// starts its session (a child process) and its first turn. Timed: from the
// asks until every agent has answered and is idle. Run at two sizes (10 and
// 100 agents); the work grows with N, so the ratio big/small should stay
// near 10× (linear), and ms/agent flat. cpu-ms/agent is the CPU of this
// process and of the agents' processes from the asks until they were
// stopped: what starting a session costs the machine.
func BenchmarkSessionStart(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			var total, cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				rt, stop := startRuntime(b, n)
				cpu0 := cpuTime()
				b.StartTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						to := troupe.RuntimeKey{Project: "p", Agent: troupe.AgentID(fmt.Sprintf("a%03d", i))}
						if req, err := rt.Ask(context.Background(), to, "lead", "hi", 0); err != nil || req.Answer != "echo: hi" {
							b.Errorf("ask %s = %+v, %v", to.Agent, req, err)
						}
						for {
							if st, _ := rt.AgentState(to); st == troupe.StateIdle {
								return
							}
							time.Sleep(100 * time.Microsecond)
						}
					})
				}
				wg.Wait()
				total += time.Since(start)
				b.StopTimer()
				stop()
				cpu += cpuTime() - cpu0
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/start-all")
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N*n), "ms/agent")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N*n), "cpu-ms/agent")
		})
	}
}

// cpuTime is the CPU (user+system) used by this process and its children
// that have been waited for.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
}

// startRuntime runs a runtime with n fake agents a000… on a fresh SQLite
// store; stop ends it and its agents' processes.
func startRuntime(b *testing.B, n int) (*runtime.Runtime, func()) {
	dir := b.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "troupe.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	agents := []troupe.AgentSpec{{Name: "lead", Engine: troupe.EngineFake, Mode: troupe.ModeStructured, TurnTimeout: 10 * time.Minute}}
	for i := range n {
		agents = append(agents, troupe.AgentSpec{Name: troupe.AgentID(fmt.Sprintf("a%03d", i)), Engine: troupe.EngineFake,
			Mode: troupe.ModeStructured, TurnTimeout: 10 * time.Minute})
	}
	rt := runtime.New(runtime.Options{Store: db.Inbox(), Journal: db.Journal(), Hub: events.New(events.Options{}), Teams: teams{dir: dir, agents: agents},
		Engines: map[troupe.Engine]engine.Engine{troupe.EngineFake: fake.New(fake.Options{Command: fake.TestCommand()})}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	return rt, func() { cancel(); <-done; db.Close() }
}
