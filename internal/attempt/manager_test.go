package attempt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/check"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

const proj troupe.ProjectID = "p1"

// fakes stands for the team, the worktrees, the runtime and the checker.
type fakes struct {
	mu       sync.Mutex
	specs    map[troupe.AgentID]troupe.AgentSpec
	checks   []troupe.Check
	verdict  map[troupe.AgentID]troupe.CheckState
	stat     map[troupe.AgentID]worktree.Stat
	refuse   map[troupe.AgentID]error // Worktrees.Start's answer
	bases    map[troupe.AgentID]string
	ran      map[troupe.AgentID]int // checks run
	requests map[troupe.RequestID]chan troupe.RequestState
	limited  map[troupe.RequestID]time.Time // Await answers pending, limited until then, once
	awaits   int
	states   map[troupe.RequestID]troupe.RequestState
	n        int
}

func newFakes(agents ...string) *fakes {
	f := &fakes{specs: map[troupe.AgentID]troupe.AgentSpec{}, checks: []troupe.Check{{Name: "test", Command: "true"}},
		verdict: map[troupe.AgentID]troupe.CheckState{}, stat: map[troupe.AgentID]worktree.Stat{}, refuse: map[troupe.AgentID]error{},
		bases: map[troupe.AgentID]string{}, ran: map[troupe.AgentID]int{}, requests: map[troupe.RequestID]chan troupe.RequestState{},
		states: map[troupe.RequestID]troupe.RequestState{}, limited: map[troupe.RequestID]time.Time{}}
	for _, a := range agents {
		f.specs[troupe.AgentID(a)] = troupe.AgentSpec{Name: troupe.AgentID(a), Engine: "fake", Workspace: worktree.Worktree}
	}
	return f
}

func (f *fakes) Agent(k troupe.RuntimeKey) (troupe.AgentSpec, string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.specs[k.Agent]
	return s, "/proj", ok && k.Project == proj
}
func (f *fakes) Checks(troupe.ProjectID) []troupe.Check { return f.checks }
func (f *fakes) Start(_ context.Context, k troupe.RuntimeKey, _ troupe.AgentSpec, _, base string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.refuse[k.Agent]; err != nil {
		return err
	}
	f.bases[k.Agent] = base
	return nil
}
func (f *fakes) StatFrom(_ context.Context, k troupe.RuntimeKey, _ troupe.AgentSpec, _ string) (worktree.Stat, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stat[k.Agent], nil
}
func (f *fakes) Delegate(_ context.Context, to troupe.RuntimeKey, from troupe.AgentID, task string, _ troupe.CheckName, _ int) (troupe.Request, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	id := troupe.RequestID(fmt.Sprintf("r-%s-%d", to.Agent, f.n))
	f.requests[id] = make(chan troupe.RequestState, 1)
	return troupe.Request{ID: id, Project: to.Project, To: to.Agent, From: from, Question: task, State: troupe.ReqPending}, nil
}

// end ends the pending request of agent with state.
func (f *fakes) end(t *testing.T, agent troupe.AgentID, state troupe.RequestState) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, ch := range f.requests {
		if strings.HasPrefix(string(id), "r-"+string(agent)+"-") && f.states[id] == "" {
			f.states[id] = state
			ch <- state
			return
		}
	}
	t.Fatalf("no pending request of %s", agent)
}

func (f *fakes) Await(ctx context.Context, p troupe.ProjectID, id troupe.RequestID, _ time.Duration) (troupe.Request, error) {
	f.mu.Lock()
	ch, ok := f.requests[id]
	st := f.states[id]
	f.mu.Unlock()
	if !ok {
		return troupe.Request{}, troupe.ErrNotFound
	}
	f.mu.Lock()
	f.awaits++
	until, lim := f.limited[id]
	delete(f.limited, id)
	f.mu.Unlock()
	if lim {
		return troupe.Request{ID: id, State: troupe.ReqPending, LimitedUntil: until}, nil
	}
	if st != "" {
		return troupe.Request{ID: id, State: st}, nil
	}
	select {
	case st := <-ch:
		return troupe.Request{ID: id, State: st}, nil
	case <-ctx.Done():
		return troupe.Request{}, ctx.Err()
	}
}
func (f *fakes) WhileIdle(ctx context.Context, _ troupe.RuntimeKey, fn func(context.Context) error) error {
	return fn(ctx)
}
func (f *fakes) Run(_ context.Context, k troupe.RuntimeKey, name troupe.CheckName) (check.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ran[k.Agent]++
	v := f.verdict[k.Agent]
	if v == "" {
		v = troupe.CheckFailed
	}
	code := 1
	if v == troupe.CheckPassed {
		code = 0
	}
	return check.Result{ID: int64(len(f.ran)), Project: k.Project, Agent: k.Agent, Check: name, State: v, ExitCode: code, Output: "out of " + string(k.Agent)}, nil
}

