// Package tasktest holds the contract suite of task.Store (contracts C1 and
// C6 as the store sees them): tasks scoped by project, the running list,
// and a completion that records the end and queues its message in one
// step, exactly once, also under concurrent calls. Every Store
// implementation runs it, so the SQLite store is held to the behaviour of
// task.MemStore, the reference.
//
// Store tests import it (internal/store/sqlite, and this package's own test
// for MemStore); production code never does. It imports only the standard
// library, internal/troupe and internal/task. RunStore starts goroutines
// only inside its concurrency subtest and waits for them; that subtest is
// meaningful under -race.
package tasktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Messages lists every message of project p that the store holds, in ID
// order: how the suite sees the inbox side of CompleteTask.
type Messages func(ctx context.Context, p troupe.ProjectID) ([]troupe.Message, error)

// RunStore runs the task.Store contract against the stores that open
// returns. open is called once per subtest and must return a new, empty
// store and a way to list its messages; it registers any cleanup with
// t.Cleanup.
//
// Times must come back as the same instant to the nanosecond
// (time.Time.Equal); the location and the monotonic reading may be dropped.
func RunStore(t *testing.T, open func(t *testing.T) (task.Store, Messages)) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s task.Store, msgs Messages)
	}{
		{"CreateAndGet", testCreateAndGet},
		{"CreateDefaults", testCreateDefaults},
		{"CreateDuplicate", testCreateDuplicate},
		{"CreateInvalid", testCreateInvalid},
		{"ProjectScope", testProjectScope},
		{"TasksOrder", testTasksOrder},
		{"RunningTasks", testRunningTasks},
		{"CompleteQueuesOnce", testCompleteQueuesOnce},
		{"CompleteForPerson", testCompleteForPerson},
		{"CompleteKeepsTimes", testCompleteKeepsTimes},
		{"CompleteUnknown", testCompleteUnknown},
		{"CompleteInvalid", testCompleteInvalid},
		{"CompleteConcurrent", testCompleteConcurrent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, msgs := open(t)
			tc.fn(t, s, msgs)
		})
	}
}

var base = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

func newTask(id task.ID, p troupe.ProjectID, owner troupe.AgentID) task.Task {
	return task.Task{
		ID: id, Project: p, Owner: owner, Command: "make test", Cwd: "/src/" + string(p),
		Timeout: 90 * time.Second, State: task.Running, StartedAt: base,
		SupervisorPID: 4242, SupervisorStart: 987654321,
	}
}

func create(t *testing.T, s task.Store, tk task.Task) {
	t.Helper()
	if err := s.CreateTask(t.Context(), tk); err != nil {
		t.Fatalf("CreateTask(%s): %v", tk.ID, err)
	}
}

func get(t *testing.T, s task.Store, p troupe.ProjectID, id task.ID) task.Task {
	t.Helper()
	tk, err := s.Task(t.Context(), p, id)
	if err != nil {
		t.Fatalf("Task(%s, %s): %v", p, id, err)
	}
	return tk
}

// same compares tasks, times with Equal.
func same(t *testing.T, got, want task.Task) {
	t.Helper()
	if !got.StartedAt.Equal(want.StartedAt) || !got.EndedAt.Equal(want.EndedAt) {
		t.Errorf("times: got started %v ended %v, want %v, %v", got.StartedAt, got.EndedAt, want.StartedAt, want.EndedAt)
	}
	got.StartedAt, got.EndedAt, want.StartedAt, want.EndedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if got != want {
		t.Errorf("task:\n got %+v\nwant %+v", got, want)
	}
}

func ids(ts []task.Task) []task.ID {
	var out []task.ID
	for _, tk := range ts {
		out = append(out, tk.ID)
	}
	return out
}

func sameIDs(t *testing.T, what string, got []task.Task, want ...task.ID) {
	t.Helper()
	g := ids(got)
	if fmt.Sprint(g) != fmt.Sprint(want) {
		t.Errorf("%s: got %v, want %v", what, g, want)
	}
}

func messages(t *testing.T, msgs Messages, p troupe.ProjectID) []troupe.Message {
	t.Helper()
	ms, err := msgs(t.Context(), p)
	if err != nil {
		t.Fatalf("messages of %s: %v", p, err)
	}
	return ms
}

func completion(tk task.Task) troupe.Message {
	return troupe.Message{Project: tk.Project, To: tk.Owner, From: task.From, Kind: troupe.KindTask,
		Text: "task " + string(tk.ID) + " `make test` exited 0 after 1.0s."}
}

