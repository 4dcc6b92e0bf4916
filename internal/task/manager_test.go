package task

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/atomicfile"
	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/procstat"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestTaskRunsToCompletion(t *testing.T) {
	h := newHarness(t, nil)
	m, stop := h.run(t)
	tk := h.start(t, m, "echo hello; echo world", 0)
	if tk.State != Running || tk.SupervisorPID <= 0 || tk.SupervisorStart == 0 || tk.Cwd != h.proj {
		t.Errorf("started task %+v", tk)
	}
	msg := h.next(t)
	stop()
	h.noMore(t)

	if msg.Kind != troupe.KindTask || msg.From != From || msg.Key() != p1dev || msg.State != troupe.MsgQueued || msg.ID <= 0 {
		t.Errorf("completion %+v: want a queued task message from @task to p1/dev", msg)
	}
	for _, want := range []string{"task " + string(tk.ID) + " `echo hello; echo world` exited 0 after ", "Last lines of output:\nhello\nworld"} {
		if !strings.Contains(msg.Text, want) {
			t.Errorf("completion text %q lacks %q", msg.Text, want)
		}
	}
	got := h.task(t, "p1", tk.ID)
	if got.State != Exited || got.ExitCode != 0 || !got.Notified || got.EndedAt.Before(got.StartedAt) || got.Signal != "" {
		t.Errorf("ended task %+v", got)
	}
	if ms, _ := h.inbox.Conversation(t.Context(), "p1", inbox.Page{}); len(ms) != 1 {
		t.Errorf("%d messages in the store, want 1", len(ms))
	}
	h.noLeftovers(t, tk)
}

func TestTaskNonZeroExit(t *testing.T) {
	h := newHarness(t, nil)
	m, stop := h.run(t)
	tk := h.start(t, m, "echo oops >&2; exit 3", 0)
	msg := h.next(t)
	stop()
	h.noMore(t)
	if !strings.Contains(msg.Text, "exited 3 after") || !strings.HasSuffix(msg.Text, "\noops") {
		t.Errorf("completion text %q: want exit 3 and stderr's last line", msg.Text)
	}
	if got := h.task(t, "p1", tk.ID); got.State != Exited || got.ExitCode != 3 {
		t.Errorf("ended task %+v: want exited 3", got)
	}
	h.noLeftovers(t, tk)
}

func TestTaskTimeout(t *testing.T) {
	h := newHarness(t, nil)
	m, stop := h.run(t)
	// The job and a grandchild in its group: both must go.
	tk := h.start(t, m, "sleep 30 & echo started; sleep 30", 300*time.Millisecond)
	msg := h.next(t)
	stop()
	h.noMore(t)
	got := h.task(t, "p1", tk.ID)
	if got.State != TimedOut || !strings.Contains(got.Reason, "timeout of 300ms") {
		t.Errorf("ended task %+v: want timed_out with the reason", got)
	}
	if !strings.Contains(msg.Text, "timed out after") || !strings.Contains(msg.Text, "its timeout is 300ms") || !strings.Contains(msg.Text, "started") {
		t.Errorf("completion text %q", msg.Text)
	}
	h.noLeftovers(t, tk)
}

func TestTaskKill(t *testing.T) {
	h := newHarness(t, nil)
	m, stop := h.run(t)
	ready := fifo(t, "ready")
	tk := h.start(t, m, `echo ready > "`+ready+`"; sleep 30`, 0)
	awaitReady(t, ready)
	if err := m.Kill(t.Context(), "p2", tk.ID); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Kill from another project: %v, want ErrNotFound", err)
	}
	if err := m.Kill(t.Context(), "p1", tk.ID); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	msg := h.next(t)
	if got := h.task(t, "p1", tk.ID); got.State != Killed || got.Reason != "killed on request" || got.Signal != "SIGTERM" {
		t.Errorf("ended task %+v: want killed by SIGTERM", got)
	}
	if !strings.Contains(msg.Text, "was killed on request after") {
		t.Errorf("completion text %q", msg.Text)
	}
	if err := m.Kill(t.Context(), "p1", tk.ID); !errors.Is(err, troupe.ErrInvalid) || !strings.Contains(err.Error(), "already ended (killed)") {
		t.Errorf("second Kill: %v, want 'already ended' matching ErrInvalid", err)
	}
	stop()
	h.noMore(t)
	h.noLeftovers(t, tk)
}

