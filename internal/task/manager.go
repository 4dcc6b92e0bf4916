package task

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/atomicfile"
	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/pidfd"
	"github.com/troupe-dev/troupe/internal/procstat"
	"github.com/troupe-dev/troupe/internal/sandbox"
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

	// mu guards live, ctx, watching and notify, and orders wg.Go before
	// wg.Wait.
	mu       sync.Mutex
	live     bool            // Run is running
	ctx      context.Context // Run's context, while live
	watching map[ID]bool     // tasks with a watcher
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

// New returns a Manager. It panics when Store, Inbox or Dir is missing:
// that is a wiring mistake, not a run-time condition.
func New(o Options) *Manager {
	if o.Store == nil || o.Inbox == nil || o.Dir == "" {
		panic("task.New: Options.Store, Options.Inbox and Options.Dir are required")
	}
	m := &Manager{
		store:      o.Store,
		inbox:      o.Inbox,
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

// prune removes the folders (spec, output, status) of tasks that ended
// longer ago than the retention; their rows stay, their output goes.
func (m *Manager) prune() {
	if m.retention < 0 {
		return
	}
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) { // no task ever ran
			m.log.Warn("list task folders", "err", err)
		}
		return
	}
	cutoff := time.Now().Add(-m.retention)
	n := 0
	for _, e := range entries {
		st, err := os.Stat(filepath.Join(m.dir, e.Name(), statusFile))
		if err != nil || st.ModTime().After(cutoff) {
			continue // running, or ended recently
		}
		if err := os.RemoveAll(filepath.Join(m.dir, e.Name())); err != nil {
			m.log.Warn("prune task folder", "task", e.Name(), "err", err)
			continue
		}
		n++
	}
	if n > 0 {
		m.log.Info("pruned the folders of old tasks", "count", n, "retention", m.retention)
	}
}

// adopt watches every task recorded as running.
func (m *Manager) adopt(ctx context.Context) error {
	ts, err := m.store.RunningTasks(ctx)
	if err != nil {
		return fmt.Errorf("adopt running tasks: %w", err)
	}
	for _, t := range ts {
		m.track(t, nil)
	}
	if len(ts) > 0 {
		m.log.Info("adopted running tasks", "count", len(ts))
	}
	return nil
}

// supervisorProc is a supervisor this Manager started: its pidfd, and the
// *os.Process that reads its exit status.
type supervisorProc struct {
	fd   *pidfd.Process
	proc *os.Process
	gate *os.File // write end of the supervisor's start gate (its fd 3); nil once opened
}

// open lets the supervisor run its job: the task is recorded.
func (s *supervisorProc) open() error {
	_, err := s.gate.Write([]byte(gateGo))
	return errors.Join(err, s.closeGate())
}

func (s *supervisorProc) closeGate() error {
	if s.gate == nil {
		return nil
	}
	err := s.gate.Close()
	s.gate = nil
	return err
}

// release drops the handles without waiting: the next Run adopts the
// supervisor by pid.
func (s *supervisorProc) release() {
	s.fd.Close()
	s.proc.Release()
}

// track gives task t a watcher, unless it has one or Run is not running.
// sup is the supervisor Start just started, nil for a task to adopt.
func (m *Manager) track(t Task, sup *supervisorProc) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.live || m.watching[t.ID] {
		if sup != nil {
			sup.release()
		}
		return
	}
	m.watching[t.ID] = true
	ctx := m.ctx
	m.wg.Go(func() {
		defer func() {
			m.mu.Lock()
			delete(m.watching, t.ID)
			m.mu.Unlock()
		}()
		m.watch(ctx, t, sup)
	})
}

