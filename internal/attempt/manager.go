package attempt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/check"
	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// Teams is where the agents and the checks in force come from: the
// registry's approved team (project.Registry).
type Teams interface {
	Agent(k troupe.RuntimeKey) (troupe.AgentSpec, string, bool)
	Checks(p troupe.ProjectID) []troupe.Check
}

// Worktrees brings a member's worktree to the base and counts its change
// (worktree.Manager).
type Worktrees interface {
	Start(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, base string) error
	StatFrom(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, base string) (worktree.Stat, error)
}

// Requests gives the task and waits for its end (runtime.Runtime).
type Requests interface {
	// Delegate is the runtime's; an attempt names no check to it (verify
	// "", tries 0): it runs its own check on each member when it ends.
	Delegate(ctx context.Context, to troupe.RuntimeKey, from troupe.AgentID, task string, verify troupe.CheckName, tries int) (troupe.Request, error)
	Await(ctx context.Context, p troupe.ProjectID, id troupe.RequestID, wait time.Duration) (troupe.Request, error)
	// WhileIdle runs fn while agent k has no turn in flight;
	// troupe.ErrConflict when it has one.
	WhileIdle(ctx context.Context, k troupe.RuntimeKey, fn func(ctx context.Context) error) error
}

// Checks runs a check on an agent's workspace and records it
// (check.Checker).
type Checks interface {
	Run(ctx context.Context, k troupe.RuntimeKey, name troupe.CheckName) (check.Result, error)
}

// Options configures New. Teams, Worktrees, Requests, Checks and Store
// are required.
type Options struct {
	Teams     Teams
	Worktrees Worktrees
	Requests  Requests
	Checks    Checks
	Store     Store
	// Journal gives a member's cost (its turns' usage); nil: unknown.
	Journal journal.Store
	// Head is the commit checked out in the project folder; nil:
	// worktree.Head.
	Head func(ctx context.Context, dir string) (string, error)
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Publish, if set, is told of each attempt saved (the event feed). It
	// must not block.
	Publish func(Attempt)
	// LimitedPoll bounds a wait for a member limited by its engine's
	// usage limit before its request is read again; 0: a minute.
	LimitedPoll time.Duration
	Logger      *slog.Logger
}

// Manager starts attempts and drives them to their ranking.
type Manager struct {
	o   Options
	log *slog.Logger

	mu      sync.Mutex
	ctx     context.Context // Run's; nil before Run
	stopped bool            // Run is ending: nothing more is spawned
	wg      sync.WaitGroup  // the attempts' goroutines, owned by Run
	// busy holds the agents of running attempts (0: one being started):
	// an agent is in one running attempt at most.
	busy map[troupe.RuntimeKey]ID
	// running counts each project's running attempts, those being
	// started included.
	running map[troupe.ProjectID]int
}

// New returns a Manager; it panics on a missing required option (a
// wiring mistake).
func New(o Options) *Manager {
	if o.Teams == nil || o.Worktrees == nil || o.Requests == nil || o.Checks == nil || o.Store == nil {
		panic("attempt.New: Options.Teams, Worktrees, Requests, Checks and Store are required")
	}
	if o.Head == nil {
		o.Head = worktree.Head
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.LimitedPoll <= 0 {
		o.LimitedPoll = time.Minute
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{o: o, log: log, busy: make(map[troupe.RuntimeKey]ID), running: make(map[troupe.ProjectID]int)}
}

// Run resumes the attempts the store says are running (a restart), then
// drives those Start starts, until ctx ends; it returns once every
// attempt's goroutine has stopped. What was not done is done by the next
// Run.
func (m *Manager) Run(ctx context.Context) error {
	as, err := m.o.Store.RunningAttempts(ctx)
	if err != nil {
		m.log.Error("read running attempts: they resume at the next start", "err", err)
	}
	// The resumed attempts' agents are taken before Start may run.
	m.mu.Lock()
	for _, a := range as {
		m.running[a.Project]++
		for _, mem := range a.Members {
			m.busy[mem.Key(a.Project)] = a.ID
		}
	}
	m.ctx = ctx
	m.mu.Unlock()
	for _, a := range as {
		m.log.Info("attempt resumed", "project", a.Project, "attempt", a.ID)
		m.spawn(a)
	}
	<-ctx.Done()
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}

// spawn drives a in a goroutine owned by Run; false when Run has not
// started or is ending.
func (m *Manager) spawn(a Attempt) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil || m.stopped {
		return false
	}
	ctx := m.ctx
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.drive(ctx, a)
	}()
	return true
}

