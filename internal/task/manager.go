package task

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// DefaultMaxPerProject is how many tasks a project may run at once when
// Options.MaxPerProject is 0.
const DefaultMaxPerProject = 8

// Default bounds of the task folders one project keeps (Options.FolderBytes,
// Options.Folders).
const (
	DefaultFolderBytes int64 = 1 << 30
	DefaultFolders           = 256
)

// storeTimeout bounds a store call made after Run's context ended (the end
// of a task seen just before a stop is still recorded).
const storeTimeout = 30 * time.Second

// inheritedEnv lists the variables a job (and a supervisor) gets from the
// daemon's environment; everything else comes from Options.Env.
var inheritedEnv = []string{"PATH", "HOME", "LANG", "TMPDIR"}

// defaultPath is the job's PATH when the daemon has none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// Options configures New. Store, Inbox and Dir are required; zero values
// of the other fields mean defaults.
type Options struct {
	// Store records tasks.
	Store Store
	// Inbox receives completion messages.
	Inbox Inbox
	// Reporter, if set, takes the tasks' ends instead of Inbox (a
	// runner's Manager; Inbox may then be nil).
	Reporter Reporter
	// Remote, if set, runs the tasks of owners on runners (Job.Remote);
	// without it such a task is refused.
	Remote Remote
	// Dir holds one directory per task (<state dir>/tasks). It is created
	// (0700) when missing.
	Dir string
	// Supervisor is the argv that starts a supervisor; the task directory
	// is appended. Default: this executable with "task-supervise". Tests
	// use TestSupervisorCommand.
	Supervisor []string
	// MaxPerProject bounds the running tasks of one project. Default 8.
	MaxPerProject int
	// Env is added to every job's environment, "KEY=VALUE" each, after
	// PATH, HOME, LANG and TMPDIR taken from the daemon's environment.
	Env []string
	// KillGrace is how long a job has between SIGTERM and SIGKILL on a
	// timeout or a kill. Default 5 s.
	KillGrace time.Duration
	// Retention is how long a task's folder (its output) is kept after it
	// ended; Run prunes older ones when it starts. Default 7 days; negative:
	// forever.
	Retention time.Duration
	// MaxOutput is the output a task keeps when Start is given no cap:
	// its first half and its last half. Default DefaultMaxOutput (64 MB).
	MaxOutput int64
	// FolderBytes and Folders bound the task folders one project keeps
	// (their output above all): when a task starts or ends over either,
	// the folders of the project's oldest ended tasks are removed first.
	// Defaults DefaultFolderBytes (1 GB) and DefaultFolders (256).
	FolderBytes int64
	Folders     int
	// Logger receives task events. Nil discards them.
	Logger *slog.Logger
}

// Manager starts background tasks and reports their ends. See the package
// doc for its goroutines and locks.
type Manager struct {
	store      Store
	inbox      Inbox
	reporter   Reporter
	remote     Remote
	dir        string
	supervisor []string
	notify     func(troupe.Message)
	changed    func(Task) // OnChange
	max        int
	jobEnv     []string
	supEnv     []string
	grace      time.Duration
	retention  time.Duration // <0: forever
	maxOutput  int64
	folderMax  int64
	foldersMax int
	log        *slog.Logger

	// startMu serializes Start: the per-project count and the new row are
	// one step.
	startMu sync.Mutex

	// mu guards live, ctx, watching, starting and notify, and orders wg.Go before
	// wg.Wait.
	mu       sync.Mutex
	live     bool            // Run is running
	ctx      context.Context // Run's context, while live
	watching map[ID]bool     // tasks with a watcher
	starting map[ID]bool     // tasks being started on their runners (startRemote)
	wg       sync.WaitGroup  // the watchers

	adopted func() // tests: called once Run has given every running task a watcher
}

// LimitError reports a Start refused because the project runs as many
// tasks as allowed.
type LimitError struct {
	Project troupe.ProjectID
	Limit   int
}

// Unwrap makes a LimitError match troupe.ErrInvalid: the caller can act on it.
func (e *LimitError) Unwrap() error { return troupe.ErrInvalid }

func (e *LimitError) Error() string {
	return fmt.Sprintf("project %s already runs %d background tasks, the most one project may run at once (the per-project task limit): wait for one to end or kill one", e.Project, e.Limit)
}

