package task

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/procstat"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestMain(m *testing.M) {
	MaybeRunSupervisor()
	os.Exit(m.Run())
}

// patience bounds every wait on a process or a notification: reaching it
// is a failure (a hang), not a pace the tests rely on.
const patience = 30 * time.Second

var (
	p1dev = troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	p2dev = troupe.RuntimeKey{Project: "p2", Agent: "dev"}
)

// harness is one task store, one inbox, one tasks folder and one project
// folder, shared by the Managers a test starts one after the other (a
// daemon restart).
type harness struct {
	store *MemStore
	inbox *inbox.MemStore
	dir   string // Options.Dir
	proj  string // the project folder, real path
	notes chan troupe.Message
	// notify is the Manager's OnComplete: to notes unless a test sets it.
	notify func(troupe.Message)
	opts   Options
}

func newHarness(tb testing.TB, edit func(*Options)) *harness {
	tb.Helper()
	proj, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	h := &harness{
		store: NewMemStore(),
		inbox: inbox.NewMemStore(),
		dir:   filepath.Join(tb.TempDir(), "tasks"),
		proj:  proj,
		notes: make(chan troupe.Message, 4096),
	}
	h.opts = Options{
		Store:      h.store,
		Inbox:      h.inbox,
		Dir:        h.dir,
		Supervisor: TestSupervisorCommand(),
		KillGrace:  2 * time.Second,
		Logger:     slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if edit != nil {
		edit(&h.opts)
	}
	// Registered first, so it runs last: whatever a failed test left
	// running is killed.
	tb.Cleanup(func() {
		ts, _ := h.store.RunningTasks(context.Background())
		for _, t := range ts {
			if p, _ := attachProcess(t.SupervisorPID, t.SupervisorStart); p != nil {
				p.Signal(unix.SIGKILL)
				p.Close()
			}
			killSession(t.SupervisorPID, t.SupervisorStart)
		}
	})
	return h
}

// testWriter sends log lines to the test's log.
type testWriter struct{ tb testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// run starts a Manager's Run and waits until it adopted the running tasks.
// manager is a Manager of h.opts whose completions go to h.notify (by
// default, to h.notes).
func (h *harness) manager() *Manager {
	m := New(h.opts)
	if h.notify == nil {
		h.notify = func(m troupe.Message) { h.notes <- m }
	}
	m.OnComplete(h.notify)
	return m
}

// stop cancels Run and waits for it to return; it also runs at cleanup.
func (h *harness) run(tb testing.TB) (*Manager, func()) {
	tb.Helper()
	m := h.manager()
	adopted := make(chan struct{})
	m.adopted = func() { close(adopted) }
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- m.Run(ctx) }()
	select {
	case <-adopted:
	case err := <-errc:
		cancel()
		tb.Fatalf("Run returned before adopting: %v", err)
	case <-time.After(patience):
		cancel()
		tb.Fatalf("Run did not adopt within %v", patience)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				tb.Errorf("Run: %v", err)
			}
		case <-time.After(patience):
			tb.Fatalf("Run did not return within %v of its cancel", patience)
		}
	}
	tb.Cleanup(stop)
	return m, stop
}

// start starts command for p1/dev in the project folder.
func (h *harness) start(tb testing.TB, m *Manager, command string, timeout time.Duration) Task {
	tb.Helper()
	return h.startFor(tb, m, p1dev, h.proj, command, timeout)
}

func (h *harness) startFor(tb testing.TB, m *Manager, owner troupe.RuntimeKey, proj, command string, timeout time.Duration) Task {
	tb.Helper()
	t, err := m.Start(context.Background(), owner, proj, Job{Command: command, Timeout: timeout})
	if err != nil {
		tb.Fatalf("Start(%q): %v", command, err)
	}
	return t
}

// next waits for the next completion notified.
func (h *harness) next(tb testing.TB) troupe.Message {
	tb.Helper()
	select {
	case m := <-h.notes:
		return m
	case <-time.After(patience):
		tb.Fatalf("no completion notified within %v", patience)
		return troupe.Message{}
	}
}

// noMore checks that nothing else was notified. Call it after every Run
// stopped: Notify is then never called again.
func (h *harness) noMore(tb testing.TB) {
	tb.Helper()
	select {
	case m := <-h.notes:
		tb.Errorf("unexpected extra completion: %+v", m)
	default:
	}
}