// save saves a, then tells Publish.
func (m *Manager) save(ctx context.Context, a Attempt) error {
	if err := m.o.Store.SaveAttempt(ctx, a); err != nil {
		return err
	}
	if m.o.Publish != nil {
		m.o.Publish(a)
	}
	return nil
}

// Request is what the person asks of an attempt.
type Request struct {
	Task   string           `json:"task"`
	Agents []troupe.AgentID `json:"agents"`
	// Check names the check that judges the work; "": the project's only
	// check.
	Check troupe.CheckName `json:"check,omitempty"`
}

// member is one agent being started.
type member struct {
	key  troupe.RuntimeKey
	spec troupe.AgentSpec
	dir  string
}

// Start checks r, brings each agent's worktree to the project's HEAD,
// gives each the task and returns the attempt, recorded and running. A
// refusal records nothing: troupe.ErrInvalid (a field), ErrNotFound (an
// agent or a check), ErrConflict (an agent busy, in another attempt, or
// holding work; too many attempts running).
func (m *Manager) Start(ctx context.Context, p troupe.ProjectID, r Request) (Attempt, error) {
	name, members, err := m.resolve(p, r)
	if err != nil {
		return Attempt{}, err
	}
	release, err := m.reserve(p, members)
	if err != nil {
		return Attempt{}, err
	}
	started := false
	defer func() {
		if !started {
			release()
		}
	}()
	base, err := m.o.Head(ctx, members[0].dir)
	if err != nil {
		return Attempt{}, fmt.Errorf("start attempt: read the project's HEAD: %w", err)
	}
	for _, mb := range members {
		err := m.o.Requests.WhileIdle(ctx, mb.key, func(ctx context.Context) error {
			return m.o.Worktrees.Start(ctx, mb.key, mb.spec, mb.dir, base)
		})
		if err != nil {
			return Attempt{}, fmt.Errorf("start attempt: bring %s's worktree to %s: %w", mb.key.Agent, short(base), err)
		}
	}
	now := m.o.Now().UTC()
	a := Attempt{Project: p, Task: r.Task, Check: name, Base: base, State: Running, CreatedAt: now}
	for _, mb := range members {
		a.Members = append(a.Members, Member{Agent: mb.key.Agent, Engine: mb.spec.Engine, Model: mb.spec.Model,
			State: Working, ExitCode: -1, DelegatedAt: now})
	}
	if a, err = m.o.Store.AddAttempt(ctx, a); err != nil {
		return Attempt{}, fmt.Errorf("start attempt: %w", err)
	}
	for i, mb := range members {
		a.Members[i].DelegatedAt = m.o.Now().UTC()
		req, err := m.o.Requests.Delegate(ctx, mb.key, troupe.Person, r.Task, "", 0)
		if err != nil {
			a.Members[i].State, a.Members[i].Error = Finished, "the task was not given: "+err.Error()
			a.Members[i].EndedAt = m.o.Now().UTC()
			continue
		}
		a.Members[i].Request, a.Members[i].RequestState = req.ID, req.State
	}
	if err := m.save(context.WithoutCancel(ctx), a); err != nil {
		m.log.Error("save attempt", "project", p, "attempt", a.ID, "err", err)
	}
	m.mu.Lock()
	for _, mb := range members {
		m.busy[mb.key] = a.ID
	}
	m.mu.Unlock()
	if !m.spawn(a) {
		return a, fmt.Errorf("start attempt %d: the daemon is stopping: it resumes at its next start", a.ID)
	}
	started = true
	m.log.Info("attempt started", "project", p, "attempt", a.ID, "agents", len(members), "check", name, "base", base)
	return a, nil
}