func testCreateAndGet(t *testing.T, s task.Store, _ Messages) {
	want := newTask("a1", "p1", "dev")
	create(t, s, want)
	same(t, get(t, s, "p1", "a1"), want)
}

func testCreateDefaults(t *testing.T, s task.Store, _ Messages) {
	tk := newTask("a1", "p1", "dev")
	tk.State, tk.StartedAt = "", time.Time{}
	before := time.Now()
	create(t, s, tk)
	got := get(t, s, "p1", "a1")
	if got.State != task.Running {
		t.Errorf("state %q, want running", got.State)
	}
	if got.StartedAt.Before(before.Add(-time.Second)) || got.StartedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("started_at %v, want about now", got.StartedAt)
	}
}

func testCreateDuplicate(t *testing.T, s task.Store, _ Messages) {
	create(t, s, newTask("a1", "p1", "dev"))
	err := s.CreateTask(t.Context(), newTask("a1", "p2", "dev"))
	if !errors.Is(err, troupe.ErrAlreadyExists) {
		t.Fatalf("duplicate id: %v, want ErrAlreadyExists", err)
	}
	if _, err := s.Task(t.Context(), "p2", "a1"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("the duplicate was recorded in p2: %v", err)
	}
}

func testCreateInvalid(t *testing.T, s task.Store, _ Messages) {
	for name, edit := range map[string]func(*task.Task){
		"no id":      func(tk *task.Task) { tk.ID = "" },
		"no project": func(tk *task.Task) { tk.Project = "" },
		"no owner":   func(tk *task.Task) { tk.Owner = "" },
		"no command": func(tk *task.Task) { tk.Command = "" },
		"ended":      func(tk *task.Task) { tk.State = task.Exited },
	} {
		tk := newTask("bad", "p1", "dev")
		edit(&tk)
		if err := s.CreateTask(t.Context(), tk); !errors.Is(err, troupe.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if ts, err := s.RunningTasks(t.Context()); err != nil || len(ts) != 0 {
		t.Errorf("after invalid creates: running %v, %v; want none", ids(ts), err)
	}
}

// C1: a task is reached through its project only, even with the same
// agent ids in both projects (a cp -r of a project).
func testProjectScope(t *testing.T, s task.Store, msgs Messages) {
	create(t, s, newTask("a1", "p1", "dev"))
	create(t, s, newTask("b1", "p2", "dev"))
	if _, err := s.Task(t.Context(), "p2", "a1"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Task(p2, a1 of p1): %v, want ErrNotFound", err)
	}
	if _, err := s.Task(t.Context(), "p1", "zz"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Task(unknown): %v, want ErrNotFound", err)
	}
	ts, err := s.Tasks(t.Context(), "p1")
	if err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "Tasks(p1)", ts, "a1")
	tk := get(t, s, "p2", "b1")
	if _, done, err := s.CompleteTask(t.Context(), "b1", task.Result{State: task.Exited}, completion(tk)); err != nil || !done {
		t.Fatalf("CompleteTask(b1): done %v, %v", done, err)
	}
	if ms := messages(t, msgs, "p1"); len(ms) != 0 {
		t.Errorf("p1 got p2's completion: %+v", ms)
	}
	if ms := messages(t, msgs, "p2"); len(ms) != 1 || ms[0].Key() != (troupe.RuntimeKey{Project: "p2", Agent: "dev"}) {
		t.Errorf("p2's messages: %+v, want one for p2/dev", ms)
	}
	if got := get(t, s, "p1", "a1"); got.State != task.Running {
		t.Errorf("p1's a1 is %s after p2's b1 ended", got.State)
	}
}

func testTasksOrder(t *testing.T, s task.Store, _ Messages) {
	// Creation order, whatever the ids and start times say.
	for i, id := range []task.ID{"c3", "a1", "b2"} {
		tk := newTask(id, "p1", "dev")
		tk.StartedAt = base.Add(-time.Duration(i) * time.Hour)
		create(t, s, tk)
	}
	ts, err := s.Tasks(t.Context(), "p1")
	if err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "Tasks(p1)", ts, "c3", "a1", "b2")
	if ts, err := s.Tasks(t.Context(), "nobody"); err != nil || len(ts) != 0 {
		t.Errorf("Tasks(unknown project): %v, %v; want none", ids(ts), err)
	}
}