// New returns a Manager. It panics when Store, Inbox (or Reporter) or
// Dir is missing: that is a wiring mistake, not a run-time condition.
func New(o Options) *Manager {
	if o.Store == nil || (o.Inbox == nil && o.Reporter == nil) || o.Dir == "" {
		panic("task.New: Options.Store, Options.Inbox (or Reporter) and Options.Dir are required")
	}
	m := &Manager{
		store:      o.Store,
		inbox:      o.Inbox,
		reporter:   o.Reporter,
		remote:     o.Remote,
		dir:        o.Dir,
		supervisor: o.Supervisor,
		max:        o.MaxPerProject,
		grace:      o.KillGrace,
		retention:  o.Retention,
		maxOutput:  o.MaxOutput,
		folderMax:  o.FolderBytes,
		foldersMax: o.Folders,
		log:        o.Logger,
		watching:   make(map[ID]bool),
		starting:   make(map[ID]bool),
	}
	if len(m.supervisor) == 0 {
		exe, err := os.Executable()
		if err != nil {
			exe = os.Args[0]
		}
		m.supervisor = []string{exe, "task-supervise"}
	}
	if m.max <= 0 {
		m.max = DefaultMaxPerProject
	}
	if m.grace <= 0 {
		m.grace = defaultGrace
	}
	if m.maxOutput <= 0 {
		m.maxOutput = DefaultMaxOutput
	}
	if m.folderMax <= 0 {
		m.folderMax = DefaultFolderBytes
	}
	if m.foldersMax <= 0 {
		m.foldersMax = DefaultFolders
	}
	if m.retention == 0 {
		m.retention = 7 * 24 * time.Hour
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	for _, k := range inheritedEnv {
		v, ok := os.LookupEnv(k)
		if !ok && k == "PATH" {
			v, ok = defaultPath, true
		}
		if ok {
			m.jobEnv = append(m.jobEnv, k+"="+v)
			m.supEnv = append(m.supEnv, k+"="+v)
		}
	}
	// Last wins on a duplicate key (os/exec), so Options.Env overrides.
	m.jobEnv = append(m.jobEnv, o.Env...)
	// The supervisor is a Go program (troupe or a test binary): unless
	// GORACE is set, a race-enabled one is told not to pause 1 s at exit,
	// which would delay every completion.
	gorace := "atexit_sleep_ms=0"
	if v, ok := os.LookupEnv("GORACE"); ok {
		gorace = v
	}
	m.supEnv = append(m.supEnv, "GORACE="+gorace, SupervisorEnv+"=1")
	return m
}

// Run watches tasks until ctx ends. It first adopts every task the store
// says is running (see the package doc), then watches every task Start
// starts. When ctx ends it stops its watchers and returns nil; supervisors
// keep running. It fails only when the running tasks cannot be listed, or
// when Run is already running.
func (m *Manager) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m.mu.Lock()
	if m.live {
		m.mu.Unlock()
		return errors.New("run task manager: already running")
	}
	m.live, m.ctx = true, ctx
	m.mu.Unlock()

	err := m.adopt(ctx)
	if err == nil {
		m.prune()
		if m.adopted != nil {
			m.adopted()
		}
		<-ctx.Done()
	}
	m.mu.Lock()
	m.live, m.ctx = false, nil
	m.mu.Unlock()
	cancel()
	m.wg.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("run task manager: %w", err)
	}
	return nil
}

// adopt watches every task recorded as running.
func (m *Manager) adopt(ctx context.Context) error {
	ts, err := m.store.RunningTasks(ctx)
	if err != nil {
		return fmt.Errorf("adopt running tasks: %w", err)
	}
	n := 0
	for _, t := range ts {
		if t.Runner != "" {
			continue // its supervisor is on its runner, which reports its end
		}
		m.track(t, nil)
		n++
	}
	if n > 0 {
		m.log.Info("adopted running tasks", "count", n)
	}
	return nil
}

// OnChange sets a function called when a task started (State Running)
// and when its end was recorded, to publish the change (the daemon's event
// feed). It is called on the caller's or a watcher goroutine and should
// not block. Call it before Run.
func (m *Manager) OnChange(fn func(Task)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.changed = fn
}

// OnComplete sets the function called once per completion, after the
// store recorded it, with the stored message: queued for an agent owner
// (the runtime wakes it), already delivered for troupe.Person. A
// completion whose message an earlier daemon appended before it died is
// notified only if the message is still queued. It is called from a
// watcher goroutine and should not block for long. A setter, not an
// option: its caller (the runtime, whose tools include the Manager's) is
// built after the Manager. Call it before Run.
func (m *Manager) OnComplete(fn func(troupe.Message)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notify = fn
}