// A kill that reaches the supervisor while it is still starting (before
// it catches signals, or before it starts the job) still ends as killed.
func TestTaskKillRightAfterStart(t *testing.T) {
	h := newHarness(t, nil)
	m, stop := h.run(t)
	var tasks []Task
	for range 4 {
		tk := h.start(t, m, "sleep 30", 0)
		if err := m.Kill(t.Context(), "p1", tk.ID); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		tasks = append(tasks, tk)
	}
	for range tasks {
		h.next(t)
	}
	stop()
	h.noMore(t)
	for _, tk := range tasks {
		if got := h.task(t, "p1", tk.ID); got.State != Killed || !strings.HasPrefix(got.Reason, "killed on request") {
			t.Errorf("ended task %+v: want killed", got)
		}
		h.noLeftovers(t, tk)
	}
}

// A job that ignores SIGTERM is SIGKILLed after the grace.
func TestC11_TaskKillEscalates(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.KillGrace = 200 * time.Millisecond })
	m, stop := h.run(t)
	ready := fifo(t, "ready")
	tk := h.start(t, m, `trap '' TERM; echo ready > "`+ready+`"; sleep 30`, 0)
	awaitReady(t, ready)
	if err := m.Kill(t.Context(), "p1", tk.ID); err != nil {
		t.Fatal(err)
	}
	h.next(t)
	stop()
	got := h.task(t, "p1", tk.ID)
	if got.State != Killed || got.Signal != "SIGKILL" || got.ExitCode != -1 {
		t.Errorf("ended task %+v: want killed by SIGKILL", got)
	}
	if d := got.EndedAt.Sub(got.StartedAt); d > 20*time.Second {
		t.Errorf("the kill took %v", d)
	}
	h.noLeftovers(t, tk)
}

