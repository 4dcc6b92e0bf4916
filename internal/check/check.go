package check

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Bounds of what a run keeps.
const (
	// MaxOutput is the tail of a check's output a Result keeps.
	MaxOutput = 16 << 10
	// MaxResultsPerAgent is how many results of one agent a Store keeps,
	// the oldest removed first.
	MaxResultsPerAgent = 200
	// DefaultMaxPerProject bounds the checks one project runs at once
	// when Options.MaxPerProject is 0.
	DefaultMaxPerProject = 4
	// maxOutputKept is the output a run's task keeps on disk while it
	// runs (its first and last halves, the cut said): a check printing
	// gigabytes costs at most this.
	maxOutputKept = 8 << 20
	// maxReason bounds a Result's reason.
	maxReason = 2 << 10
)

// Result is one run of a check on an agent's workspace.
type Result struct {
	ID      int64            `json:"id"` // set by the Store, rising
	Project troupe.ProjectID `json:"project"`
	Agent   troupe.AgentID   `json:"agent"`
	Check   troupe.CheckName `json:"check"`
	// Command and Dir are the check as run (the approved definition);
	// Dir "" is the workspace itself.
	Command string            `json:"command"`
	Dir     string            `json:"dir,omitempty"`
	State   troupe.CheckState `json:"state"`
	// ExitCode is the command's exit status; -1 when it did not exit by
	// itself (timeout, signal) or did not run.
	ExitCode int `json:"exit_code"`
	// Reason says why a run failed without an exit code, timed out or
	// could not run; and what of the command was stopped when it ended.
	Reason string `json:"reason,omitempty"`
	// Turn is the agent's latest turn when the check started: the turn
	// whose work it checked ("" when the agent had none).
	Turn       troupe.TurnID `json:"turn,omitempty"`
	StartedAt  time.Time     `json:"started_at"`
	DurationMS int64         `json:"duration_ms"`
	// Output is the tail of the command's output (stdout and stderr
	// interleaved), at most MaxOutput bytes; OutputBytes is how much it
	// wrote in all, and OutputCut says what was cut, "" when nothing was.
	Output      string `json:"output"`
	OutputBytes int64  `json:"output_bytes"`
	OutputCut   string `json:"output_cut,omitempty"`
}

// Key is the RuntimeKey of the agent the result checked.
func (r Result) Key() troupe.RuntimeKey { return troupe.RuntimeKey{Project: r.Project, Agent: r.Agent} }

// Passed reports whether the check passed.
func (r Result) Passed() bool { return r.State == troupe.CheckPassed }

// Filter selects results of one project: of one agent, of one turn, of
// one check ("" each: any), newest first, at most Limit (0:
// MaxResultsPerAgent).
type Filter struct {
	Project troupe.ProjectID
	Agent   troupe.AgentID
	Turn    troupe.TurnID
	Check   troupe.CheckName
	Limit   int
}

// Store keeps results. Implementations are safe for concurrent use.
type Store interface {
	// AddCheckResult records r (its ID ignored) and returns it with its
	// ID, greater than every ID given before. A result without Project,
	// Agent, Check or a State is refused with troupe.ErrInvalid. It keeps
	// the newest MaxResultsPerAgent results of r's agent.
	AddCheckResult(ctx context.Context, r Result) (Result, error)
	// CheckResults lists the results f selects, newest first. Project is
	// required (troupe.ErrInvalid).
	CheckResults(ctx context.Context, f Filter) ([]Result, error)
}

// Teams is where the checks in force and the agents come from: the
// registry's approved team (project.Registry).
type Teams interface {
	Check(p troupe.ProjectID, name troupe.CheckName) (troupe.Check, string, bool)
	Agent(k troupe.RuntimeKey) (troupe.AgentSpec, string, bool)
}

// Tasks runs a check's command as a task of troupe's own
// (task.Manager.RunOwn).
type Tasks interface {
	RunOwn(ctx context.Context, owner troupe.RuntimeKey, dir string, j task.Job, tail int) (task.Ended, error)
}

// Options configures New. Teams, Tasks and Store are required.
type Options struct {
	Teams Teams
	Tasks Tasks
	Store Store
	// Workspace returns the folder agent k works in (its worktree, made if
	// missing; the project folder dir for an agent without one); nil: dir.
	Workspace func(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string) (string, error)
	// Sandbox returns agent k's sandbox in work; nil: none.
	Sandbox func(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, work string) (sandbox.Policy, error)
	// Journal gives the agent's latest turn (the turn a run checks); nil:
	// none is recorded.
	Journal journal.Store
	// Publish, if set, is told of every result recorded (the event feed).
	// It must not block.
	Publish func(Result)
	// MaxPerProject bounds the checks one project runs at once; 0:
	// DefaultMaxPerProject.
	MaxPerProject int
	Logger        *slog.Logger
}