// watch waits for the end of t's supervisor, then completes t. It returns
// without completing t when ctx ends first.
func (m *Manager) watch(ctx context.Context, t Task, sup *supervisorProc) {
	log := m.log.With("task", t.ID, "project", t.Project, "agent", t.Owner)
	var (
		fd   *pidfd.Process
		proc *os.Process
	)
	if sup != nil {
		fd, proc = sup.fd, sup.proc
	} else {
		var err error
		if fd, err = attachProcess(t.SupervisorPID, t.SupervisorStart); err != nil {
			// Not "gone": the kernel refused a handle (fd limit…). The
			// task stays running in the store; the next Run retries.
			log.Error("watch task: cannot watch its supervisor", "pid", t.SupervisorPID, "err", err)
			return
		}
	}
	var (
		res  Result
		left *Stopped
	)
	if fd == nil {
		res, left = m.result(t, nil, true)
	} else {
		err := fd.Wait(ctx)
		if err != nil {
			fd.Close()
			if proc != nil {
				proc.Release()
			}
			if ctx.Err() == nil {
				log.Error("watch task", "err", err)
			}
			return
		}
		var how *os.ProcessState
		if proc != nil {
			// It exited: Wait returns at once, with its status.
			how, _ = proc.Wait()
		} else {
			fd.Reap()
		}
		fd.Close()
		res, left = m.result(t, how, false)
	}
	m.finish(ctx, log, t, res, left)
}

// result is how t ended: its status file, or lost with the reason, and
// what its supervisor stopped of it. how is the supervisor's exit status
// when known (nil otherwise); vanished says it was gone before the watch
// began.
func (m *Manager) result(t Task, how *os.ProcessState, vanished bool) (Result, *Stopped) {
	dir := m.taskDir(t.ID)
	st, err := readStatus(dir)
	if err == nil {
		return st.result(), st.Stopped
	}
	if errors.Is(err, fs.ErrNotExist) && exists(filepath.Join(dir, killFile)) && !exists(filepath.Join(dir, outputFile)) {
		// Kill's SIGTERM ended the supervisor before it caught signals;
		// the job never started.
		killSession(t.SupervisorPID, t.SupervisorStart)
		return Result{State: Killed, ExitCode: -1, Reason: killedBeforeStart, EndedAt: time.Now().UTC()}, nil
	}
	if how != nil && how.ExitCode() == exitNoSpace {
		// The disk was full even for its reserved blocks: the task failed
		// for want of space, it is not lost.
		reason := noSpaceReason(statusFile)
		if n := killSession(t.SupervisorPID, t.SupervisorStart); n > 0 {
			reason += fmt.Sprintf("; %d leftover processes of the task were killed", n)
		}
		return Result{State: Failed, ExitCode: -1, Reason: reason, EndedAt: time.Now().UTC()}, nil
	}
	var reason string
	hows := ""
	if how != nil {
		hows = how.String()
	}
	if vanished {
		reason = "the supervisor vanished while the daemon was down"
	} else {
		reason = fmt.Sprintf("the supervisor (pid %d) died", t.SupervisorPID)
		if hows != "" {
			reason += " (" + hows + ")"
		}
		reason += " without recording how the task ended"
	}
	if b, lerr := tailFile(filepath.Join(dir, supervisorLog), 512); lerr == nil {
		if line := lastLines(b, 1, 300); strings.TrimSpace(line) != "" {
			reason += ": " + strings.TrimSpace(line)
		}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		reason += fmt.Sprintf(" (%v)", err)
	}
	if n := killSession(t.SupervisorPID, t.SupervisorStart); n > 0 {
		reason += fmt.Sprintf("; %d leftover processes of the task were killed", n)
	}
	return Result{State: Lost, ExitCode: -1, Reason: reason, EndedAt: time.Now().UTC()}, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func readStatus(dir string) (status, error) {
	var st status
	b, err := os.ReadFile(filepath.Join(dir, statusFile))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("read task status: %w", err)
	}
	if !st.State.Final() {
		return st, fmt.Errorf("read task status: state %q is not final", st.State)
	}
	return st, nil
}