// resolve checks r against project p's team: the check to run and each
// agent.
func (m *Manager) resolve(p troupe.ProjectID, r Request) (troupe.CheckName, []member, error) {
	if strings.TrimSpace(r.Task) == "" {
		return "", nil, fmt.Errorf("start attempt: %w", &troupe.FieldError{Field: "task", Msg: "empty: write what the agents should do"})
	}
	if len(r.Task) > MaxTaskBytes {
		return "", nil, fmt.Errorf("start attempt: %w", &troupe.FieldError{Field: "task",
			Msg: fmt.Sprintf("%d bytes, more than a task may hold (%d): write the text to a file in the project and give its path instead", len(r.Task), MaxTaskBytes)})
	}
	if len(r.Agents) == 0 || len(r.Agents) > MaxAgents {
		return "", nil, fmt.Errorf("start attempt: %w", &troupe.FieldError{Field: "agents",
			Msg: fmt.Sprintf("%d named: name 1 to %d worktree agents, like --agents a,b,c", len(r.Agents), MaxAgents)})
	}
	var members []member
	for i, ag := range r.Agents {
		if slices.Contains(r.Agents[:i], ag) {
			return "", nil, fmt.Errorf("start attempt: %w", &troupe.FieldError{Field: "agents", Msg: fmt.Sprintf("%s is named twice: name each agent once", ag)})
		}
		k := troupe.RuntimeKey{Project: p, Agent: ag}
		spec, dir, ok := m.o.Teams.Agent(k)
		if !ok {
			return "", nil, fmt.Errorf("start attempt: %w", troupe.NoAgent(ag, nil))
		}
		if spec.Workspace != worktree.Worktree {
			return "", nil, fmt.Errorf("start attempt: %s works in the project folder, and an attempt's agents each need a worktree of their own: set workspace = \"worktree\" in its [[agent]] table in .troupe/team.toml: %w", ag, troupe.ErrInvalid)
		}
		if spec.Remote() {
			return "", nil, fmt.Errorf("start attempt: %s runs on a runner, and checks run on the daemon's machine only: name agents of this machine: %w", ag, troupe.ErrInvalid)
		}
		members = append(members, member{key: k, spec: spec, dir: dir})
	}
	checks := m.o.Teams.Checks(p)
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = string(c.Name)
	}
	switch {
	case r.Check != "":
		if !slices.Contains(names, string(r.Check)) {
			return "", nil, fmt.Errorf("start attempt: the project has no check %q in its approved team (its checks: %s): %w", r.Check, list(names), troupe.ErrNotFound)
		}
		return r.Check, members, nil
	case len(checks) == 1:
		return checks[0].Name, members, nil
	case len(checks) == 0:
		return "", nil, fmt.Errorf("start attempt: the project has no check to judge the work: declare one in [checks] in .troupe/team.toml, like test = \"go test ./...\": %w", troupe.ErrNotFound)
	}
	return "", nil, fmt.Errorf("start attempt: %w", &troupe.FieldError{Field: "check",
		Msg: "the project has " + fmt.Sprint(len(checks)) + " checks: name one with --check (" + list(names) + ")"})
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func short(commit string) string { return commit[:min(len(commit), 12)] }

// reserve takes a place among project p's running attempts and each
// member's agent; release gives them back.
func (m *Manager) reserve(p troupe.ProjectID, members []member) (release func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil || m.stopped {
		return nil, fmt.Errorf("start attempt: this daemon runs no attempts now (starting or stopping): try again: %w", troupe.ErrConflict)
	}
	if m.running[p] >= MaxRunningPerProject {
		return nil, fmt.Errorf("start attempt: the project runs %d attempts already, the most at once: wait for one to end (troupe attempts): %w", m.running[p], troupe.ErrConflict)
	}
	for _, mb := range members {
		if id, ok := m.busy[mb.key]; ok {
			which := "another attempt being started"
			if id != 0 {
				which = fmt.Sprintf("attempt %d, still running", id)
			}
			return nil, fmt.Errorf("start attempt: %s is in %s: wait for it to end (troupe attempt show %d) or name another agent: %w", mb.key.Agent, which, id, troupe.ErrConflict)
		}
	}
	m.running[p]++
	for _, mb := range members {
		m.busy[mb.key] = 0
	}
	keys := make([]troupe.RuntimeKey, len(members))
	for i, mb := range members {
		keys[i] = mb.key
	}
	return func() { m.release(p, keys) }, nil
}

