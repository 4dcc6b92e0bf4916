package task

import (
	"context"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// ID identifies a task. It is unique across projects; every lookup from
// outside the package is still scoped by project (contract C1).
type ID string

// State is where a task is in its life.
type State string

// Task states. Every state but Running is final.
const (
	Running  State = "running"
	Exited   State = "exited"    // the command exited by itself; ExitCode holds its status
	Failed   State = "failed"    // it could not start, or a signal nobody in troupe sent ended it
	Killed   State = "killed"    // ended on request (Manager.Kill, task_kill)
	TimedOut State = "timed_out" // ended by its timeout
	Lost     State = "lost"      // the supervisor vanished without recording the end
)

// Final reports whether s is an end state.
func (s State) Final() bool {
	switch s {
	case Exited, Failed, Killed, TimedOut, Lost:
		return true
	}
	return false
}

// From is the sender of completion messages.
const From troupe.AgentID = "@task"

// MaxTimeout is the longest timeout a task may have.
const MaxTimeout = 24 * time.Hour

// Task is a background shell job and, once it ended, how.
type Task struct {
	ID      ID               `json:"id"`
	Project troupe.ProjectID `json:"project"`
	Owner   troupe.AgentID   `json:"owner"` // an agent of Project, or troupe.Person
	Command string           `json:"command"`
	Cwd     string           `json:"cwd"`     // resolved real path, inside the project folder
	Timeout time.Duration    `json:"timeout"` // 0: none
	// Runner is the runner the task runs on (its owner's, internal/remote):
	// its supervisor, folder and output are there, its end comes from
	// there (Options.Remote); "" on this machine. Cwd is then relative to
	// the owner's worktree on the runner.
	Runner   string `json:"runner,omitempty"`
	State    State  `json:"state"`
	ExitCode int    `json:"exit_code"`        // -1 when the job did not exit by itself
	Signal   string `json:"signal,omitempty"` // e.g. "SIGTERM", when a signal ended the job
	Reason   string `json:"reason,omitempty"` // why it failed, was killed or was lost
	// StartedAt is when the Manager started the supervisor; EndedAt when
	// the job ended (zero while running).
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// The supervisor's pid and its start time (field 22 of /proc/<pid>/stat,
	// clock ticks since boot): together they survive pid reuse.
	SupervisorPID   int    `json:"supervisor_pid"`
	SupervisorStart uint64 `json:"supervisor_start"`
	// Notified: the completion message was recorded (queued for an agent,
	// delivered for the person). It is set with the end, in one transaction.
	Notified bool `json:"notified"`
	// Stopped is what the supervisor stopped of the task when its job
	// ended (leftover processes), and Output the size of its output and
	// its cut: both read from the task's folder by Manager.Task and
	// Manager.Tasks (never stored), nil when there is none, or no folder.
	Stopped *Stopped    `json:"stopped,omitempty"`
	Output  *OutputSize `json:"output,omitempty"`
	// MessageID is the completion message's id in the owner's inbox; 0
	// while running.
	MessageID int64 `json:"-"`
}

// Key is the RuntimeKey of the task's owner.
func (t Task) Key() troupe.RuntimeKey { return troupe.RuntimeKey{Project: t.Project, Agent: t.Owner} }

// Result is how a task ended.
type Result struct {
	State    State     `json:"state"` // a final state
	ExitCode int       `json:"exit_code"`
	Signal   string    `json:"signal,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	EndedAt  time.Time `json:"ended_at"` // the store sets it to now when zero
}

// Store keeps tasks durably (contract C6). Every method is one transaction.
// Implementations must be safe for concurrent use.
type Store interface {
	// CreateTask records a new task. Its State must be Running (or empty,
	// meaning Running) and ID, Project, Owner and Command set, else the
	// error matches troupe.ErrInvalid; an ID already recorded fails with
	// troupe.ErrAlreadyExists. A zero StartedAt is set to now.
	CreateTask(ctx context.Context, t Task) error
	// Task returns task id of project p; troupe.ErrNotFound when the id is
	// unknown or belongs to another project.
	Task(ctx context.Context, p troupe.ProjectID, id ID) (Task, error)
	// Tasks lists the tasks of project p in the order they were created.
	Tasks(ctx context.Context, p troupe.ProjectID) ([]Task, error)
	// RunningTasks lists every running task of every project.
	RunningTasks(ctx context.Context) ([]Task, error)
	// CompleteTask records end for a running task, with the id of its
	// completion message, already in the owner's inbox (the Manager
	// appends it first, see Inbox), and sets Notified, exactly once: it
	// returns done == true. A task that is no longer running is left as it
	// is: done == false. An unknown id fails with troupe.ErrNotFound; an
	// end state that is not final, or a message id that is not positive,
	// with troupe.ErrInvalid.
	CompleteTask(ctx context.Context, id ID, end Result, msgID int64) (done bool, err error)
}

// Inbox is where the Manager appends completion messages; the daemon's
// inbox store (inbox.Store) satisfies it. AppendOnce stores m once per
// idempotency key and project: a later call with the same key stores
// nothing and returns the message the first one stored, as it is now, with
// added == false. It must be safe for concurrent use.
type Inbox interface {
	AppendOnce(ctx context.Context, key string, m troupe.Message) (stored troupe.Message, added bool, err error)
}

// Ended is a task's end as a Manager reports it to a Reporter (and a
// daemon's Manager takes it from a runner, CompleteRemote): the task, how
// it ended, what its supervisor stopped, the size and the last bytes of
// its output (at most 4×messageBytes, what the completion message
// quotes).
type Ended struct {
	Task    Task       `json:"task"`
	Result  Result     `json:"result"`
	Stopped *Stopped   `json:"stopped,omitempty"`
	Output  OutputSize `json:"output"`
	Tail    []byte     `json:"tail,omitempty"`
}

// Reporter takes the ends of a Manager's tasks in place of its Inbox: a
// runner's Manager hands them to its link to the daemon (internal/remote),
// which posts the message on the daemon under the same key. Report keeps
// e once per key (a later call with the same key keeps nothing and
// returns added == false) and returns the id it gave it (positive: the
// Store records it as the completion's message id). It must be safe for
// concurrent use.
type Reporter interface {
	Report(ctx context.Context, key string, e Ended) (id int64, added bool, err error)
}

// Remote runs the tasks of agents that run on runners (internal/remote's
// daemon side): the daemon keeps their rows, the runner runs them and
// sends their ends back (Manager.CompleteRemote). Errors name the runner.
type Remote interface {
	// RunnerOf is the runner agent k's session runs on now; an error
	// saying why when it has none.
	RunnerOf(k troupe.RuntimeKey) (string, error)
	// Start asks t.Runner to run j as task t (its id, owner and command
	// set); nil once the runner recorded and started it.
	Start(ctx context.Context, t Task, j Job) error
	// Kill asks t.Runner to stop task t (as Manager.Kill does).
	Kill(ctx context.Context, t Task) error
	// Output reads the end of task t's output on t.Runner (as
	// Manager.ReadOutput does).
	Output(ctx context.Context, t Task, maxBytes int) (string, OutputSize, error)
}