// finish records t's end and its completion message, and notifies.
// left is what the supervisor stopped of it.
func (m *Manager) finish(ctx context.Context, log *slog.Logger, t Task, res Result, left *Stopped) {
	out, size, err := readOutput(m.taskDir(t.ID), 4*messageBytes)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("read task output", "err", err)
	}
	if res.EndedAt.IsZero() {
		res.EndedAt = time.Now().UTC()
	}
	// The end is recorded even when Run is stopping: it was seen.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	msg, notify, err := m.complete(sctx, log, t, res, completionText(t, res, left, size, out))
	if err != nil {
		// The task stays running in the store: the next Run completes it
		// from its status file, and the message key keeps its message
		// single.
		log.Error("complete task", "err", err)
	}
	m.mu.Lock()
	fn, changed := m.notify, m.changed
	m.mu.Unlock()
	if notify && fn != nil {
		fn(msg)
	}
	if changed != nil && err == nil {
		ended := t
		ended.State, ended.ExitCode, ended.Signal, ended.Reason, ended.EndedAt = res.State, res.ExitCode, res.Signal, res.Reason, res.EndedAt
		ended.Stopped = left
		changed(ended)
	}
	m.pruneProject(sctx, t.Project, t.ID) // its own output stays readable
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

// complete records how t ended, in two steps of one transaction each:
// post appends the completion message to the owner's inbox under the key
// task:<id>, then the task row records the end with the message's id. A
// daemon that dies between the two finds the task still running at its
// next start, adopts it, sees its status file, and completes it again: the
// key makes the message exactly-once.
//
// notify says whether to tell the runtime, so that one call per completion
// does: the call that recorded the end, when it stored the message or
// finds it still queued (stored by a daemon that died before the second
// step; its Recover woke the owner too, and a second wake is harmless);
// and the call that stored the message when the second step failed, since
// the message waits in the inbox while the task stays running until the
// next start.
func (m *Manager) complete(ctx context.Context, log *slog.Logger, t Task, res Result, text string) (msg troupe.Message, notify bool, err error) {
	msg, added, err := m.post(ctx, t, text)
	if err != nil {
		return troupe.Message{}, false, err
	}
	done, err := m.store.CompleteTask(ctx, t.ID, res, msg.ID)
	switch {
	case err != nil:
		return msg, added, err
	case !done:
		log.Debug("task already completed")
		return msg, false, nil
	}
	log.Info("task ended", "state", res.State, "exit_code", res.ExitCode, "signal", res.Signal, "reason", res.Reason)
	return msg, added || msg.State == troupe.MsgQueued, nil
}

// post appends t's completion message, once per task whatever calls it
// (CompletionKey).
func (m *Manager) post(ctx context.Context, t Task, text string) (troupe.Message, bool, error) {
	msg := troupe.Message{Project: t.Project, To: t.Owner, From: From, Kind: troupe.KindTask, Text: text}
	stored, added, err := m.inbox.AppendOnce(ctx, CompletionKey(t.ID), msg)
	if err != nil {
		return troupe.Message{}, false, fmt.Errorf("complete task %s: %w", t.ID, err)
	}
	return stored, added, nil
}

// CompletionKey is the idempotency key of task id's completion message.
func CompletionKey(id ID) string { return "task:" + string(id) }

func (m *Manager) taskDir(id ID) string { return filepath.Join(m.dir, string(id)) }

// Job is what Start runs.
type Job struct {
	Command string        // a shell command, run with /bin/sh -c
	Cwd     string        // relative to the project folder (its default); must resolve inside it
	Timeout time.Duration // 0: none; at most MaxTimeout
	// MaxOutput caps the output kept (its first half and its last half);
	// 0: the Manager's default (Options.MaxOutput).
	MaxOutput int64
	// Sandbox, if set and on, is the owner's sandbox: the job runs in it
	// (its supervisor does not: it writes the task's files in the state
	// dir). An agent's tasks get it; the person's do not unless asked.
	Sandbox *sandbox.Policy
}

