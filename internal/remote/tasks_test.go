package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/bus"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// taskSide is the daemon's task manager over the rig's daemon: its rows
// and inbox in memory, its runners' tasks through Daemon.Tasks, their
// ends from Daemon.OnTaskEnd; notes receives each completion notified.
type taskSide struct {
	m     *task.Manager
	store *task.MemStore
	inbox *inbox.MemStore
	notes chan troupe.Message
}

func (rg *rig) tasks() *taskSide {
	t := rg.t
	ts := &taskSide{store: task.NewMemStore(), inbox: inbox.NewMemStore(), notes: make(chan troupe.Message, 16)}
	ts.m = task.New(task.Options{Store: ts.store, Inbox: ts.inbox, Dir: filepath.Join(t.TempDir(), "tasks"),
		Supervisor: task.TestSupervisorCommand(), Remote: rg.d.Tasks()})
	ts.m.OnComplete(func(m troupe.Message) { ts.notes <- m })
	rg.d.SetTasks(ts.m)
	ctx, cancel := context.WithCancel(rg.ctx)
	done := make(chan struct{})
	go func() { ts.m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ts
}

// next is the next completion notified.
func (ts *taskSide) next(t *testing.T) troupe.Message {
	t.Helper()
	select {
	case m := <-ts.notes:
		return m
	case <-time.After(patience):
		t.Fatal("no task completion")
		return troupe.Message{}
	}
}

// completions are the task messages in p1.
func (ts *taskSide) completions(t *testing.T) []troupe.Message {
	t.Helper()
	ms, err := ts.inbox.Conversation(context.Background(), "p1", inbox.Page{})
	if err != nil {
		t.Fatal(err)
	}
	var out []troupe.Message
	for _, m := range ms {
		if m.Kind == troupe.KindTask {
			out = append(out, m)
		}
	}
	return out
}

// gate is a named pipe a task blocks on until the test opens it.
func gate(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func open(t *testing.T, fifo string) {
	t.Helper()
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // blocks until the task reads
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "go")
	f.Close()
}

// TestTaskRunsOnTheRunner: run_in_background of an agent on a runner
// runs there, in its worktree on the runner; the daemon keeps its row
// (the runner named), reads its output and kills it through the runner;
// each end reaches the owner once, a redelivery of the same end
// (published again past the stream's duplicate window) being no second
// message.
func TestTaskRunsOnTheRunner(t *testing.T) {
	rg := newRig(t)
	root, _ := rg.runner("r1")
	ts := rg.tasks()
	s := rg.start()
	defer s.Close(context.Background())
	fifo := gate(t)

	tk, err := ts.m.Start(rg.ctx, key, "", task.Job{Command: "read line < " + fifo + "; echo $line from $(pwd)", Remote: true})
	if err != nil {
		t.Fatal(err)
	}
	if tk.Runner != "r1" || tk.State != task.Running {
		t.Fatalf("started %+v, want running on r1", tk)
	}
	open(t, fifo)
	msg := ts.next(t)
	work := filepath.Join(root, "p1", "repo", "troupe", "worktrees", "coder")
	if msg.To != "coder" || !strings.Contains(msg.Text, "exited 0") || !strings.Contains(msg.Text, "go from "+work) {
		t.Fatalf("completion %+v, want exited 0 with the runner's worktree %s", msg, work)
	}
	got, err := ts.m.Task(rg.ctx, "p1", tk.ID)
	if err != nil || got.State != task.Exited || got.Runner != "r1" || got.MessageID != msg.ID {
		t.Fatalf("row %+v, %v: want exited on r1 with message %d", got, err, msg.ID)
	}
	out, err := ts.m.Output(rg.ctx, "p1", tk.ID, 0)
	if err != nil || out != "go from "+work+"\n" {
		t.Errorf("output read through the runner: %q, %v", out, err)
	}

	// The same end again, as a runner restarted long after would send it:
	// the daemon's key keeps one message.
	again, err := json.Marshal(durable{TaskEnd: &task.Ended{Task: got, Result: task.Result{State: task.Exited, ExitCode: 7}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rg.d.o.Conn.Request(bus.Durable("r1")+".task", again, patience); err != nil {
		t.Fatal(err)
	}
	// A kill and its end: its end follows the republished one in r1's
	// stream, so once it is handled the republished one was too.
	fifo2 := gate(t)
	tk2, err := ts.m.Start(rg.ctx, key, "", task.Job{Command: "cat " + fifo2, Remote: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.m.Kill(rg.ctx, "p1", tk2.ID); err != nil {
		t.Fatal(err)
	}
	if msg := ts.next(t); !strings.Contains(msg.Text, string(tk2.ID)) || !strings.Contains(msg.Text, "was killed") {
		t.Fatalf("completion of the killed task: %+v", msg)
	}
	if got, _ := ts.m.Task(rg.ctx, "p1", tk2.ID); got.State != task.Killed {
		t.Errorf("killed task's row: %+v", got)
	}
	if ms := ts.completions(t); len(ms) != 2 {
		t.Errorf("%d completions, want 2 (one per task): %+v", len(ms), ms)
	}
	if got, _ := ts.m.Task(rg.ctx, "p1", tk.ID); got.ExitCode != 0 {
		t.Errorf("the republished end changed the row: %+v", got)
	}
}

// TestRestartedRunnerReportsItsTasksEnd: a runner stopped while its task
// runs; the task ends while it is away; started again on the same root,
// it adopts the task (its supervisor outlived it) and reports the end,
// once.
func TestRestartedRunnerReportsItsTasksEnd(t *testing.T) {
	rg := newRig(t)
	creds, err := rg.srv.AddRunner("r1")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	stop := rg.runnerOn(creds, root)
	ts := rg.tasks()
	s := rg.start()
	fifo := gate(t)
	tk, err := ts.m.Start(rg.ctx, key, "", task.Job{Command: "read line < " + fifo + "; echo $line; exit 3", Remote: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close(context.Background())
	stop()
	open(t, fifo) // the task ends while no runner runs
	rg.runnerOn(creds, root)
	msg := ts.next(t)
	if !strings.Contains(msg.Text, string(tk.ID)) || !strings.Contains(msg.Text, "exited 3") || !strings.Contains(msg.Text, "go") {
		t.Fatalf("completion after the runner's restart: %+v", msg)
	}
	if ms := ts.completions(t); len(ms) != 1 {
		t.Errorf("%d completions, want 1", len(ms))
	}
}

// runnerOn runs runner creds.Name on root until stop (or the test's
// end), and waits for its first answered hello.
func (rg *rig) runnerOn(creds bus.Creds, root string) (stop func()) {
	t := rg.t
	t.Helper()
	var r *Runner
	nc, err := bus.Dial(rg.ctx, creds, nil, func() { r.Reconnected() })
	if err != nil {
		t.Fatal(err)
	}
	r = NewRunner(RunnerOptions{Conn: nc, Name: creds.Name, Root: root, Engines: rg.engines, TaskSupervisor: task.TestSupervisorCommand()})
	ctx, cancel := context.WithCancel(rg.ctx)
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	stop = func() {
		cancel()
		<-done
		nc.Close()
	}
	t.Cleanup(stop)
	greeted(t, r)
	return stop
}

// TestRemoteTaskOfAGoneRunner: the output and the kill of a task whose
// runner is not connected fail at once, naming the runner; a start of an
// agent with no session on a runner says so.
func TestRemoteTaskOfAGoneRunner(t *testing.T) {
	rg := newRig(t)
	_, stop := rg.runner("r1")
	ts := rg.tasks()
	s := rg.start()
	fifo := gate(t)
	tk, err := ts.m.Start(rg.ctx, key, "", task.Job{Command: "cat " + fifo, Remote: true})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	closed(t, s) // the daemon counts r1 unreachable
	_, err = ts.m.Output(rg.ctx, "p1", tk.ID, 0)
	var u *engine.Unreachable
	if !errors.As(err, &u) || u.Runner != "r1" || !strings.Contains(err.Error(), "runner r1") {
		t.Errorf("output of a gone runner's task: %v", err)
	}
	if err := ts.m.Kill(rg.ctx, "p1", tk.ID); !errors.As(err, &u) || u.Runner != "r1" {
		t.Errorf("kill of a gone runner's task: %v", err)
	}
	if _, err := ts.m.Start(rg.ctx, key, "", task.Job{Command: "true", Remote: true}); err == nil || !strings.Contains(err.Error(), "no session on a runner") {
		t.Errorf("start without a session: %v", err)
	}
	open(t, fifo)
}

// closed waits for s's events to close.
func closed(t *testing.T, s engine.Session) {
	t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case _, ok := <-s.Events():
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("session still open")
		}
	}
}

// TestATaskItsRunnerDoesNotKnowIsLost: a task the daemon records as
// running on a runner that has no record of it (its root was reset, or
// the daemon died between the row and the start) ends lost, naming the
// runner, when the runner says hello; once.
func TestATaskItsRunnerDoesNotKnowIsLost(t *testing.T) {
	rg := newRig(t)
	ts := rg.tasks()
	row := task.Task{ID: "0badc0de", Project: "p1", Owner: "coder", Command: "make", Cwd: ".", Runner: "r1"}
	if err := ts.store.CreateTask(rg.ctx, row); err != nil {
		t.Fatal(err)
	}
	rg.runner("r1")
	msg := ts.next(t)
	if !strings.Contains(msg.Text, "0badc0de") || !strings.Contains(msg.Text, "was lost") || !strings.Contains(msg.Text, "runner r1 has no record of it") {
		t.Fatalf("completion %+v", msg)
	}
	if got, _ := ts.m.Task(rg.ctx, "p1", row.ID); got.State != task.Lost {
		t.Errorf("row %+v, want lost", got)
	}
	if ms := ts.completions(t); len(ms) != 1 {
		t.Errorf("%d completions, want 1", len(ms))
	}
}

// TestARevokedRunnersTasksEndLost: a runner dropped (revoked) with a task
// running can never report its end: the task ends lost at once, its owner
// told once, saying why.
func TestARevokedRunnersTasksEndLost(t *testing.T) {
	rg := newRig(t)
	rg.runner("r1")
	ts := rg.tasks()
	s := rg.start()
	defer s.Close(context.Background())
	fifo := gate(t)
	tk, err := ts.m.Start(rg.ctx, key, "", task.Job{Command: "read line < " + fifo, Remote: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := rg.d.Drop(rg.ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	msg := ts.next(t)
	if !strings.Contains(msg.Text, "lost") || !strings.Contains(msg.Text, "runner r1 was revoked") {
		t.Fatalf("completion %+v, want the task lost because r1 was revoked", msg)
	}
	got, err := ts.m.Task(rg.ctx, "p1", tk.ID)
	if err != nil || got.State != task.Lost {
		t.Fatalf("row %+v, %v: want lost", got, err)
	}
	if n := len(ts.completions(t)); n != 1 {
		t.Errorf("%d completions, want 1", n)
	}
	open(t, fifo) // let the orphaned job end
}