// clock is a fake clock: each reading is a second after the last.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Second)
	return c.now
}

func newManager(f *fakes, st Store) *Manager {
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return New(Options{Teams: f, Worktrees: f, Requests: f, Checks: f, Store: st, Now: c.Now,
		Head: func(context.Context, string) (string, error) { return "c0ffee", nil }})
}

// run starts m.Run in the bubble and returns its stop.
func run(m *Manager) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	synctest.Wait()
	return func() { cancel(); <-done }
}

// TestAttemptRunsItsMembersToARanking: Start brings each worktree to the
// project's HEAD and gives each agent the task; an agent in the running
// attempt is refused another; as each request ends its check runs; once
// all are done the members are ranked (the one that fixed it, the one
// that broke it, the one that changed nothing), the winner named, the
// time from the delegation to the check's end kept.
func TestAttemptRunsItsMembersToARanking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes("fixer", "breaker", "idle", "other")
		f.verdict["fixer"] = troupe.CheckPassed
		f.verdict["breaker"], f.verdict["idle"] = troupe.CheckFailed, troupe.CheckFailed
		f.stat["fixer"] = worktree.Stat{Files: 1, Added: 2, Deleted: 1}
		f.stat["breaker"] = worktree.Stat{Files: 1, Added: 1}
		st := &MemStore{}
		m := newManager(f, st)
		defer run(m)()
		ctx := context.Background()

		a, err := m.Start(ctx, proj, Request{Task: "make test pass", Agents: []troupe.AgentID{"idle", "breaker", "fixer"}})
		if err != nil {
			t.Fatal(err)
		}
		if a.State != Running || a.Base != "c0ffee" || a.Check != "test" || len(a.Members) != 3 {
			t.Fatalf("started %+v", a)
		}
		for _, mem := range a.Members {
			if mem.Request == "" || mem.State != Working || f.bases[mem.Agent] != "c0ffee" {
				t.Fatalf("member %+v (base %q)", mem, f.bases[mem.Agent])
			}
		}
		if _, err := m.Start(ctx, proj, Request{Task: "x", Agents: []troupe.AgentID{"other", "fixer"}}); !errors.Is(err, troupe.ErrConflict) ||
			!strings.Contains(err.Error(), fmt.Sprintf("fixer is in attempt %d, still running", a.ID)) {
			t.Fatalf("a second attempt with fixer: %v", err)
		}

		f.end(t, "fixer", troupe.ReqAnswered)
		synctest.Wait()
		got, _ := st.Attempt(ctx, proj, a.ID)
		if got.State != Running || f.ran["fixer"] != 1 || f.ran["idle"] != 0 {
			t.Fatalf("after fixer's end: %+v, checks run %v", got, f.ran)
		}
		f.end(t, "breaker", troupe.ReqAnswered)
		f.end(t, "idle", troupe.ReqFailed)
		synctest.Wait()
		got, _ = st.Attempt(ctx, proj, a.ID)
		if got.State != Done || got.Winner != "fixer" {
			t.Fatalf("attempt = %+v; want done, won by fixer", got)
		}
		want := []troupe.AgentID{"fixer", "breaker", "idle"}
		for i, mem := range got.Members {
			if mem.Agent != want[i] || mem.Rank != i+1 || mem.State != Finished || mem.Output != "out of "+string(mem.Agent) || mem.DurationMS <= 0 || mem.Reason == "" {
				t.Fatalf("member %d = %+v; want %s ranked %d, checked and timed", i, mem, want[i], i+1)
			}
		}
		if got.Members[2].RequestState != troupe.ReqFailed || !strings.Contains(got.Members[2].Reason, "changed nothing") {
			t.Fatalf("idle = %+v", got.Members[2])
		}
		// Done, its agents are free again.
		if _, err := m.Start(ctx, proj, Request{Task: "again", Agents: []troupe.AgentID{"fixer"}}); err != nil {
			t.Fatalf("a new attempt with fixer after the first ended: %v", err)
		}
	})
}