// Start starts j for owner in the project folder projectDir and returns
// the running task. Bad arguments fail with errors matching
// troupe.ErrInvalid; a project at its limit with a *LimitError; a full
// disk with an error that says so (ErrNoSpace), leaving nothing behind.
func (m *Manager) Start(ctx context.Context, owner troupe.RuntimeKey, projectDir string, j Job) (Task, error) {
	command, timeout := j.Command, j.Timeout
	switch {
	case !owner.Valid():
		return Task{}, fmt.Errorf("start task: owner %q is not an agent of a project: %w", owner.String(), troupe.ErrInvalid)
	case strings.TrimSpace(command) == "":
		return Task{}, fmt.Errorf("start task: empty command: give the shell command to run: %w", troupe.ErrInvalid)
	case strings.ContainsRune(command, 0):
		return Task{}, fmt.Errorf("start task: the command holds a NUL byte: %w", troupe.ErrInvalid)
	case timeout < 0 || timeout > MaxTimeout:
		return Task{}, fmt.Errorf("start task: bad timeout %v: give one from 0 (none) to %v: %w", timeout, MaxTimeout, troupe.ErrInvalid)
	case j.MaxOutput != 0 && (j.MaxOutput < MinMaxOutput || j.MaxOutput > MaxMaxOutput):
		return Task{}, fmt.Errorf("start task: bad output cap of %d bytes: give one from %s to %s (0: the default, %s): %w",
			j.MaxOutput, humanBytes(MinMaxOutput), humanBytes(MaxMaxOutput), humanBytes(m.maxOutput), troupe.ErrInvalid)
	}
	maxOutput := cmp.Or(j.MaxOutput, m.maxOutput)
	dir, err := resolveCwd(projectDir, j.Cwd)
	if err != nil {
		return Task{}, fmt.Errorf("start task: %w", err)
	}

	m.startMu.Lock()
	defer m.startMu.Unlock()
	running, err := m.store.RunningTasks(ctx)
	if err != nil {
		return Task{}, fmt.Errorf("start task: %w", err)
	}
	n := 0
	for _, t := range running {
		if t.Project == owner.Project {
			n++
		}
	}
	if n >= m.max {
		return Task{}, fmt.Errorf("start task: %w", &LimitError{Project: owner.Project, Limit: m.max})
	}
	// Room for the new folder within the project's bounds.
	m.pruneProject(ctx, owner.Project, "")

	var argv []string
	var cg cgroup.Group
	if j.Sandbox != nil && j.Sandbox.On {
		if argv, err = sandbox.Wrap(*j.Sandbox, []string{jobShell, "-c", command}); err != nil {
			return Task{}, fmt.Errorf("start task: %w", err)
		}
		cg = j.Sandbox.Cgroup
	}
	id, taskDir, err := m.newTaskDir()
	if err != nil {
		return Task{}, noSpace(fmt.Errorf("start task: %w", err))
	}
	t, err := m.startIn(ctx, owner, id, taskDir, spec{ID: id, Command: command, Argv: argv, Cwd: dir, Env: m.jobEnv,
		Timeout: timeout, KillGrace: m.grace, MaxOutput: maxOutput, Cgroup: cg})
	if err != nil {
		// Nothing half-made stays: no row was recorded, no job ran.
		if rerr := os.RemoveAll(taskDir); rerr != nil {
			m.log.Warn("remove the folder of a task that did not start", "task", id, "err", rerr)
		}
		return Task{}, noSpace(fmt.Errorf("start task %s: %w", id, err))
	}
	m.mu.Lock()
	changed := m.changed
	m.mu.Unlock()
	if changed != nil {
		changed(t)
	}
	return t, nil
}

// ErrNoSpace marks a task that could not start because the disk holding
// the tasks' folders is full.
var ErrNoSpace = errors.New("no space left on device for the task's folder: free some disk space and start it again")