func TestStartValidates(t *testing.T) {
	h := newHarness(t, nil)
	m, stop := h.run(t)
	defer stop()
	outside := t.TempDir()
	must(t, os.Mkdir(filepath.Join(h.proj, "sub"), 0o700))
	must(t, os.Symlink(outside, filepath.Join(h.proj, "escape")))
	must(t, os.Symlink(filepath.Join(h.proj, "sub"), filepath.Join(h.proj, "inside")))
	must(t, os.WriteFile(filepath.Join(h.proj, "file"), nil, 0o600))

	for _, tc := range []struct {
		name, command, cwd string
		timeout            time.Duration
		owner              troupe.RuntimeKey
		want               string // in the error; "" for success
		wantCwd            string
	}{
		{name: "empty command", command: "  \n", want: "empty command"},
		{name: "negative timeout", command: "true", timeout: -time.Second, want: "bad timeout"},
		{name: "timeout over 24h", command: "true", timeout: 25 * time.Hour, want: "bad timeout"},
		{name: "no owner", command: "true", owner: troupe.RuntimeKey{Project: "p1"}, want: "not an agent of a project"},
		{name: "parent", command: "true", cwd: "../", want: "outside the project folder"},
		{name: "dotdot inside path", command: "true", cwd: "sub/../..", want: "outside the project folder"},
		{name: "absolute outside", command: "true", cwd: outside, want: "outside the project folder"},
		{name: "symlink outside", command: "true", cwd: "escape", want: "outside the project folder"},
		{name: "missing", command: "true", cwd: "nope", want: "bad cwd"},
		{name: "a file", command: "true", cwd: "file", want: "not a folder"},
		{name: "default cwd", command: "true", wantCwd: h.proj},
		{name: "relative cwd", command: "true", cwd: "sub", wantCwd: filepath.Join(h.proj, "sub")},
		{name: "absolute inside", command: "true", cwd: filepath.Join(h.proj, "sub"), wantCwd: filepath.Join(h.proj, "sub")},
		{name: "symlink inside", command: "true", cwd: "inside", wantCwd: filepath.Join(h.proj, "sub")},
		{name: "max timeout", command: "true", timeout: 24 * time.Hour, wantCwd: h.proj},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := tc.owner
			if owner == (troupe.RuntimeKey{}) {
				owner = p1dev
			}
			tk, err := m.Start(t.Context(), owner, h.proj, Job{Command: tc.command, Cwd: tc.cwd, Timeout: tc.timeout})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, troupe.ErrInvalid) {
					t.Fatalf("Start: %v; want an error with %q matching ErrInvalid", err, tc.want)
				}
				if !strings.HasPrefix(err.Error(), "start task: ") {
					t.Errorf("error %q does not say what failed", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if tk.Cwd != tc.wantCwd {
				t.Errorf("cwd %s, want %s", tk.Cwd, tc.wantCwd)
			}
			msg := h.next(t)
			if !strings.Contains(msg.Text, "exited 0") {
				t.Errorf("completion %q", msg.Text)
			}
			h.noLeftovers(t, tk)
		})
	}
	// Nothing was recorded for the refused ones.
	ts, _ := h.store.Tasks(t.Context(), "p1")
	if len(ts) != 5 {
		t.Errorf("%d tasks recorded, want the 5 accepted", len(ts))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestPerProjectLimit(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxPerProject = 2 })
	m, stop := h.run(t)
	a := h.start(t, m, "sleep 30", 0)
	b := h.start(t, m, "sleep 30", 0)
	_, err := m.Start(t.Context(), p1dev, h.proj, Job{Command: "sleep 30"})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != 2 || le.Project != "p1" || !strings.Contains(err.Error(), "per-project task limit") {
		t.Fatalf("third Start: %v; want a LimitError naming the limit", err)
	}
	// Another project (same agent name) is not counted.
	proj2 := t.TempDir()
	c := h.startFor(t, m, p2dev, proj2, "sleep 30", 0)
	for _, tk := range []Task{a, b, c} {
		if err := m.Kill(t.Context(), tk.Project, tk.ID); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		h.next(t)
	}
	// Room again.
	d := h.start(t, m, "true", 0)
	h.next(t)
	stop()
	h.noMore(t)
	for _, tk := range []Task{a, b, c, d} {
		h.noLeftovers(t, tk)
	}
}

// Output reads the tail of a 100 MB log without loading it.
func TestOutputTailOfHugeLog(t *testing.T) {
	h := newHarness(t, nil)
	m, stop := h.run(t)
	tk := h.start(t, m, "yes 0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ | head -c 104857600; echo; echo END", 0)
	msg := h.next(t)
	stop()
	// Past the default cap of 64 MB: 32 MB in output.log, 32 MB in the ring.
	if size, ok := dirSize(filepath.Join(h.dir, string(tk.ID))); !ok || size > DefaultMaxOutput+8<<10 || size < DefaultMaxOutput {
		t.Errorf("the task folder holds %d bytes; want the cap, %d, and a little more", size, DefaultMaxOutput)
	}
	if !strings.Contains(msg.Text, "the task wrote 100 MB of output, 64 MB kept: the first 32 MB and the last 32 MB (36 MB cut from the middle)") {
		t.Errorf("the completion does not state the cut: %q", msg.Text[:min(len(msg.Text), 400)])
	}
	if len(msg.Text) > 3<<10 || !strings.HasSuffix(msg.Text, "\nEND") {
		t.Errorf("completion text is %d bytes, ends %q; want a bounded tail ending in END", len(msg.Text), msg.Text[max(0, len(msg.Text)-80):])
	}

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, err := m.Output(t.Context(), "p1", tk.ID, 4096)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 4096 || !strings.HasSuffix(out, "\nEND\n") {
		t.Errorf("Output: %d bytes ending %q", len(out), out[max(0, len(out)-60):])
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("Output allocated %d bytes for a 4 KB tail of a 100 MB log", grew)
	}
	if after.HeapAlloc > before.HeapAlloc && after.HeapAlloc-before.HeapAlloc > 10<<20 {
		t.Errorf("heap grew by %d bytes", after.HeapAlloc-before.HeapAlloc)
	}
	// A request above the cap gets the cap.
	out, err = m.Output(t.Context(), "p1", tk.ID, 1<<30)
	if err != nil || len(out) != MaxOutput {
		t.Errorf("Output(1 GB): %d bytes, %v; want MaxOutput", len(out), err)
	}
	if _, err := m.Output(t.Context(), "p2", tk.ID, 10); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Output from another project: %v, want ErrNotFound", err)
	}
	h.noLeftovers(t, tk)
}

