package task

// Starting a task: its folder and spec, its supervisor (held at a gate
// until the task's row is stored), its working folder checked.

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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
	// Remote runs the job on the runner its owner runs on
	// (Options.Remote): Cwd is then relative to the owner's worktree
	// there, and the runner's sandbox of the owner applies.
	Remote bool `json:"-"`
	// ID is the id the task gets, set by a daemon for the task it asks a
	// runner to run ("": a new one). A Start with the id of a task this
	// Manager has is a repeat: it returns that task.
	ID ID `json:"-"`
}

// idPattern is what a task's id is: it names a folder.
var idPattern = regexp.MustCompile(`^[0-9a-f]{8,32}$`)

// Start starts j for owner in the project folder projectDir and returns
// the running task. Bad arguments fail with errors matching
// troupe.ErrInvalid; a project at its limit with a *LimitError; a full
// disk with an error that says so (ErrNoSpace), leaving nothing behind.
func (m *Manager) Start(ctx context.Context, owner troupe.RuntimeKey, projectDir string, j Job) (Task, error) {
	command, timeout := j.Command, j.Timeout
	if err := m.checkJob(owner, j); err != nil {
		return Task{}, fmt.Errorf("start task: %w", err)
	}
	if j.Remote {
		return m.startRemote(ctx, owner, j)
	}
	if j.ID != "" {
		if t, err := m.store.Task(ctx, owner.Project, j.ID); err == nil {
			return t, nil // a repeated start
		}
	}
	maxOutput := cmp.Or(j.MaxOutput, m.maxOutput)
	dir, err := resolveCwd(projectDir, j.Cwd)
	if err != nil {
		return Task{}, fmt.Errorf("start task: %w", err)
	}

	m.startMu.Lock()
	defer m.startMu.Unlock()
	if err := m.underLimit(ctx, owner.Project); err != nil {
		return Task{}, err
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
	id, taskDir, err := m.newTaskDir(j.ID)
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
	m.announce(t)
	return t, nil
}

// checkJob refuses a job for owner that Start would not run.
func (m *Manager) checkJob(owner troupe.RuntimeKey, j Job) error {
	command, timeout := j.Command, j.Timeout
	switch {
	case !owner.Valid():
		return fmt.Errorf("owner %q is not an agent of a project: %w", owner.String(), troupe.ErrInvalid)
	case strings.TrimSpace(command) == "":
		return fmt.Errorf("empty command: give the shell command to run: %w", troupe.ErrInvalid)
	case strings.ContainsRune(command, 0):
		return fmt.Errorf("the command holds a NUL byte: %w", troupe.ErrInvalid)
	case timeout < 0 || timeout > MaxTimeout:
		return fmt.Errorf("bad timeout %v: give one from 0 (none) to %v: %w", timeout, MaxTimeout, troupe.ErrInvalid)
	case j.MaxOutput != 0 && (j.MaxOutput < MinMaxOutput || j.MaxOutput > MaxMaxOutput):
		return fmt.Errorf("bad output cap of %d bytes: give one from %s to %s (0: the default, %s): %w",
			j.MaxOutput, humanBytes(MinMaxOutput), humanBytes(MaxMaxOutput), humanBytes(m.maxOutput), troupe.ErrInvalid)
	case j.ID != "" && !idPattern.MatchString(string(j.ID)):
		return fmt.Errorf("bad id %q: %w", j.ID, troupe.ErrInvalid)
	}
	return nil
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
	if err := writeSpec(taskDir, sp); err != nil {
		return Task{}, err
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

// writeSpec writes sp and the status reserve into taskDir.
func writeSpec(taskDir string, sp spec) error {
	b, err := json.Marshal(sp)
	if err == nil {
		err = atomicfile.Write(filepath.Join(taskDir, specFile), b, 0o600)
	}
	if err != nil {
		return fmt.Errorf("write spec: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(taskDir, reserveFile), make([]byte, reserveSize), 0o600); err != nil {
		return fmt.Errorf("reserve room for the status: %w", err)
	}
	return nil
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
func (m *Manager) newTaskDir(given ID) (ID, string, error) {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return "", "", fmt.Errorf("create tasks folder: %w", err)
	}
	for range 8 {
		id := given
		if id == "" {
			id = newID()
		}
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

// newID is a new task's id: random.
func newID() ID {
	var b [4]byte
	rand.Read(b[:])
	return ID(hex.EncodeToString(b[:]))
}

// startRemote records task j of owner, which runs on a runner, then asks
// the runner to run it (Options.Remote). A runner that does not take it
// fails the task, with a completion as for any end: every task recorded
// is reported once.
func (m *Manager) startRemote(ctx context.Context, owner troupe.RuntimeKey, j Job) (Task, error) {
	if m.remote == nil {
		return Task{}, fmt.Errorf("start task: %s runs on a runner, and this daemon has no runners' link: run the command with your own shell tool", owner.Agent)
	}
	if filepath.IsAbs(j.Cwd) {
		return Task{}, fmt.Errorf("start task: bad cwd %q: give a folder relative to your worktree: %w", j.Cwd, troupe.ErrInvalid)
	}
	runner, err := m.remote.RunnerOf(owner)
	if err != nil {
		return Task{}, fmt.Errorf("start task: %w", err)
	}
	// The runner is asked outside the start lock (it may take its time):
	// the task is marked in flight until it answers (RunningOn).
	m.startMu.Lock()
	if err := m.underLimit(ctx, owner.Project); err != nil {
		m.startMu.Unlock()
		return Task{}, err
	}
	t := Task{Project: owner.Project, Owner: owner.Agent, Command: j.Command, Cwd: cmp.Or(filepath.Clean(j.Cwd), "."),
		Timeout: j.Timeout, Runner: runner, State: Running, StartedAt: time.Now().UTC()}
	for range 8 {
		t.ID = newID()
		m.inFlight(t.ID, true)
		if err = m.store.CreateTask(ctx, t); !errors.Is(err, troupe.ErrAlreadyExists) {
			break
		}
		m.inFlight(t.ID, false)
	}
	m.startMu.Unlock()
	if err != nil {
		m.inFlight(t.ID, false)
		return Task{}, fmt.Errorf("start task: %w", err)
	}
	defer m.inFlight(t.ID, false)
	j.ID = t.ID
	j.MaxOutput = cmp.Or(j.MaxOutput, m.maxOutput) // this daemon's default cap, there too
	if err := m.remote.Start(ctx, t, j); err != nil {
		// An answer lost on the way may hide a task that runs: it is
		// stopped (a runner that does not know it refuses the kill).
		_ = m.remote.Kill(context.WithoutCancel(ctx), t)
		err = fmt.Errorf("start task %s on runner %s: %w", t.ID, runner, err)
		res := Result{State: Failed, ExitCode: -1, Reason: err.Error(), EndedAt: time.Now().UTC()}
		m.conclude(ctx, m.log.With("task", t.ID, "project", t.Project, "agent", t.Owner), t, Ended{Task: t, Result: res})
		return Task{}, err
	}
	m.log.Info("task started", "task", t.ID, "project", t.Project, "agent", t.Owner, "runner", runner)
	m.announce(t)
	return t, nil
}

// inFlight marks (or unmarks) task id as being started on its runner.
func (m *Manager) inFlight(id ID, on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if on {
		m.starting[id] = true
	} else {
		delete(m.starting, id)
	}
}

// underLimit refuses a start in project p when it runs as many tasks as
// allowed. The caller holds startMu.
func (m *Manager) underLimit(ctx context.Context, p troupe.ProjectID) error {
	running, err := m.store.RunningTasks(ctx)
	if err != nil {
		return fmt.Errorf("start task: %w", err)
	}
	n := 0
	for _, t := range running {
		if t.Project == p {
			n++
		}
	}
	if n >= m.max {
		return fmt.Errorf("start task: %w", &LimitError{Project: p, Limit: m.max})
	}
	return nil
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

// announce tells the OnChange callback, if any, that t changed.
func (m *Manager) announce(t Task) {
	m.mu.Lock()
	changed := m.changed
	m.mu.Unlock()
	if changed != nil {
		changed(t)
	}
}