func testRunningTasks(t *testing.T, s task.Store, _ Messages) {
	create(t, s, newTask("a1", "p1", "dev"))
	create(t, s, newTask("a2", "p1", "dev"))
	create(t, s, newTask("b1", "p2", "dev"))
	tk := get(t, s, "p1", "a2")
	if _, _, err := s.CompleteTask(t.Context(), "a2", task.Result{State: task.Killed}, completion(tk)); err != nil {
		t.Fatal(err)
	}
	ts, err := s.RunningTasks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[task.ID]bool{}
	for _, tk := range ts {
		got[tk.ID] = true
		if tk.State != task.Running {
			t.Errorf("RunningTasks gave %s in state %s", tk.ID, tk.State)
		}
	}
	if len(ts) != 2 || !got["a1"] || !got["b1"] {
		t.Errorf("RunningTasks: %v, want a1 and b1", ids(ts))
	}
}

func testCompleteQueuesOnce(t *testing.T, s task.Store, msgs Messages) {
	tk := newTask("a1", "p1", "dev")
	create(t, s, tk)
	end := task.Result{State: task.Exited, ExitCode: 3, EndedAt: base.Add(3 * time.Second)}
	msg := completion(tk)
	stored, done, err := s.CompleteTask(t.Context(), "a1", end, msg)
	if err != nil || !done {
		t.Fatalf("CompleteTask: done %v, %v", done, err)
	}
	if stored.ID <= 0 || stored.State != troupe.MsgQueued || stored.Kind != troupe.KindTask ||
		stored.Key() != tk.Key() || stored.From != task.From || stored.Text != msg.Text || stored.CreatedAt.IsZero() {
		t.Errorf("stored message %+v: want a queued task message to p1/dev with an id", stored)
	}
	want := tk
	want.State, want.ExitCode, want.EndedAt, want.Notified = task.Exited, 3, end.EndedAt, true
	same(t, get(t, s, "p1", "a1"), want)

	again := end
	again.State, again.ExitCode = task.Killed, 9
	if m, done, err := s.CompleteTask(t.Context(), "a1", again, msg); err != nil || done || m.ID != 0 {
		t.Errorf("second CompleteTask: %+v, done %v, %v; want nothing, false, nil", m, done, err)
	}
	same(t, get(t, s, "p1", "a1"), want)
	ms := messages(t, msgs, "p1")
	if len(ms) != 1 || ms[0].ID != stored.ID || ms[0].State != troupe.MsgQueued || ms[0].Text != msg.Text {
		t.Errorf("messages: %+v, want only the one queued completion", ms)
	}
}

func testCompleteForPerson(t *testing.T, s task.Store, msgs Messages) {
	tk := newTask("a1", "p1", troupe.Person)
	create(t, s, tk)
	// Project, To and Kind come from the task when empty.
	stored, done, err := s.CompleteTask(t.Context(), "a1", task.Result{State: task.TimedOut, ExitCode: -1, Signal: "SIGTERM", Reason: "ran past its timeout"},
		troupe.Message{From: task.From, Text: "done"})
	if err != nil || !done {
		t.Fatalf("CompleteTask: done %v, %v", done, err)
	}
	if stored.State != troupe.MsgDelivered || stored.DoneAt.IsZero() || stored.Key() != tk.Key() || stored.Kind != troupe.KindTask {
		t.Errorf("person's completion %+v: want delivered (the person has no inbox), kind task, to p1/@person", stored)
	}
	got := get(t, s, "p1", "a1")
	if got.State != task.TimedOut || got.Signal != "SIGTERM" || got.Reason != "ran past its timeout" || got.ExitCode != -1 || !got.Notified || got.EndedAt.IsZero() {
		t.Errorf("task after completion: %+v", got)
	}
	if ms := messages(t, msgs, "p1"); len(ms) != 1 || ms[0].State != troupe.MsgDelivered {
		t.Errorf("messages %+v, want one delivered", ms)
	}
}