func (h *harness) task(tb testing.TB, p troupe.ProjectID, id ID) Task {
	tb.Helper()
	t, err := h.store.Task(context.Background(), p, id)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// fifo makes a named pipe in the test's temporary folder. A job blocks on
// it (`read x < fifo`) until release writes a line: no polling anywhere.
func fifo(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	if err := unix.Mkfifo(p, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// release lets a job blocked reading the fifo at path go on.
func release(tb testing.TB, path string) {
	tb.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0) // blocks until the job opens it
		if err == nil {
			_, err = f.WriteString("go\n")
			err = errors.Join(err, f.Close())
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			tb.Fatal(err)
		}
	case <-time.After(patience):
		tb.Fatalf("no job opened %s within %v", path, patience)
	}
}

// awaitReady waits for a job to write to the fifo at path (`echo ready >
// fifo`): the job is then running.
func awaitReady(tb testing.TB, path string) {
	tb.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(path) // blocks until the job opens it, ends when it closes it
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			tb.Fatal(err)
		}
	case <-time.After(patience):
		tb.Fatalf("the job did not write to %s within %v", path, patience)
	}
}

// waitExit waits for process pid to exit (a zombie has exited).
func waitExit(tb testing.TB, pid int) {
	tb.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return
	}
	if err != nil {
		tb.Fatalf("pidfd_open %d: %v", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(patience)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			tb.Fatalf("poll pidfd of %d: %v", pid, err)
		}
		if n == 0 {
			tb.Fatalf("process %d still running after %v", pid, patience)
		}
		return
	}
}

// gone reports whether pid is no process, or only a zombie waiting for
// init (not us) to reap it.
func gone(pid int) bool {
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return true
	}
	st, err := procstat.Read(pid)
	return errors.Is(err, os.ErrNotExist) || (err == nil && st.State == 'Z')
}

// groupMembers lists the live (not zombie) processes of group pgid.
func groupMembers(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procstat.Read(pid); err == nil && st.PGRP == pgid && st.State != 'Z' {
			pids = append(pids, pid)
		}
	}
	return pids
}

// groupGone reports whether process group pgid has no live member: kill -0
// says ESRCH, or every member is a zombie waiting for init.
func groupGone(pgid int) bool {
	if err := unix.Kill(-pgid, 0); errors.Is(err, unix.ESRCH) {
		return true
	}
	return len(groupMembers(pgid)) == 0
}

// noLeftovers checks that nothing of task t runs any more: its supervisor
// (and its group), its job's group, and every process of the supervisor's
// session. Processes killed a moment ago are waited for, through pidfds.
func (h *harness) noLeftovers(tb testing.TB, t Task, others ...int) {
	tb.Helper()
	pids := append(sessionMembers(t.SupervisorPID), others...)
	pids = append(pids, groupMembers(t.SupervisorPID)...)
	var job int
	if st, err := readStatus(filepath.Join(h.dir, string(t.ID))); err == nil && st.JobPID > 0 {
		job = st.JobPID
		pids = append(pids, groupMembers(job)...)
	}
	for _, pid := range pids {
		waitExit(tb, pid)
	}
	if !gone(t.SupervisorPID) {
		tb.Errorf("task %s: supervisor %d is still there", t.ID, t.SupervisorPID)
	}
	if !groupGone(t.SupervisorPID) {
		tb.Errorf("task %s: the supervisor's group %d still has %v", t.ID, t.SupervisorPID, groupMembers(t.SupervisorPID))
	}
	if job > 0 && !groupGone(job) {
		tb.Errorf("task %s: the job's group %d still has %v", t.ID, job, groupMembers(job))
	}
	if m := sessionMembers(t.SupervisorPID); len(m) > 0 {
		tb.Errorf("task %s: the supervisor's session %d still has %v", t.ID, t.SupervisorPID, m)
	}
	for _, pid := range others {
		if !gone(pid) {
			tb.Errorf("task %s: process %d is still there", t.ID, pid)
		}
	}
}

// endWhileDown starts a task that prints "finished", stops its Manager
// (the daemon goes down), and lets the task end: its status file is
// written, and no Manager saw it.
func (h *harness) endWhileDown(tb testing.TB) (*Manager, Task) {
	tb.Helper()
	m, stop := h.run(tb)
	gate := fifo(tb, "gate")
	tk := h.start(tb, m, `read x < "`+gate+`"; echo finished`, 0)
	stop()
	release(tb, gate)
	waitExit(tb, tk.SupervisorPID)
	if _, err := os.Stat(filepath.Join(h.dir, string(tk.ID), statusFile)); err != nil {
		tb.Fatalf("no status file after the supervisor exited: %v", err)
	}
	return m, tk
}
