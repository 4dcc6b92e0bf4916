package task

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// fakeRemote is a Remote whose runner "r1" records what it is asked.
type fakeRemote struct {
	mu      sync.Mutex
	started []Job
	killed  []ID
	fail    error
	hold    chan struct{} // non-nil: Start waits for it (asked says it was asked)
	asked   chan struct{}
}

func (f *fakeRemote) RunnerOf(troupe.RuntimeKey) (string, error) { return "r1", nil }
func (f *fakeRemote) Start(_ context.Context, t Task, j Job) error {
	if f.hold != nil {
		f.asked <- struct{}{}
		<-f.hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, j)
	return f.fail
}
func (f *fakeRemote) Kill(_ context.Context, t Task) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.killed = append(f.killed, t.ID)
	return nil
}
func (f *fakeRemote) Output(context.Context, Task, int) (string, OutputSize, error) {
	return "from r1", OutputSize{Total: 7}, nil
}

// TestRemoteTaskRowAndItsEnd: a task of an owner on a runner is recorded
// here (its runner named), started there with the row's id and this
// daemon's output cap; a restarted Manager does not take it for lost; its
// end is taken from its own runner only, bounded, once; output and kill go
// to the runner.
func TestRemoteTaskRowAndItsEnd(t *testing.T) {
	rem := &fakeRemote{}
	h := newHarness(t, func(o *Options) { o.Remote = rem; o.MaxOutput = 1 << 20 })
	m, stop := h.run(t)
	tk, err := m.Start(t.Context(), p1dev, "", Job{Command: "make test", Cwd: "sub", Remote: true})
	if err != nil {
		t.Fatal(err)
	}
	if tk.Runner != "r1" || tk.State != Running || tk.SupervisorPID != 0 || tk.Cwd != "sub" {
		t.Fatalf("row %+v", tk)
	}
	if len(rem.started) != 1 || rem.started[0].ID != tk.ID || rem.started[0].MaxOutput != 1<<20 {
		t.Fatalf("asked the runner %+v, want the row's id and the cap", rem.started)
	}
	stop()
	m, _ = h.run(t) // adoption leaves a runner's task to its runner
	if got := h.task(t, "p1", tk.ID); got.State != Running {
		t.Fatalf("a restarted Manager ended the runner's task: %+v", got)
	}
	if out, err := m.Output(t.Context(), "p1", tk.ID, 0); err != nil || out != "from r1" {
		t.Errorf("output %q, %v", out, err)
	}
	if err := m.Kill(t.Context(), "p1", tk.ID); err != nil || len(rem.killed) != 1 {
		t.Errorf("kill: %v, the runner asked %v", err, rem.killed)
	}

	end := Ended{Task: tk, Result: Result{State: Exited, ExitCode: 2, Reason: strings.Repeat("r", 1<<20)},
		Stopped: &Stopped{Count: 1000, Signal: "SIGKILL", Procs: make([]StoppedProc, 1000)}, Tail: []byte("last line\n")}
	if err := m.CompleteRemote(t.Context(), "r2", end); !errors.Is(err, troupe.ErrNotFound) {
		t.Fatalf("another runner's report: %v, want refused", err)
	}
	other := end
	other.Task.Project = "p2"
	if err := m.CompleteRemote(t.Context(), "r1", other); !errors.Is(err, troupe.ErrNotFound) {
		t.Fatalf("a report naming another project: %v, want refused", err)
	}
	h.noMore(t)
	for range 2 {
		if err := m.CompleteRemote(t.Context(), "r1", end); err != nil {
			t.Fatal(err)
		}
	}
	msg := h.next(t)
	h.noMore(t)
	if !strings.Contains(msg.Text, "exited 2") || !strings.Contains(msg.Text, "last line") || len(msg.Text) > 8<<10 {
		t.Errorf("completion (%d bytes): %.300q", len(msg.Text), msg.Text)
	}
	if got := h.task(t, "p1", tk.ID); got.State != Exited || got.ExitCode != 2 || got.MessageID != msg.ID || len(got.Reason) > 8<<10 {
		t.Errorf("row after the end: state %s exit %d message %d reason %d bytes", got.State, got.ExitCode, got.MessageID, len(got.Reason))
	}
}

// TestRemoteTaskThatDoesNotStart: a runner that refuses the start fails
// the call and the task, whose completion says why, once.
func TestRemoteTaskThatDoesNotStart(t *testing.T) {
	rem := &fakeRemote{fail: errors.New("runner r1 runs no background tasks")}
	h := newHarness(t, func(o *Options) { o.Remote = rem })
	m, _ := h.run(t)
	if _, err := m.Start(t.Context(), p1dev, "", Job{Command: "true", Remote: true}); err == nil || !strings.Contains(err.Error(), "runner r1") {
		t.Fatalf("start refused by its runner: %v", err)
	}
	msg := h.next(t)
	if !strings.Contains(msg.Text, "failed") || !strings.Contains(msg.Text, "runs no background tasks") {
		t.Errorf("completion %q", msg.Text)
	}
	ts, _ := h.store.RunningTasks(t.Context())
	if len(ts) != 0 {
		t.Errorf("running after a refused start: %+v", ts)
	}
	// Without a runners' link, an owner on a runner is told so.
	h2 := newHarness(t, nil)
	if _, err := h2.manager().Start(t.Context(), p1dev, "", Job{Command: "true", Remote: true}); err == nil || !strings.Contains(err.Error(), "no runners' link") {
		t.Errorf("start on a runner without a link: %v", err)
	}
}

// TestRunningOnLeavesOutTasksBeingStarted: while a runner takes its time
// to answer a start, the task is not listed as its (its hello's check
// would call it lost) and other starts go on; once answered, it is.
func TestRunningOnLeavesOutTasksBeingStarted(t *testing.T) {
	rem := &fakeRemote{hold: make(chan struct{}), asked: make(chan struct{}, 1)}
	h := newHarness(t, func(o *Options) { o.Remote = rem })
	m, _ := h.run(t)
	done := make(chan Task, 1)
	go func() {
		tk, err := m.Start(context.Background(), p1dev, "", Job{Command: "make", Remote: true})
		if err != nil {
			t.Error(err)
		}
		done <- tk
	}()
	<-rem.asked
	if ts, err := m.RunningOn(t.Context(), "r1"); err != nil || len(ts) != 0 {
		t.Errorf("RunningOn while the start waits: %+v, %v", ts, err)
	}
	local := h.start(t, m, "true", 0) // not held up by the runner
	if local.Runner != "" {
		t.Errorf("local task %+v", local)
	}
	close(rem.hold)
	tk := <-done
	if ts, err := m.RunningOn(t.Context(), "r1"); err != nil || len(ts) != 1 || ts[0].ID != tk.ID {
		t.Errorf("RunningOn once answered: %+v, %v; want %s", ts, err, tk.ID)
	}
}