func testCompleteKeepsTimes(t *testing.T, s task.Store, msgs Messages) {
	tk := newTask("a1", "p1", "dev")
	create(t, s, tk)
	msg := completion(tk)
	msg.CreatedAt = base.Add(time.Minute)
	stored, _, err := s.CompleteTask(t.Context(), "a1", task.Result{State: task.Exited, EndedAt: base.Add(30 * time.Second)}, msg)
	if err != nil {
		t.Fatal(err)
	}
	if !stored.CreatedAt.Equal(msg.CreatedAt) {
		t.Errorf("message created_at %v, want %v", stored.CreatedAt, msg.CreatedAt)
	}
	if got := get(t, s, "p1", "a1"); !got.EndedAt.Equal(base.Add(30 * time.Second)) {
		t.Errorf("ended_at %v, want %v", got.EndedAt, base.Add(30*time.Second))
	}
	// Without an end time, the store sets now.
	tk2 := newTask("a2", "p1", "dev")
	create(t, s, tk2)
	before := time.Now()
	if _, _, err := s.CompleteTask(t.Context(), "a2", task.Result{State: task.Lost}, completion(tk2)); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "p1", "a2"); got.EndedAt.Before(before.Add(-time.Second)) || got.EndedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("ended_at %v, want about now", got.EndedAt)
	}
	if ms := messages(t, msgs, "p1"); len(ms) != 2 || ms[0].ID >= ms[1].ID {
		t.Errorf("messages %+v, want two in increasing id order", ms)
	}
}

func testCompleteUnknown(t *testing.T, s task.Store, msgs Messages) {
	_, done, err := s.CompleteTask(t.Context(), "nope", task.Result{State: task.Exited},
		troupe.Message{Project: "p1", To: "dev", From: task.From, Kind: troupe.KindTask, Text: "x"})
	if !errors.Is(err, troupe.ErrNotFound) || done {
		t.Errorf("CompleteTask(unknown): done %v, %v; want ErrNotFound", done, err)
	}
	if ms := messages(t, msgs, "p1"); len(ms) != 0 {
		t.Errorf("messages %+v, want none", ms)
	}
}

func testCompleteInvalid(t *testing.T, s task.Store, msgs Messages) {
	tk := newTask("a1", "p1", "dev")
	create(t, s, tk)
	good := completion(tk)
	for name, tc := range map[string]struct {
		end task.Result
		msg func(troupe.Message) troupe.Message
	}{
		"running end":   {task.Result{State: task.Running}, nil},
		"empty end":     {task.Result{}, nil},
		"other project": {task.Result{State: task.Exited}, func(m troupe.Message) troupe.Message { m.Project = "p2"; return m }},
		"other agent":   {task.Result{State: task.Exited}, func(m troupe.Message) troupe.Message { m.To = "qa"; return m }},
		"other kind":    {task.Result{State: task.Exited}, func(m troupe.Message) troupe.Message { m.Kind = troupe.KindMessage; return m }},
	} {
		msg := good
		if tc.msg != nil {
			msg = tc.msg(msg)
		}
		if _, done, err := s.CompleteTask(t.Context(), "a1", tc.end, msg); !errors.Is(err, troupe.ErrInvalid) || done {
			t.Errorf("%s: done %v, %v; want ErrInvalid", name, done, err)
		}
	}
	same(t, get(t, s, "p1", "a1"), tk)
	for _, p := range []troupe.ProjectID{"p1", "p2"} {
		if ms := messages(t, msgs, p); len(ms) != 0 {
			t.Errorf("messages of %s: %+v, want none", p, ms)
		}
	}
}

// Two watchers (an old and a new Manager, or adoption racing a live
// watcher) may complete the same task: exactly one wins.
func testCompleteConcurrent(t *testing.T, s task.Store, msgs Messages) {
	const tasks, racers = 4, 8
	for i := range tasks {
		create(t, s, newTask(task.ID(fmt.Sprintf("t%d", i)), "p1", "dev"))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[task.ID]int{}
	for i := range tasks {
		id := task.ID(fmt.Sprintf("t%d", i))
		for range racers {
			wg.Go(func() {
				_, done, err := s.CompleteTask(context.Background(), id, task.Result{State: task.Exited},
					troupe.Message{Project: "p1", To: "dev", From: task.From, Kind: troupe.KindTask, Text: string(id)})
				if err != nil {
					t.Errorf("CompleteTask(%s): %v", id, err)
				}
				if done {
					mu.Lock()
					wins[id]++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for i := range tasks {
		if id := task.ID(fmt.Sprintf("t%d", i)); wins[id] != 1 {
			t.Errorf("%s completed %d times, want 1", id, wins[id])
		}
	}
	if ms := messages(t, msgs, "p1"); len(ms) != tasks {
		t.Errorf("%d messages, want %d", len(ms), tasks)
	}
}