// Checker runs checks and keeps their results.
type Checker struct {
	o   Options
	log *slog.Logger

	mu    sync.Mutex
	slots map[troupe.ProjectID]chan struct{} // each project's run slots
}

// New returns a Checker. It panics when Teams, Tasks or Store is missing:
// a wiring mistake.
func New(o Options) *Checker {
	if o.Teams == nil || o.Tasks == nil || o.Store == nil {
		panic("check.New: Options.Teams, Tasks and Store are required")
	}
	if o.MaxPerProject <= 0 {
		o.MaxPerProject = DefaultMaxPerProject
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Checker{o: o, log: log, slots: make(map[troupe.ProjectID]chan struct{})}
}

// Run runs check name of k's project on agent k's workspace, records the
// result and returns it. The check is the approved team's (C17). Errors
// are for a run that could not be attempted and is not recorded: an
// unknown check or agent (troupe.ErrNotFound), an agent on a runner, ctx
// ended while waiting for a slot. A run that starts and cannot finish
// (a dir out of the workspace, a sandbox that cannot be made, ctx ended
// mid-run) is a recorded Result in state error.
func (c *Checker) Run(ctx context.Context, k troupe.RuntimeKey, name troupe.CheckName) (Result, error) {
	return c.RunOn(ctx, k, name, "")
}

// RunOn is Run recording the result on turn, the agent's turn whose work
// it checks (a verified delegation's); "" is its latest turn, as Run.
func (c *Checker) RunOn(ctx context.Context, k troupe.RuntimeKey, name troupe.CheckName, turn troupe.TurnID) (Result, error) {
	def, _, ok := c.o.Teams.Check(k.Project, name)
	if !ok {
		return Result{}, fmt.Errorf("run check %s: project %s has no check %q in its approved team ([checks] in .troupe/team.toml; a new check waits for your approval: troupe team diff): %w",
			name, k.Project, name, troupe.ErrNotFound)
	}
	spec, dir, ok := c.o.Teams.Agent(k)
	if !ok {
		return Result{}, fmt.Errorf("run check %s: %w", name, troupe.NoAgent(k.Agent, nil))
	}
	if spec.Remote() {
		where := string(spec.Runner)
		if where == "" {
			where = "a runner with labels " + strings.Join(spec.RunnerLabels, ", ")
		}
		return Result{}, fmt.Errorf("run check %s: agent %s runs on runner %s, and checks run on the daemon's machine only: its checks are not run yet: %w", name, k.Agent, where, troupe.ErrConflict)
	}
	release, err := c.slot(ctx, k.Project)
	if err != nil {
		return Result{}, fmt.Errorf("run check %s: wait for a slot (project %s runs %d checks at once): %w", name, k.Project, c.o.MaxPerProject, err)
	}
	defer release()

	if turn == "" {
		turn = c.latestTurn(ctx, k)
	}
	r := Result{Project: k.Project, Agent: k.Agent, Check: name, Command: def.Command, Dir: def.Dir,
		ExitCode: -1, Turn: turn, StartedAt: time.Now().UTC()}
	c.run(ctx, k, spec, dir, def, &r)
	r.DurationMS = time.Since(r.StartedAt).Milliseconds()
	r.Reason, _ = clip.Ellipsis(r.Reason, maxReason)
	stored, err := c.o.Store.AddCheckResult(context.WithoutCancel(ctx), r)
	if err != nil {
		return r, fmt.Errorf("record check %s of %s: %w", name, k.Agent, err)
	}
	c.log.Info("check ran", "project", k.Project, "agent", k.Agent, "check", name, "state", stored.State,
		"exit_code", stored.ExitCode, "duration_ms", stored.DurationMS, "turn", stored.Turn)
	if c.o.Publish != nil {
		c.o.Publish(stored)
	}
	return stored, nil
}

// run runs def on agent k's workspace and fills r with how it went.
func (c *Checker) run(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string, def troupe.Check, r *Result) {
	fail := func(err error) { r.State, r.Reason = troupe.CheckError, err.Error() }
	work := dir
	if c.o.Workspace != nil {
		w, err := c.o.Workspace(ctx, k, spec, dir)
		if err != nil {
			fail(fmt.Errorf("make workspace of %s: %w", k.Agent, err))
			return
		}
		work = w
	}
	var policy *sandbox.Policy
	if c.o.Sandbox != nil {
		p, err := c.o.Sandbox(ctx, k, spec, dir, work)
		if err != nil {
			fail(fmt.Errorf("make sandbox of %s: %w", k.Agent, err))
			return
		}
		if p.On {
			policy = &p
		}
	}
	// The job's folder is resolved to its real path, which must stay in
	// the workspace (task.RunOwn): a dir that links out is refused.
	e, err := c.o.Tasks.RunOwn(ctx, k, work, task.Job{Command: def.Command, Cwd: def.Dir,
		Timeout: cmp.Or(def.Timeout, troupe.DefaultCheckTimeout), MaxOutput: maxOutputKept, Sandbox: policy}, MaxOutput)
	if err != nil {
		fail(err)
		return
	}
	res := e.Result
	r.ExitCode, r.Reason = res.ExitCode, res.Reason
	r.Output = strings.ToValidUTF8(string(e.Tail), "\uFFFD")
	r.OutputBytes = e.Output.Total
	if e.Output.Total > int64(len(e.Tail)) {
		r.OutputCut = fmt.Sprintf("the check wrote %d bytes of output; the last %d are kept here", e.Output.Total, len(e.Tail))
	}
	switch {
	case res.State == task.Exited && res.ExitCode == 0:
		r.State = troupe.CheckPassed
	case res.State == task.Exited:
		r.State = troupe.CheckFailed
	case res.State == task.TimedOut:
		r.State = troupe.CheckTimedOut
		if r.Reason == "" {
			r.Reason = fmt.Sprintf("it ran past its timeout of %v and was stopped", def.Timeout)
		}
	case res.State == task.Failed && res.Signal != "":
		r.State = troupe.CheckFailed // a signal nobody in troupe sent: the command crashed
	case res.State == task.Killed && ctx.Err() != nil:
		r.State, r.Reason = troupe.CheckError, "the run was cancelled before the check ended"
	default:
		r.State = troupe.CheckError
	}
	if e.Stopped != nil {
		if s := e.Stopped.Statement(); s != "" {
			r.Reason = strings.TrimPrefix(r.Reason+"; "+s, "; ")
		}
	}
}

// latestTurn is agent k's newest turn; "" when it has none or the journal
// cannot say.
func (c *Checker) latestTurn(ctx context.Context, k troupe.RuntimeKey) troupe.TurnID {
	if c.o.Journal == nil {
		return ""
	}
	ts, err := c.o.Journal.Turns(ctx, k, 0, 1)
	if err != nil {
		if !errors.Is(err, troupe.ErrNotFound) {
			c.log.Warn("read the agent's latest turn for a check", "project", k.Project, "agent", k.Agent, "err", err)
		}
		return ""
	}
	if len(ts) == 0 {
		return ""
	}
	return ts[0].ID
}

// slot takes one of project p's run slots, waiting for one while ctx
// lasts; release gives it back.
func (c *Checker) slot(ctx context.Context, p troupe.ProjectID) (release func(), err error) {
	c.mu.Lock()
	ch, ok := c.slots[p]
	if !ok {
		ch = make(chan struct{}, c.o.MaxPerProject)
		c.slots[p] = ch
	}
	c.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Results lists the results f selects, newest first.
func (c *Checker) Results(ctx context.Context, f Filter) ([]Result, error) {
	rs, err := c.o.Store.CheckResults(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list check results: %w", err)
	}
	return rs, nil
}

// Checks lists the checks in force of project p, when Teams can list
// them.
func (c *Checker) Checks(p troupe.ProjectID) []troupe.Check {
	if l, ok := c.o.Teams.(interface {
		Checks(troupe.ProjectID) []troupe.Check
	}); ok {
		return l.Checks(p)
	}
	return nil
}

// CheckResult validates r as Store.AddCheckResult does.
func CheckResult(r Result) error {
	switch {
	case r.Project == "" || r.Agent == "" || r.Check == "":
		return fmt.Errorf("check result: project, agent and check are required: %w", troupe.ErrInvalid)
	case r.State == "":
		return fmt.Errorf("check result: a state is required: %w", troupe.ErrInvalid)
	}
	return nil
}

// Limit applies Filter's rule to a limit.
func Limit(n int) int {
	if n <= 0 || n > MaxResultsPerAgent {
		return MaxResultsPerAgent
	}
	return n
}