// C6: a task that ends while no Manager runs (the daemon is down) is
// reported once by the next Manager, and never again.
func TestC6_TaskThatEndedWhileTheDaemonWasDownIsReportedOnce(t *testing.T) {
	h := newHarness(t, nil)
	_, tk := h.endWhileDown(t)
	h.noMore(t)

	_, stop2 := h.run(t)
	msg := h.next(t)
	stop2()
	if !strings.Contains(msg.Text, "exited 0") || !strings.HasSuffix(msg.Text, "\nfinished") || msg.Key() != p1dev {
		t.Errorf("completion %+v", msg)
	}
	_, stop3 := h.run(t) // and once more: nothing left to report
	stop3()
	h.noMore(t)
	if ms, _ := h.inbox.Conversation(t.Context(), "p1", inbox.Page{}); len(ms) != 1 {
		t.Errorf("%d messages in the store, want 1", len(ms))
	}
	h.noLeftovers(t, tk)
}

// C6: a task still running when its Manager stops is adopted by the next
// one, which sees it end through the pidfd, and reports it once.
func TestC6_TaskRunningAcrossARestartIsAdoptedAndReportedOnce(t *testing.T) {
	h := newHarness(t, nil)
	m1, stop1 := h.run(t)
	gate := fifo(t, "gate")
	tk := h.start(t, m1, `echo started; read x < "`+gate+`"; echo finished`, 0)
	stop1()
	m2, stop2 := h.run(t)
	m2.mu.Lock()
	watched := m2.watching[tk.ID]
	m2.mu.Unlock()
	if !watched {
		t.Fatal("the new Manager does not watch the running task")
	}
	release(t, gate)
	msg := h.next(t)
	stop2()
	h.noMore(t)
	if !strings.Contains(msg.Text, "exited 0") || !strings.HasSuffix(msg.Text, "started\nfinished") {
		t.Errorf("completion %q", msg.Text)
	}
	h.noLeftovers(t, tk)
}

// A task started while Run is not running is watched by the next Run.
func TestStartWithoutRun(t *testing.T) {
	h := newHarness(t, nil)
	m := h.manager()
	tk := h.start(t, m, "echo early", 0)
	_, stop := h.run(t)
	msg := h.next(t)
	stop()
	if !strings.HasSuffix(msg.Text, "\nearly") {
		t.Errorf("completion %q", msg.Text)
	}
	h.noLeftovers(t, tk)
}

