package task

// A task's end: the supervisor watched through its pidfd, the status it
// wrote read, what the job left stopped, the completion message posted
// exactly once and the task row completed.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/pidfd"
	"github.com/troupe-dev/troupe/internal/troupe"
)

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
	m.conclude(sctx, log, t, Ended{Task: t, Result: res, Stopped: left, Output: size, Tail: out})
	m.pruneProject(sctx, t.Project, t.ID) // its own output stays readable
}

// conclude records e, the end of t, and its completion, then notifies.
func (m *Manager) conclude(ctx context.Context, log *slog.Logger, t Task, e Ended) error {
	msg, notify, err := m.complete(ctx, log, t, e)
	if err != nil {
		// The task stays running in the store: the next Run completes it
		// from its status file (a runner's: the runner sends it again),
		// and the message key keeps its message single.
		log.Error("complete task", "err", err)
	}
	m.mu.Lock()
	fn, changed := m.notify, m.changed
	m.mu.Unlock()
	if notify && fn != nil {
		fn(msg)
	}
	if changed != nil && err == nil {
		res := e.Result
		ended := t
		ended.State, ended.ExitCode, ended.Signal, ended.Reason, ended.EndedAt = res.State, res.ExitCode, res.Signal, res.Reason, res.EndedAt
		ended.Stopped = e.Stopped
		changed(ended)
	}
	return err
}

// CompleteRemote records the end of a task that ran on runner, as the
// runner reported it (internal/remote, from the runner's durable
// stream): the completion message goes into the owner's inbox under the
// same key as a local task's, so a report given twice is one message,
// then the row records the end. Only what the row says is trusted: a
// report of a task this daemon does not know, of another project or
// owner, or of another runner's task is refused (troupe.ErrNotFound). An
// error other than that leaves the report to be given again.
func (m *Manager) CompleteRemote(ctx context.Context, runner string, e Ended) error {
	t, err := m.store.Task(ctx, e.Task.Project, e.Task.ID)
	if err != nil {
		return fmt.Errorf("complete task %s of runner %s: %w", e.Task.ID, runner, err)
	}
	if t.Runner != runner || t.Owner != e.Task.Owner {
		return fmt.Errorf("complete task %s: runner %s does not run it: %w", t.ID, runner, troupe.ErrNotFound)
	}
	if !e.Result.State.Final() {
		return fmt.Errorf("complete task %s of runner %s: state %q is not final: %w", t.ID, runner, e.Result.State, troupe.ErrInvalid)
	}
	if t.State != Running {
		return nil // completed already: a report given again
	}
	if e.Result.EndedAt.IsZero() || e.Result.EndedAt.Before(t.StartedAt) {
		e.Result.EndedAt = time.Now().UTC() // another machine's clock
	}
	// What another machine says is bounded as a local supervisor's is.
	e.Tail = clip.Tail(e.Tail, 4*messageBytes)
	e.Result.Reason, _ = clip.Ellipsis(e.Result.Reason, 2*messageBytes)
	e.Result.Signal, _ = clip.Ellipsis(e.Result.Signal, 16)
	if s := e.Stopped; s != nil {
		stopped := *s
		stopped.Procs = slices.Clone(s.Procs[:min(len(s.Procs), maxStoppedListed)])
		for i := range stopped.Procs {
			stopped.Procs[i].Command, _ = clip.Ellipsis(stopped.Procs[i].Command, maxStoppedCommand)
			stopped.Procs[i].Escaped, _ = clip.Ellipsis(stopped.Procs[i].Escaped, 16)
		}
		stopped.Signal, _ = clip.Ellipsis(stopped.Signal, 16)
		e.Stopped = &stopped
	}
	e.Task = t
	log := m.log.With("task", t.ID, "project", t.Project, "agent", t.Owner, "runner", runner)
	return m.conclude(ctx, log, t, e)
}

// RunningOn lists the tasks recorded as running on runner, but those
// being started there: every task it lists was answered by its runner
// (it is in the runner's records) before RunningOn returned.
func (m *Manager) RunningOn(ctx context.Context, runner string) ([]Task, error) {
	ts, err := m.store.RunningTasks(ctx)
	if err != nil {
		return nil, fmt.Errorf("list runner %s's tasks: %w", runner, err)
	}
	// Read after the rows: a start answered in between is listed, and
	// is in the runner's records.
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.DeleteFunc(ts, func(t Task) bool { return t.Runner != runner || m.starting[t.ID] }), nil
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
func (m *Manager) complete(ctx context.Context, log *slog.Logger, t Task, e Ended) (msg troupe.Message, notify bool, err error) {
	res := e.Result
	msg, added, err := m.report(ctx, t, e)
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

// report is post for a Manager with a Reporter: it hands over the end,
// once per task (CompletionKey).
func (m *Manager) report(ctx context.Context, t Task, e Ended) (troupe.Message, bool, error) {
	if m.reporter == nil {
		return m.post(ctx, t, completionText(t, e.Result, e.Stopped, e.Output, e.Tail))
	}
	id, added, err := m.reporter.Report(ctx, CompletionKey(t.ID), e)
	if err != nil {
		return troupe.Message{}, false, fmt.Errorf("report the end of task %s: %w", t.ID, err)
	}
	return troupe.Message{ID: id}, added, nil
}

// CompletionKey is the idempotency key of task id's completion message.
func CompletionKey(id ID) string { return "task:" + string(id) }