// TestAttemptResumesAfterARestart: an attempt saved mid-way (one member's
// request ended without a check, one still pending, one done) is resumed
// by a new Manager's Run: the first is checked, the pending one waited
// for, the done one left alone; then it is ranked.
func TestAttemptResumesAfterARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes("a", "b", "c")
		f.verdict["a"], f.verdict["b"] = troupe.CheckPassed, troupe.CheckFailed
		f.stat["a"] = worktree.Stat{Files: 1, Added: 1}
		st := &MemStore{}
		ctx := context.Background()
		reqA, _ := f.Delegate(ctx, troupe.RuntimeKey{Project: proj, Agent: "a"}, troupe.Person, "t", "", 0)
		reqB, _ := f.Delegate(ctx, troupe.RuntimeKey{Project: proj, Agent: "b"}, troupe.Person, "t", "", 0)
		f.end(t, "a", troupe.ReqAnswered)
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		saved, err := st.AddAttempt(ctx, Attempt{Project: proj, Task: "t", Check: "test", Base: "c0ffee", State: Running, CreatedAt: t0,
			Members: []Member{
				{Agent: "a", State: Checking, Request: reqA.ID, RequestState: troupe.ReqAnswered, ExitCode: -1, DelegatedAt: t0},
				{Agent: "b", State: Working, Request: reqB.ID, ExitCode: -1, DelegatedAt: t0},
				{Agent: "c", State: Finished, Verdict: troupe.CheckFailed, ExitCode: 1, DelegatedAt: t0, EndedAt: t0.Add(time.Second)},
			}})
		if err != nil {
			t.Fatal(err)
		}
		m := newManager(f, st)
		defer run(m)()
		got, _ := st.Attempt(ctx, saved.ID.project(), saved.ID)
		if got.State != Running || f.ran["a"] != 1 || f.ran["b"] != 0 || f.ran["c"] != 0 || got.Members[0].State != Finished || got.Members[1].State != Working {
			t.Fatalf("after the restart: %+v, checks %v; want a checked, b waiting, c left", got, f.ran)
		}
		if _, err := m.Start(ctx, proj, Request{Task: "x", Agents: []troupe.AgentID{"b"}}); !errors.Is(err, troupe.ErrConflict) {
			t.Fatalf("b is in the resumed attempt: %v", err)
		}
		f.end(t, "b", troupe.ReqAnswered)
		synctest.Wait()
		got, _ = st.Attempt(ctx, proj, saved.ID)
		if got.State != Done || got.Winner != "a" || f.ran["b"] != 1 || f.ran["c"] != 0 || got.Members[0].Agent != "a" {
			t.Fatalf("after b's end: %+v, checks %v", got, f.ran)
		}
	})
}

func (ID) project() troupe.ProjectID { return proj }

// TestStartRefuses: each refusal names the field or the agent and the
// fix, and records nothing.
func TestStartRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes("a", "b", "c", "d")
		f.specs["home"] = troupe.AgentSpec{Name: "home", Engine: "fake"}
		f.refuse["d"] = fmt.Errorf("the worktree of d has uncommitted changes (x.go): troupe worktree reset d --yes: %w", troupe.ErrConflict)
		st := &MemStore{}
		m := newManager(f, st)
		defer run(m)()
		ctx := context.Background()
		nine := []troupe.AgentID{"a", "b", "c", "d", "e", "f", "g", "h", "i"}
		for _, tc := range []struct {
			name string
			r    Request
			is   error
			says string
		}{
			{"empty task", Request{Task: " ", Agents: []troupe.AgentID{"a"}}, troupe.ErrInvalid, "task: empty"},
			{"huge task", Request{Task: strings.Repeat("x", MaxTaskBytes+1), Agents: []troupe.AgentID{"a"}}, troupe.ErrInvalid, "task: "},
			{"no agents", Request{Task: "t"}, troupe.ErrInvalid, "agents: 0 named"},
			{"nine agents", Request{Task: "t", Agents: nine}, troupe.ErrInvalid, "name 1 to 8"},
			{"twice", Request{Task: "t", Agents: []troupe.AgentID{"a", "a"}}, troupe.ErrInvalid, "a is named twice"},
			{"unknown", Request{Task: "t", Agents: []troupe.AgentID{"zed"}}, troupe.ErrNotFound, `no agent named "zed"`},
			{"project folder", Request{Task: "t", Agents: []troupe.AgentID{"a", "home"}}, troupe.ErrInvalid, `home works in the project folder`},
			{"unknown check", Request{Task: "t", Agents: []troupe.AgentID{"a"}, Check: "lint"}, troupe.ErrNotFound, `no check "lint"`},
			{"work in a worktree", Request{Task: "t", Agents: []troupe.AgentID{"a", "d"}}, troupe.ErrConflict, "troupe worktree reset d"},
		} {
			if _, err := m.Start(ctx, proj, tc.r); !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.is, tc.says)
			}
		}
		f.checks = append(f.checks, troupe.Check{Name: "lint"})
		if _, err := m.Start(ctx, proj, Request{Task: "t", Agents: []troupe.AgentID{"a"}}); !errors.Is(err, troupe.ErrInvalid) || !strings.Contains(err.Error(), "name one with --check (test, lint)") {
			t.Errorf("two checks, none named: %v", err)
		}
		f.checks = nil
		if _, err := m.Start(ctx, proj, Request{Task: "t", Agents: []troupe.AgentID{"a"}}); !errors.Is(err, troupe.ErrNotFound) || !strings.Contains(err.Error(), "declare one in [checks]") {
			t.Errorf("no check: %v", err)
		}
		f.checks = []troupe.Check{{Name: "test"}}
		if as, _ := st.Attempts(ctx, proj, 0); len(as) != 0 {
			t.Fatalf("refusals recorded %d attempts", len(as))
		}
		// At most MaxRunningPerProject at once.
		for _, ag := range []troupe.AgentID{"a", "b", "c"} {
			if _, err := m.Start(ctx, proj, Request{Task: "t", Agents: []troupe.AgentID{ag}}); err != nil {
				t.Fatal(err)
			}
		}
		f.specs["e"] = troupe.AgentSpec{Name: "e", Workspace: worktree.Worktree}
		if _, err := m.Start(ctx, proj, Request{Task: "t", Agents: []troupe.AgentID{"e"}}); !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), "runs 3 attempts already") {
			t.Fatalf("a fourth running attempt: %v", err)
		}
	})
}