// noSpace adds ErrNoSpace to err when a full disk caused it.
func noSpace(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w (%w)", ErrNoSpace, err)
	}
	return err
}

// startIn writes the task's spec and its status reserve into taskDir,
// starts its supervisor, records the task and opens the start gate.
func (m *Manager) startIn(ctx context.Context, owner troupe.RuntimeKey, id ID, taskDir string, sp spec) (Task, error) {
	b, err := json.Marshal(sp)
	if err == nil {
		err = atomicfile.Write(filepath.Join(taskDir, specFile), b, 0o600)
	}
	if err != nil {
		return Task{}, fmt.Errorf("write spec: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(taskDir, reserveFile), make([]byte, reserveSize), 0o600); err != nil {
		return Task{}, fmt.Errorf("reserve room for the status: %w", err)
	}
	t := Task{ID: id, Project: owner.Project, Owner: owner.Agent, Command: sp.Command, Cwd: sp.Cwd,
		Timeout: sp.Timeout, State: Running, StartedAt: time.Now().UTC()}
	sup, start, err := m.spawn(taskDir)
	if err != nil {
		return Task{}, err
	}
	t.SupervisorPID, t.SupervisorStart = sup.proc.Pid, start
	if err := m.store.CreateTask(ctx, t); err != nil {
		m.abandon(sup, start)
		return Task{}, err
	}
	// Only now does the job run: a daemon that dies before this line
	// closes the gate unopened, and the supervisor exits without running
	// the job (recording why, for a task that was recorded).
	if err := sup.open(); err != nil {
		m.log.Warn("open the start gate of a task", "task", id, "err", err) // the supervisor records the failure
	}
	m.log.Info("task started", "task", id, "project", t.Project, "agent", t.Owner, "supervisor", t.SupervisorPID)
	m.track(t, sup)
	return t, nil
}

// resolveCwd returns the real path of cwd (relative to projectDir, default
// projectDir), which must be a directory inside the project folder.
func resolveCwd(projectDir, cwd string) (string, error) {
	if projectDir == "" {
		return "", fmt.Errorf("no project folder: %w", troupe.ErrInvalid)
	}
	root, err := filepath.EvalSymlinks(projectDir)
	if err == nil {
		root, err = filepath.Abs(root)
	}
	if err != nil {
		return "", fmt.Errorf("resolve project folder: %w", err)
	}
	p := cwd
	switch {
	case p == "":
		p = root
	case !filepath.IsAbs(p):
		p = filepath.Join(root, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return "", fmt.Errorf("bad cwd %q: %w: give a folder inside the project: %w", cwd, err, troupe.ErrInvalid)
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("bad cwd %q: it resolves to %s, outside the project folder %s: give a folder inside the project: %w", cwd, real, root, troupe.ErrInvalid)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("bad cwd %q: %w", cwd, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("bad cwd %q: %s is not a folder: %w", cwd, real, troupe.ErrInvalid)
	}
	return real, nil
}

// newTaskDir mints a task id and creates its directory, which must not
// exist yet.
func (m *Manager) newTaskDir() (ID, string, error) {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return "", "", fmt.Errorf("create tasks folder: %w", err)
	}
	for range 8 {
		var b [4]byte
		rand.Read(b[:])
		id := ID(hex.EncodeToString(b[:]))
		dir := m.taskDir(id)
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			return id, dir, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", "", fmt.Errorf("create task folder: %w", err)
		}
	}
	return "", "", errors.New("create task folder: no free task id after 8 tries")
}

// spawn starts a supervisor for taskDir in a new session and returns it
// with its /proc start time.
func (m *Manager) spawn(taskDir string) (*supervisorProc, uint64, error) {
	logf, err := os.OpenFile(filepath.Join(taskDir, supervisorLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("start supervisor: %w", err)
	}
	defer logf.Close() // the child has its own copy
	argv := append(append([]string(nil), m.supervisor...), taskDir)
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return nil, 0, fmt.Errorf("start supervisor: %w", err)
	}
	defer gateR.Close() // the child has its own copy
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = taskDir
	cmd.Env = m.supEnv
	cmd.Stdout, cmd.Stderr = logf, logf // stdin: /dev/null
	cmd.ExtraFiles = []*os.File{gateR}  // fd 3: the start gate
	// A new session: no controlling terminal, and out of the daemon's
	// process group, so that neither a ^C nor a kill of the group ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		gateW.Close()
		return nil, 0, fmt.Errorf("start supervisor %s: %w", argv[0], err)
	}
	proc := cmd.Process
	// Until it is reaped, the child's pid cannot be reused: the pidfd and
	// the start time are both the child's.
	fd, err := pidfd.Open(proc.Pid)
	var st procstat.Stat
	if err == nil {
		if st, err = procstat.Read(proc.Pid); err != nil {
			fd.Close()
		}
	}
	if err != nil {
		gateW.Close()
		proc.Kill()
		proc.Wait()
		killSession(proc.Pid, 0) // a job it may have started; start 0: the leader is reaped
		return nil, 0, fmt.Errorf("start supervisor: %w", err)
	}
	return &supervisorProc{fd: fd, proc: proc, gate: gateW}, st.Start, nil
}