// A supervisor killed with SIGKILL: the task ends as lost with the reason,
// and its job, orphaned, is killed.
func TestC6_SupervisorKilledEndsTheTaskAsLost(t *testing.T) {
	h := newHarness(t, nil)
	m, stop := h.run(t)
	ready, gate := fifo(t, "ready"), fifo(t, "gate")
	tk := h.start(t, m, `echo ready > "`+ready+`"; read x < "`+gate+`"; echo never`, 0)
	awaitReady(t, ready)
	var jobs []int
	for _, pid := range sessionMembers(tk.SupervisorPID) {
		if pid != tk.SupervisorPID {
			jobs = append(jobs, pid)
		}
	}
	if len(jobs) == 0 {
		t.Fatal("no job process in the supervisor's session")
	}
	must(t, syscall.Kill(tk.SupervisorPID, syscall.SIGKILL))
	msg := h.next(t)
	stop()
	h.noMore(t)
	got := h.task(t, "p1", tk.ID)
	if got.State != Lost || !strings.Contains(got.Reason, "supervisor (pid") || !strings.Contains(got.Reason, "signal: killed") ||
		!strings.Contains(got.Reason, "without recording how the task ended") || !strings.Contains(got.Reason, "leftover processes of the task were killed") {
		t.Errorf("ended task %+v: want lost with a clear reason", got)
	}
	if !strings.Contains(msg.Text, "was lost after") {
		t.Errorf("completion %q", msg.Text)
	}
	h.noLeftovers(t, tk, jobs...)
}