// TestDiscardResetsTheLosers: a running attempt is refused; a done one
// resets every member but the winner (one with no worktree left is
// skipped) and is marked discarded.
func TestDiscardResetsTheLosers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes("a", "b", "c", "gone")
		f.verdict["a"] = troupe.CheckPassed
		f.stat["a"] = worktree.Stat{Files: 1, Added: 1}
		st := &MemStore{}
		m := newManager(f, st)
		defer run(m)()
		ctx := context.Background()
		a, err := m.Start(ctx, proj, Request{Task: "t", Agents: []troupe.AgentID{"a", "b", "c", "gone"}})
		if err != nil {
			t.Fatal(err)
		}
		var reset []troupe.AgentID
		resetFn := func(_ context.Context, k troupe.RuntimeKey) error {
			if k.Agent == "gone" {
				return fmt.Errorf("gone has no worktree yet: %w", troupe.ErrNotFound)
			}
			reset = append(reset, k.Agent)
			return nil
		}
		if _, _, err := m.Discard(ctx, proj, a.ID, resetFn); !errors.Is(err, troupe.ErrConflict) || len(reset) != 0 {
			t.Fatalf("discard of a running attempt: %v, reset %v", err, reset)
		}
		for _, ag := range []troupe.AgentID{"a", "b", "c", "gone"} {
			f.end(t, ag, troupe.ReqAnswered)
		}
		synctest.Wait()
		got, done, err := m.Discard(ctx, proj, a.ID, resetFn)
		slices.Sort(done)
		slices.Sort(reset)
		if err != nil || !got.Discarded || fmt.Sprint(done) != "[b c]" || fmt.Sprint(reset) != "[b c]" {
			t.Fatalf("discard = %+v %v %v; reset %v", got, done, err, reset)
		}
		if saved, _ := st.Attempt(ctx, proj, a.ID); !saved.Discarded {
			t.Fatalf("saved %+v, want discarded", saved)
		}
	})
}

// TestALimitedMemberIsReadAgainAtItsReset: a member's request returned
// pending because its engine is limited is read again at the limit's
// reset (sooner than the poll's bound of a minute), not before, then
// followed to its end.
func TestALimitedMemberIsReadAgainAtItsReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes("a")
		st := &MemStore{}
		m := New(Options{Teams: f, Worktrees: f, Requests: f, Checks: f, Store: st,
			Head: func(context.Context, string) (string, error) { return "c0ffee", nil }})
		defer run(m)()
		ctx := context.Background()
		awaits := func() int { f.mu.Lock(); defer f.mu.Unlock(); return f.awaits }
		// The first read of the request the attempt makes says limited
		// for 30 seconds.
		f.mu.Lock()
		id := troupe.RequestID(fmt.Sprintf("r-a-%d", f.n+1))
		f.limited[id] = time.Now().Add(30 * time.Second)
		f.mu.Unlock()
		a, err := m.Start(ctx, proj, Request{Task: "t", Agents: []troupe.AgentID{"a"}})
		if err != nil || a.Members[0].Request != id {
			t.Fatalf("Start = %+v, %v; want request %s", a, err, id)
		}
		synctest.Wait()
		if n := awaits(); n != 1 {
			t.Fatalf("%d reads of the request; want 1 (limited, waiting for the reset)", n)
		}
		time.Sleep(29 * time.Second)
		synctest.Wait()
		if n := awaits(); n != 1 {
			t.Fatalf("%d reads before the reset; want 1", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := awaits(); n != 2 {
			t.Fatalf("%d reads at the reset; want 2", n)
		}
		f.end(t, "a", troupe.ReqAnswered)
		synctest.Wait()
		if got, _ := st.Attempt(ctx, proj, a.ID); got.State != Done || got.Members[0].RequestState != troupe.ReqAnswered {
			t.Fatalf("attempt = %+v; want done", got)
		}
	})
}