// abandon ends a supervisor whose task could not be recorded, with its job.
func (m *Manager) abandon(sup *supervisorProc, start uint64) {
	sup.closeGate() // the job never runs
	pid := sup.proc.Pid
	sup.fd.Signal(unix.SIGKILL)
	sup.proc.Wait()
	sup.fd.Close()
	killSession(pid, start)
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
	out, _, err := m.output(ctx, p, id, maxBytes)
	return out, err
}

func (m *Manager) output(ctx context.Context, p troupe.ProjectID, id ID, maxBytes int) (string, OutputSize, error) {
	if _, err := m.store.Task(ctx, p, id); err != nil {
		return "", OutputSize{}, fmt.Errorf("read task output %s: %w", id, err)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultOutput
	}
	maxBytes = min(maxBytes, MaxOutput)
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

// pruneProject removes the folders of project p's oldest ended tasks
// while the project keeps more than Options.Folders folders or more than
// Options.FolderBytes bytes in them. Running tasks' folders count but are
// never removed; keep names one that is not removed either (none: "").
func (m *Manager) pruneProject(ctx context.Context, p troupe.ProjectID, keep ID) {
	ts, err := m.store.Tasks(ctx, p)
	if err != nil {
		m.log.Warn("list tasks to prune their folders", "project", p, "err", err)
		return
	}
	type folder struct {
		id    ID
		ended time.Time
		size  int64
	}
	var ended []folder
	var total int64
	count := 0
	for _, t := range ts {
		size, ok := dirSize(m.taskDir(t.ID))
		if !ok {
			continue
		}
		count++
		total += size
		if t.State.Final() && t.ID != keep {
			ended = append(ended, folder{t.ID, t.EndedAt, size})
		}
	}
	if count <= m.foldersMax && total <= m.folderMax {
		return
	}
	slices.SortStableFunc(ended, func(a, b folder) int { return a.ended.Compare(b.ended) })
	n := 0
	for _, f := range ended {
		if count <= m.foldersMax && total <= m.folderMax {
			break
		}
		if err := os.RemoveAll(m.taskDir(f.id)); err != nil {
			m.log.Warn("prune task folder", "task", f.id, "err", err)
			continue
		}
		count--
		total -= f.size
		n++
	}
	m.log.Info("pruned the folders of a project's oldest tasks", "project", p, "count", n,
		"folders", count, "bytes", total, "max_folders", m.foldersMax, "max_bytes", m.folderMax)
}

// dirSize is the bytes of the regular files in dir (a task folder holds no
// subfolders); ok is false when dir does not exist.
func dirSize(dir string) (int64, bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n, true
}