func (m *Manager) release(p troupe.ProjectID, keys []troupe.RuntimeKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running[p]--; m.running[p] <= 0 {
		delete(m.running, p)
	}
	for _, k := range keys {
		delete(m.busy, k)
	}
}

// drive takes a's members to done, then ranks them. It stops where it is
// when ctx ends (the next Run resumes from the store).
func (m *Manager) drive(ctx context.Context, a Attempt) {
	keys := make([]troupe.RuntimeKey, len(a.Members))
	for i, mem := range a.Members {
		keys[i] = mem.Key(a.Project)
	}
	defer m.release(a.Project, keys)
	var mu sync.Mutex // guards a while the members' goroutines run
	save := func(i int, mem Member) {
		mu.Lock()
		defer mu.Unlock()
		a.Members[i] = mem
		if err := m.save(context.WithoutCancel(ctx), a); err != nil {
			m.log.Error("save attempt", "project", a.Project, "attempt", a.ID, "err", err)
		}
	}
	var wg sync.WaitGroup
	for i, mem := range a.Members {
		if mem.State == Finished {
			continue
		}
		wg.Go(func() { m.member(ctx, a, mem, func(mem Member) { save(i, mem) }) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	a.Members, a.Winner = Rank(a.Members, a.Check)
	a.State, a.EndedAt = Done, m.o.Now().UTC()
	if err := m.save(context.WithoutCancel(ctx), a); err != nil {
		m.log.Error("save attempt", "project", a.Project, "attempt", a.ID, "err", err)
	}
	m.log.Info("attempt done", "project", a.Project, "attempt", a.ID, "winner", a.Winner)
}

// member takes one member of a from where it is to done, saving each
// step.
func (m *Manager) member(ctx context.Context, a Attempt, mem Member, save func(Member)) {
	k := mem.Key(a.Project)
	if mem.State == Working {
		if mem.Request == "" {
			mem.State, mem.Error, mem.EndedAt = Finished, "the task was not given: the daemon stopped first", m.o.Now().UTC()
			save(mem)
			return
		}
		req, err := m.wait(ctx, a.Project, mem.Request)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			mem.Error = "wait for its request: " + err.Error()
		} else {
			mem.RequestState, mem.Error = req.State, req.Error
		}
		mem.State = Checking
		save(mem)
	}
	res, err := m.o.Checks.Run(ctx, k, a.Check)
	if ctx.Err() != nil {
		return // run again at the next start
	}
	if err != nil {
		mem.Error = join(mem.Error, "its check did not run: "+err.Error())
	} else {
		mem.Check, mem.Verdict, mem.ExitCode = res.ID, res.State, res.ExitCode
		mem.Output = string(clip.Tail([]byte(res.Output), MaxOutput))
		if res.Reason != "" && !res.Passed() {
			mem.Error = join(mem.Error, res.Reason)
		}
	}
	spec, _, ok := m.o.Teams.Agent(k)
	if !ok {
		spec = troupe.AgentSpec{Name: k.Agent, Workspace: worktree.Worktree}
	}
	if st, err := m.o.Worktrees.StatFrom(ctx, k, spec, a.Base); err != nil {
		mem.Error = join(mem.Error, "its change was not counted: "+err.Error())
	} else {
		mem.Change = st
	}
	mem.EndedAt = m.o.Now().UTC()
	mem.DurationMS = mem.EndedAt.Sub(mem.DelegatedAt).Milliseconds()
	mem.CostUSD = m.cost(ctx, k, mem.DelegatedAt, mem.EndedAt)
	mem.State = Finished
	save(mem)
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// wait waits for request id's end. A member limited by its engine's
// usage limit is read again at its reset, or after LimitedPoll.
func (m *Manager) wait(ctx context.Context, p troupe.ProjectID, id troupe.RequestID) (troupe.Request, error) {
	for {
		req, err := m.o.Requests.Await(ctx, p, id, 0)
		if err != nil || req.State != troupe.ReqPending {
			return req, err
		}
		d := m.o.LimitedPoll
		if until := req.LimitedUntil.Sub(m.o.Now()); until > 0 && until < d {
			d = until
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return troupe.Request{}, ctx.Err()
		case <-t.C:
		}
	}
}

// maxCostTurns bounds the turns of an agent read for a member's cost.
const maxCostTurns = 100

// cost is what agent k's turns started in [from, to] cost, nil when none
// reports a cost.
func (m *Manager) cost(ctx context.Context, k troupe.RuntimeKey, from, to time.Time) *float64 {
	if m.o.Journal == nil {
		return nil
	}
	turns, err := m.o.Journal.Turns(ctx, k, 0, maxCostTurns)
	if err != nil {
		m.log.Warn("read turns for an attempt's cost", "project", k.Project, "agent", k.Agent, "err", err)
		return nil
	}
	var sum float64
	known := false
	for _, t := range turns {
		if t.StartedAt.Before(from) || t.StartedAt.After(to) || t.Usage == nil || t.Usage.CostUSD == 0 {
			continue
		}
		sum, known = sum+t.Usage.CostUSD, true
	}
	if !known {
		return nil
	}
	return &sum
}

// Get returns attempt id of project p.
func (m *Manager) Get(ctx context.Context, p troupe.ProjectID, id ID) (Attempt, error) {
	return m.o.Store.Attempt(ctx, p, id)
}

// List returns project p's attempts, newest first.
func (m *Manager) List(ctx context.Context, p troupe.ProjectID, limit int) ([]Attempt, error) {
	return m.o.Store.Attempts(ctx, p, limit)
}

// Discard resets the worktrees of attempt id's losers (every member but
// the winner) with reset, the person's own reset of a worktree, and marks
// the attempt discarded. A running attempt is refused (troupe.ErrConflict),
// and so is a loser now in another running attempt; one whose reset says
// troupe.ErrNotFound has no worktree left and is skipped. It returns the
// attempt and the agents reset; an error names the agents not reset.
func (m *Manager) Discard(ctx context.Context, p troupe.ProjectID, id ID, reset func(ctx context.Context, k troupe.RuntimeKey) error) (Attempt, []troupe.AgentID, error) {
	a, err := m.o.Store.Attempt(ctx, p, id)
	if err != nil {
		return Attempt{}, nil, err
	}
	if a.State != Done {
		return a, nil, fmt.Errorf("discard attempt %d: it is still running: discard it when it is done (troupe attempt show %d): %w", id, id, troupe.ErrConflict)
	}
	var done []troupe.AgentID
	var errs []error
	for _, ag := range a.Losers() {
		k := troupe.RuntimeKey{Project: p, Agent: ag}
		m.mu.Lock()
		other, busy := m.busy[k]
		m.mu.Unlock()
		if busy {
			errs = append(errs, fmt.Errorf("%s is in attempt %d, still running: its worktree is that attempt's now: %w", ag, other, troupe.ErrConflict))
			continue
		}
		if err := reset(ctx, k); errors.Is(err, troupe.ErrNotFound) {
			continue // no worktree left (removed, or the agent gone): nothing to drop
		} else if err != nil {
			errs = append(errs, fmt.Errorf("reset %s: %w", ag, err))
			continue
		}
		done = append(done, ag)
	}
	if len(errs) == 0 {
		a.Discarded = true
		if err := m.save(ctx, a); err != nil {
			return a, done, fmt.Errorf("discard attempt %d: %w", id, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return a, done, fmt.Errorf("discard attempt %d: %w", id, err)
	}
	m.log.Info("attempt discarded", "project", p, "attempt", id, "reset", len(done))
	return a, done, nil
}