// A supervisor that vanished while no Manager ran: lost, "while the daemon
// was down".
func TestSupervisorVanishedWhileDown(t *testing.T) {
	h := newHarness(t, nil)
	m1, stop1 := h.run(t)
	ready, gate := fifo(t, "ready"), fifo(t, "gate")
	tk := h.start(t, m1, `echo ready > "`+ready+`"; read x < "`+gate+`"`, 0)
	awaitReady(t, ready)
	stop1()
	jobs := sessionMembers(tk.SupervisorPID)
	must(t, syscall.Kill(tk.SupervisorPID, syscall.SIGKILL))
	waitExit(t, tk.SupervisorPID)
	// The supervisor is this test process's child: reap it, as init would
	// for a daemon that is gone, so the next Manager finds no process.
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(tk.SupervisorPID, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	_, stop2 := h.run(t)
	h.next(t)
	stop2()
	got := h.task(t, "p1", tk.ID)
	if got.State != Lost || !strings.Contains(got.Reason, "the supervisor vanished while the daemon was down") ||
		!strings.Contains(got.Reason, "leftover processes of the task were killed") {
		t.Errorf("ended task %+v", got)
	}
	h.noLeftovers(t, tk, jobs...)
}

// C11/C6: the supervisor has its own session, outside the daemon's process
// group: killing the daemon's group does not reach it. Its stdin is
// /dev/null and its output goes to a file, nothing of the daemon's.
func TestC6_SupervisorHasItsOwnSession(t *testing.T) {
	h := newHarness(t, nil)
	m, stop := h.run(t)
	ready, gate := fifo(t, "ready"), fifo(t, "gate")
	tk := h.start(t, m, `echo ready > "`+ready+`"; read x < "`+gate+`"`, 0)
	awaitReady(t, ready)
	pid := tk.SupervisorPID
	sid, err := unix.Getsid(pid)
	must(t, err)
	mySid, _ := unix.Getsid(0)
	pgid, err := unix.Getpgid(pid)
	must(t, err)
	myPgid, _ := unix.Getpgid(0)
	if sid != pid || sid == mySid || pgid != pid || pgid == myPgid {
		t.Errorf("supervisor %d: session %d, group %d; the test's: %d, %d. Want its own session and group", pid, sid, pgid, mySid, myPgid)
	}
	for fd, want := range map[string]string{"0": "/dev/null", "1": filepath.Join(h.dir, string(tk.ID), supervisorLog), "2": filepath.Join(h.dir, string(tk.ID), supervisorLog)} {
		if got, err := os.Readlink("/proc/" + itoa(pid) + "/fd/" + fd); err != nil || got != want {
			t.Errorf("supervisor fd %s: %s, %v; want %s", fd, got, err, want)
		}
	}
	// The job: same session, its own group.
	var job int
	for _, p := range sessionMembers(pid) {
		if p != pid {
			job = p
		}
	}
	if st, err := procstat.Read(job); err != nil || st.PGRP != job || st.PPID != pid {
		t.Errorf("job %d: %+v, %v; want its own group, child of the supervisor", job, st, err)
	}
	// Its output goes through a pipe the supervisor copies (and caps).
	if got, err := os.Readlink("/proc/" + itoa(job) + "/fd/1"); err != nil || !strings.HasPrefix(got, "pipe:") {
		t.Errorf("job stdout: %s, %v; want a pipe", got, err)
	}
	release(t, gate)
	h.next(t)
	stop()
	h.noLeftovers(t, tk)
}

func itoa(n int) string { return strconv.Itoa(n) }

// C11: the job's environment is built: a few variables of the daemon's,
// Options.Env, nothing else (no secrets, no troupe internals).
func TestC11_JobEnvironmentIsBuilt(t *testing.T) {
	t.Setenv("TROUPE_TEST_SECRET", "hunter2")
	t.Setenv("CLAUDE_CODE_OAUTH_TOKEN", "sk-secret")
	t.Setenv("LANG", "C.UTF-8")
	h := newHarness(t, func(o *Options) { o.Env = []string{"TROUPE_TASK_EXTRA=yes"} })
	m, stop := h.run(t)
	tk := h.start(t, m, "env | sort", 0)
	h.next(t)
	stop()
	out, err := m.Output(t.Context(), "p1", tk.ID, 0)
	must(t, err)
	for _, want := range []string{"PATH=", "LANG=C.UTF-8", "TROUPE_TASK_EXTRA=yes"} {
		if !strings.Contains(out, want) {
			t.Errorf("job env lacks %s:\n%s", want, out)
		}
	}
	for _, bad := range []string{"hunter2", "sk-secret", SupervisorEnv, "GORACE"} {
		if strings.Contains(out, bad) {
			t.Errorf("job env holds %s:\n%s", bad, out)
		}
	}
	h.noLeftovers(t, tk)
}

// C1: two projects, one a copy of the other, same agent names: each task
// is reached and reported within its project only.
func TestC1_TasksAreProjectScoped(t *testing.T) {
	h := newHarness(t, nil)
	m, stop := h.run(t)
	proj2 := t.TempDir()
	g1, g2 := fifo(t, "g1"), fifo(t, "g2")
	a := h.startFor(t, m, p1dev, h.proj, `read x < "`+g1+`"; echo one`, 0)
	b := h.startFor(t, m, p2dev, proj2, `read x < "`+g2+`"; echo two`, 0)
	if _, err := m.Task(t.Context(), "p2", a.ID); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Task(p2, p1's task): %v", err)
	}
	if err := m.Kill(t.Context(), "p1", b.ID); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Kill(p1, p2's task): %v", err)
	}
	if _, err := m.Output(t.Context(), "p1", b.ID, 0); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Output(p1, p2's task): %v", err)
	}
	ts, err := m.Tasks(t.Context(), "p2")
	if err != nil || len(ts) != 1 || ts[0].ID != b.ID {
		t.Errorf("Tasks(p2): %+v, %v", ts, err)
	}
	release(t, g2)
	msg := h.next(t)
	if msg.Key() != p2dev || !strings.HasSuffix(msg.Text, "\ntwo") {
		t.Errorf("first completion %+v, want p2's", msg)
	}
	release(t, g1)
	msg = h.next(t)
	if msg.Key() != p1dev || !strings.HasSuffix(msg.Text, "\none") {
		t.Errorf("second completion %+v, want p1's", msg)
	}
	stop()
	h.noMore(t)
	h.noLeftovers(t, a)
	h.noLeftovers(t, b)
}

// The person has no inbox: the completion is recorded as delivered, and
// still notified (for the UI).
func TestPersonOwnedTask(t *testing.T) {
	h := newHarness(t, nil)
	m, stop := h.run(t)
	tk := h.startFor(t, m, troupe.RuntimeKey{Project: "p1", Agent: troupe.Person}, h.proj, "echo hi", 0)
	msg := h.next(t)
	stop()
	if msg.State != troupe.MsgDelivered || msg.To != troupe.Person {
		t.Errorf("completion %+v: want delivered to the person", msg)
	}
	h.noLeftovers(t, tk)
}

// A job /bin/sh cannot start (its cwd was removed after Start checked it)
// ends as failed, with the reason.
func TestSuperviseRecordsStartFailure(t *testing.T) {
	dir := t.TempDir()
	st := supervise(dir, spec{ID: "x", Command: "true", Cwd: filepath.Join(dir, "removed"), KillGrace: time.Second}, nil)
	if st.State != Failed || st.ExitCode != -1 || !strings.Contains(st.Reason, "start /bin/sh -c") || st.EndedAt.IsZero() {
		t.Errorf("status %+v: want failed with the reason", st)
	}
	if _, err := readSpec(dir); err == nil || !strings.Contains(err.Error(), "read task spec") {
		t.Errorf("readSpec of a folder without spec: %v", err)
	}
}

// TestC6_AJobNeverRunsUnrecorded: the supervisor waits at its start gate
// until the task is in the store. A daemon that dies between starting the
// supervisor and recording the task closes the gate unopened (simulated
// here): the job never runs and the supervisor records why.
func TestC6_AJobNeverRunsUnrecorded(t *testing.T) {
	h := newHarness(t, nil)
	m := h.manager()
	_, taskDir, err := m.newTaskDir("")
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(h.proj, "ran")
	b, _ := json.Marshal(spec{ID: "x", Command: "touch " + marker, Cwd: h.proj, KillGrace: time.Second})
	if err := atomicfile.Write(filepath.Join(taskDir, specFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	sup, _, err := m.spawn(taskDir)
	if err != nil {
		t.Fatal(err)
	}
	sup.closeGate() // the daemon "died" before recording the task
	if _, err := sup.proc.Wait(); err != nil {
		t.Fatal(err)
	}
	sup.fd.Close()
	raw, err := os.ReadFile(filepath.Join(taskDir, statusFile))
	if err != nil || !strings.Contains(string(raw), "never ran") {
		t.Fatalf("status = %s, %v; want the never-ran reason", raw, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the job ran although its task was never recorded")
	}
}

// TestRunPrunesTheFoldersOfOldTasks: at start, the folders of tasks that
// ended longer ago than the retention go; running and recent ones stay, and
// asking for a pruned task's output says it is no longer kept.
func TestRunPrunesTheFoldersOfOldTasks(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Retention = time.Hour })
	m, stop := h.run(t)
	old := h.start(t, m, "echo old", 0)
	h.next(t)
	recent := h.start(t, m, "echo recent", 0)
	h.next(t)
	gate := fifo(t, "gate")
	running := h.start(t, m, "read x < "+gate, 0)
	stop()
	past := time.Now().Add(-2 * time.Hour)
	os.Chtimes(filepath.Join(h.dir, string(old.ID), statusFile), past, past)

	m, stop = h.run(t)
	defer stop()
	if _, err := os.Stat(filepath.Join(h.dir, string(old.ID))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old task's folder is still there: %v", err)
	}
	for _, tk := range []Task{recent, running} {
		if _, err := os.Stat(filepath.Join(h.dir, string(tk.ID))); err != nil {
			t.Errorf("task %s lost its folder: %v", tk.Command, err)
		}
	}
	if _, err := m.Output(t.Context(), old.Project, old.ID, 100); err == nil || !strings.Contains(err.Error(), "no longer kept") {
		t.Errorf("output of a pruned task: %v", err)
	}
	release(t, gate)
	h.next(t)
}
