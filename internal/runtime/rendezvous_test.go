package runtime

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
)

const p1 troupe.ProjectID = "p1"

func key(p troupe.ProjectID, a string) troupe.RuntimeKey {
	return troupe.RuntimeKey{Project: p, Agent: troupe.AgentID(a)}
}

// harness runs a Runtime on the memory store and engine inside a bubble.
type harness struct {
	rt      *Runtime
	store   *inbox.MemStore
	journal *journal.MemStore
	eng     *memEngine
	stop    func()
}

func newHarness(t *testing.T, teams staticTeams, ceiling time.Duration) *harness {
	t.Helper()
	return newHarnessOn(t, teams, Options{Ceiling: ceiling})
}

// newHarnessOn is newHarness with o's Store (default a new MemStore),
// Sessions and Ceiling; the memEngine serves the fake engine and
// engineOther.
func newHarnessOn(t *testing.T, teams staticTeams, o Options) *harness {
	t.Helper()
	if o.Store == nil {
		o.Store = inbox.NewMemStore()
	}
	store, ok := o.Store.(*inbox.MemStore)
	if w, wrapped := o.Store.(*startTurnFails); wrapped {
		store, ok = w.MemStore, true
	}
	if !ok {
		t.Fatalf("the harness runs on an inbox.MemStore, not a %T", o.Store)
	}
	h := &harness{store: store, journal: journal.NewMemStore(), eng: &memEngine{}}
	if o.Journal == nil {
		o.Journal = h.journal
	}
	o.Teams = teams
	if o.Stat == nil { // staticTeams' folders do not exist: every folder is there
		o.Stat = func(string) (fs.FileInfo, error) { return nil, nil }
	}
	o.Engines = map[troupe.Engine]engine.Engine{troupe.EngineFake: h.eng, engineOther: h.eng}
	h.rt = New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- h.rt.Run(ctx) }()
	synctest.Wait() // Run has recovered and waits
	h.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(h.stop)
	return h
}

func twoAgents(window time.Duration) staticTeams {
	return staticTeams{p1: {spec("lead", window), spec("researcher", window)}}
}

func TestC4_AskSurvivesTargetActiveForThreeWindows(t *testing.T) {
	for _, kind := range []string{"line", "chunk"} { // the fake imitates line output and slow chunks
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, twoAgents(10*time.Minute), 0)
				start := time.Now()
				req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead",
					"work 30m every 9m "+kind+" then found it", 0)
				if err != nil {
					t.Fatal(err)
				}
				if req.State != troupe.ReqAnswered || req.Answer != "found it" {
					t.Fatalf("ask = %+v, want answered \"found it\"", req)
				}
				if took := time.Since(start); took < 30*time.Minute {
					t.Fatalf("answered after %v, before the 30m of work", took)
				}
			})
		})
	}
}

func TestC4_AskSurvivesHoursOfActivity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "work 3h every 9m line then done", 0)
		if err != nil || req.State != troupe.ReqAnswered || req.Answer != "done" {
			t.Fatalf("ask = %+v, %v; want answered after 3h of work with output every 9m", req, err)
		}
	})
}

func TestC4_SilentTargetGetsNoReplyAfterExactlyOneWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		start := time.Now()
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "silent 5h then too late", 0)
		if err != nil {
			t.Fatal(err)
		}
		if req.State != troupe.ReqNoReply {
			t.Fatalf("state = %s, want no_reply", req.State)
		}
		if took := time.Since(start); took != 10*time.Minute {
			t.Fatalf("no reply after %v, want exactly one window (10m)", took)
		}
		for _, want := range []string{"researcher", "10m0s", "last activity"} {
			if !strings.Contains(req.Error, want) {
				t.Errorf("error %q does not name %q", req.Error, want)
			}
		}
	})
}

func TestC4_SilenceAfterActivityCutsOneWindowAfterTheLastActivity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Output every 4m for 20m, then the target hangs: the cut comes
		// exactly one window (10m) after its last output, at 30m.
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		start := time.Now()
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "work 20m every 4m line then hang", 0)
		if err != nil {
			t.Fatal(err)
		}
		if req.State != troupe.ReqNoReply {
			t.Fatalf("state = %s, want no_reply", req.State)
		}
		if took := time.Since(start); took != 30*time.Minute {
			t.Fatalf("cut after %v, want 30m (last output at 20m + the 10m window)", took)
		}
	})
}

func TestC4_CeilingCutsEvenAnActiveTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), time.Hour)
		start := time.Now()
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "work 9h every 1m line then never", 0)
		if err != nil {
			t.Fatal(err)
		}
		if req.State != troupe.ReqNoReply || !strings.Contains(req.Error, "ceiling") {
			t.Fatalf("ask = %+v, want no_reply at the ceiling", req)
		}
		if took := time.Since(start); took != time.Hour {
			t.Fatalf("cut after %v, want exactly the 1h ceiling", took)
		}
	})
}

func TestC4_EarlyReturnThenAnswerWakesTheAsker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "work 30m every 5m line then the answer", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if req.State != troupe.ReqPending || !req.Detached || req.ID == "" {
			t.Fatalf("ask with a 1m wait = %+v, want a pending detached request id", req)
		}
		<-time.After(31 * time.Minute) // fake time: the target answers at 30m
		synctest.Wait()
		// The lead was woken with the reply in its inbox and echoed it.
		var got []string
		for _, in := range h.eng.Inputs() {
			for _, m := range in.Messages {
				if m.To == "lead" {
					got = append(got, string(m.Kind)+":"+m.Text)
				}
			}
		}
		if len(got) != 1 || got[0] != "reply:the answer" {
			t.Fatalf("lead's turns got %v, want one reply carrying the answer", got)
		}
		final, _ := h.store.Request(t.Context(), p1, req.ID)
		if final.State != troupe.ReqAnswered {
			t.Fatalf("request = %+v", final)
		}
	})
}
