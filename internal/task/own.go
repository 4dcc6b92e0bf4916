package task

// Tasks of troupe's own (internal/check's checks): the same supervisor,
// sandbox, caps and timeout as an agent's task, but no row, no completion
// message: the caller waits for the end and gets it.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// RunOwn runs j for owner in dir (the owner's workspace; j.Cwd relative
// to it, resolved inside it) as a task of troupe's own, and returns its
// end: the same supervisor as Start's (its own session, the job in j's
// sandbox, output capped at j.MaxOutput, j.Timeout, what the job leaves
// behind stopped), but no row in the Store and no message to anyone: the
// end goes to the caller alone, Ended.Tail holding the last tail bytes of
// the output (the cut said in it). When ctx ends first the job is killed
// (SIGTERM, then SIGKILL after the grace) and its end still returned,
// Killed. The task's folder is removed once read. It runs on this
// machine only (j.Remote is refused) and does not count toward
// Options.MaxPerProject: its caller bounds its own runs.
func (m *Manager) RunOwn(ctx context.Context, owner troupe.RuntimeKey, dir string, j Job, tail int) (Ended, error) {
	if err := m.checkJob(owner, j); err != nil {
		return Ended{}, fmt.Errorf("run task: %w", err)
	}
	if j.Remote || j.ID != "" {
		return Ended{}, fmt.Errorf("run task: a task of troupe's own runs on this machine, with an id of its own: %w", troupe.ErrInvalid)
	}
	cwd, err := resolveCwd(dir, j.Cwd)
	if err != nil {
		return Ended{}, fmt.Errorf("run task: %w", err)
	}
	var argv []string
	var cg cgroup.Group
	if j.Sandbox != nil && j.Sandbox.On {
		if argv, err = sandbox.Wrap(*j.Sandbox, []string{jobShell, "-c", j.Command}); err != nil {
			return Ended{}, fmt.Errorf("run task: %w", err)
		}
		cg = j.Sandbox.Cgroup
	}
	id, taskDir, err := m.newTaskDir("")
	if err != nil {
		return Ended{}, noSpace(fmt.Errorf("run task: %w", err))
	}
	defer func() {
		if err := os.RemoveAll(taskDir); err != nil {
			m.log.Warn("remove the folder of a task of troupe's own", "task", id, "err", err)
		}
	}()
	sp := spec{ID: id, Command: j.Command, Argv: argv, Cwd: cwd, Env: m.jobEnv, Timeout: j.Timeout,
		KillGrace: m.grace, MaxOutput: cmp.Or(j.MaxOutput, m.maxOutput), Cgroup: cg}
	// No fsync: a task of troupe's own is never adopted after a crash
	// (its caller is gone with the daemon), so its spec need not outlive
	// one; the supervisor reads it from the page cache.
	b, err := json.Marshal(sp)
	if err == nil {
		err = os.WriteFile(filepath.Join(taskDir, specFile), b, 0o600)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(taskDir, reserveFile), make([]byte, reserveSize), 0o600)
	}
	if err != nil {
		return Ended{}, noSpace(fmt.Errorf("run task %s: write spec: %w", id, err))
	}
	t := Task{ID: id, Project: owner.Project, Owner: owner.Agent, Command: j.Command, Cwd: cwd,
		Timeout: j.Timeout, State: Running, StartedAt: time.Now().UTC()}
	sup, start, err := m.spawn(taskDir)
	if err != nil {
		return Ended{}, fmt.Errorf("run task %s: %w", id, err)
	}
	t.SupervisorPID, t.SupervisorStart = sup.proc.Pid, start
	if err := sup.open(); err != nil {
		m.log.Warn("open the start gate of a task of troupe's own", "task", id, "err", err) // the supervisor records the failure
	}
	defer sup.fd.Close()
	if err := sup.fd.Wait(ctx); err != nil {
		if ctx.Err() == nil {
			m.abandon(sup, start)
			return Ended{}, fmt.Errorf("run task %s: wait for its supervisor: %w", id, err)
		}
		// The caller gave up: the job is killed as Kill does, and its end
		// is still read.
		if werr := os.WriteFile(filepath.Join(taskDir, killFile), nil, 0o600); werr != nil {
			m.log.Warn("write the kill request of a task of troupe's own", "task", id, "err", werr)
		}
		if serr := sup.fd.Signal(unix.SIGTERM); serr != nil {
			m.log.Warn("signal the supervisor of a task of troupe's own", "task", id, "err", serr)
		}
		if err := sup.fd.Wait(context.WithoutCancel(ctx)); err != nil {
			m.abandon(sup, start)
			return Ended{}, fmt.Errorf("run task %s: wait for its supervisor: %w", id, err)
		}
	}
	how, _ := sup.proc.Wait()
	res, left := m.result(t, how, false)
	out, size, err := readOutput(taskDir, tail)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("read the output of a task of troupe's own", "task", id, "err", err)
	}
	if res.EndedAt.IsZero() {
		res.EndedAt = time.Now().UTC()
	}
	t.State, t.ExitCode, t.Signal, t.Reason, t.EndedAt = res.State, res.ExitCode, res.Signal, res.Reason, res.EndedAt
	return Ended{Task: t, Result: res, Stopped: left, Output: size, Tail: out}, nil
}