// Kill asks task id of project p to stop: its supervisor sends SIGTERM to
// the job's process group, then SIGKILL after the grace, and the task ends
// as killed. Kill does not wait for that; the end is reported like any
// other. A task that already ended fails with an error matching
// troupe.ErrInvalid; an unknown id (or one of another project) with
// troupe.ErrNotFound.
func (m *Manager) Kill(ctx context.Context, p troupe.ProjectID, id ID) error {
	t, err := m.store.Task(ctx, p, id)
	if err != nil {
		return fmt.Errorf("kill task %s: %w", id, err)
	}
	if t.State != Running {
		return fmt.Errorf("kill task %s: it already ended (%s): %w", id, t.State, troupe.ErrInvalid)
	}
	if t.Runner != "" {
		if m.remote == nil {
			return fmt.Errorf("kill task %s: it runs on runner %s and this daemon has no runners' link", id, t.Runner)
		}
		if err := m.remote.Kill(ctx, t); err != nil {
			return fmt.Errorf("kill task %s: %w", id, err)
		}
		m.log.Info("task kill requested", "task", id, "project", p, "runner", t.Runner)
		return nil
	}
	fd, err := attachProcess(t.SupervisorPID, t.SupervisorStart)
	if err != nil {
		return fmt.Errorf("kill task %s: %w", id, err)
	}
	if fd == nil {
		return nil // the supervisor is gone: its end is being recorded
	}
	defer fd.Close()
	// The request is on disk first: a supervisor still starting may not
	// catch the signal yet (see supervise.go).
	if err := os.WriteFile(filepath.Join(m.taskDir(id), killFile), nil, 0o600); err != nil {
		return fmt.Errorf("kill task %s: %w", id, err)
	}
	if err := fd.Signal(unix.SIGTERM); err != nil {
		return fmt.Errorf("kill task %s: signal supervisor %d: %w", id, t.SupervisorPID, err)
	}
	m.log.Info("task kill requested", "task", id, "project", p)
	return nil
}

// Output returns the last maxBytes bytes of the output task id of
// project p kept (stdout and stderr, interleaved as written), reading only
// those bytes whatever the output's size. When they span the cut of an
// output past its cap, a line in them states the cut. maxBytes ≤ 0 means
// DefaultOutput; it is capped at MaxOutput.
func (m *Manager) Output(ctx context.Context, p troupe.ProjectID, id ID, maxBytes int) (string, error) {
	out, _, err := m.ReadOutput(ctx, p, id, maxBytes)
	return out, err
}

// ReadOutput is Output with the size of the task's output and its cut.
// A task on a runner is read there (Options.Remote).
func (m *Manager) ReadOutput(ctx context.Context, p troupe.ProjectID, id ID, maxBytes int) (string, OutputSize, error) {
	t, err := m.store.Task(ctx, p, id)
	if err != nil {
		return "", OutputSize{}, fmt.Errorf("read task output %s: %w", id, err)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultOutput
	}
	maxBytes = min(maxBytes, MaxOutput)
	if t.Runner != "" {
		if m.remote == nil {
			return "", OutputSize{}, fmt.Errorf("read task output %s: it runs on runner %s and this daemon has no runners' link", id, t.Runner)
		}
		out, size, err := m.remote.Output(ctx, t, maxBytes)
		if err != nil {
			return "", size, fmt.Errorf("read task output %s: %w", id, err)
		}
		return strings.ToValidUTF8(out, "\uFFFD"), size, nil
	}
	b, size, err := readOutput(m.taskDir(id), maxBytes)
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(m.taskDir(id)); errors.Is(err, fs.ErrNotExist) {
			return "", size, fmt.Errorf("read task output %s: its output is no longer kept (a project keeps the folders of ended tasks %v, %s and %d folders at most, the oldest removed first)",
				id, m.retention, humanBytes(m.folderMax), m.foldersMax)
		}
		return "", size, nil // not started yet
	}
	if err != nil {
		return "", size, fmt.Errorf("read task output %s: %w", id, err)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), size, nil
}

// describe adds to t what its folder says: what its supervisor stopped and
// the size of its output. Both go with the folder.
func (m *Manager) describe(t *Task) {
	dir := m.taskDir(t.ID)
	if st, err := readStatus(dir); err == nil {
		t.Stopped = st.Stopped
	}
	t.Output = outputSize(dir)
}

// Task returns task id of project p (troupe.ErrNotFound when it is unknown
// or belongs to another project).
func (m *Manager) Task(ctx context.Context, p troupe.ProjectID, id ID) (Task, error) {
	t, err := m.store.Task(ctx, p, id)
	if err != nil {
		return Task{}, fmt.Errorf("show task %s: %w", id, err)
	}
	m.describe(&t)
	return t, nil
}

// Tasks lists the tasks of project p, oldest first.
func (m *Manager) Tasks(ctx context.Context, p troupe.ProjectID) ([]Task, error) {
	ts, err := m.store.Tasks(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	for i := range ts {
		m.describe(&ts[i])
	}
	return ts, nil
}
