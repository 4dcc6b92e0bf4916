// Package tasktest holds the contract suite of task.Store (contracts C1 and
// C6 as the store sees them): tasks scoped by project, the running list,
// and a completion that records the end and its message's id exactly
// once, also under concurrent calls. Every Store implementation runs it,
// so the SQLite store is held to the behaviour of task.MemStore, the
// reference. The messages themselves are the inbox's (internal/inbox and
// its suite); this suite only takes their ids from one.
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

// RunStore runs the task.Store contract against the stores that open
// returns. open is called once per subtest and must return a new, empty
// store and the inbox its completion messages go to (a store may require
// a message id to name a stored message, as a foreign key does); it
// registers any cleanup with t.Cleanup.
//
// Times must come back as the same instant to the nanosecond
// (time.Time.Equal); the location and the monotonic reading may be dropped.
func RunStore(t *testing.T, open func(t *testing.T) (task.Store, task.Inbox)) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s task.Store, in task.Inbox)
	}{
		{"CreateAndGet", testCreateAndGet},
		{"CreateDefaults", testCreateDefaults},
		{"CreateDuplicate", testCreateDuplicate},
		{"CreateInvalid", testCreateInvalid},
		{"ProjectScope", testProjectScope},
		{"TasksOrder", testTasksOrder},
		{"RunningTasks", testRunningTasks},
		{"CompleteOnce", testCompleteOnce},
		{"CompleteForPerson", testCompleteForPerson},
		{"CompleteKeepsTimes", testCompleteKeepsTimes},
		{"CompleteUnknown", testCompleteUnknown},
		{"CompleteInvalid", testCompleteInvalid},
		{"CompleteConcurrent", testCompleteConcurrent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, in := open(t)
			tc.fn(t, s, in)
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

func completion(tk task.Task) troupe.Message {
	return troupe.Message{Project: tk.Project, To: tk.Owner, From: task.From, Kind: troupe.KindTask,
		Text: "task " + string(tk.ID) + " `make test` exited 0 after 1.0s."}
}

// post appends tk's completion message to in as the Manager does, and
// returns its id.
func post(t *testing.T, in task.Inbox, tk task.Task) int64 {
	t.Helper()
	m, _, err := in.AppendOnce(context.Background(), task.CompletionKey(tk.ID), completion(tk))
	if err != nil {
		t.Fatalf("append the completion of %s: %v", tk.ID, err)
	}
	return m.ID
}

// complete posts tk's completion and records end with it.
func complete(t *testing.T, s task.Store, in task.Inbox, tk task.Task, end task.Result) (msgID int64, done bool) {
	t.Helper()
	msgID = post(t, in, tk)
	done, err := s.CompleteTask(t.Context(), tk.ID, end, msgID)
	if err != nil {
		t.Fatalf("CompleteTask(%s): %v", tk.ID, err)
	}
	return msgID, done
}

func testCreateAndGet(t *testing.T, s task.Store, _ task.Inbox) {
	want := newTask("a1", "p1", "dev")
	create(t, s, want)
	same(t, get(t, s, "p1", "a1"), want)
}

func testCreateDefaults(t *testing.T, s task.Store, _ task.Inbox) {
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

func testCreateDuplicate(t *testing.T, s task.Store, _ task.Inbox) {
	create(t, s, newTask("a1", "p1", "dev"))
	err := s.CreateTask(t.Context(), newTask("a1", "p2", "dev"))
	if !errors.Is(err, troupe.ErrAlreadyExists) {
		t.Fatalf("duplicate id: %v, want ErrAlreadyExists", err)
	}
	if _, err := s.Task(t.Context(), "p2", "a1"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("the duplicate was recorded in p2: %v", err)
	}
}

func testCreateInvalid(t *testing.T, s task.Store, _ task.Inbox) {
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
func testProjectScope(t *testing.T, s task.Store, in task.Inbox) {
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
	if _, done := complete(t, s, in, get(t, s, "p2", "b1"), task.Result{State: task.Exited}); !done {
		t.Fatal("CompleteTask(b1): not done")
	}
	if got := get(t, s, "p1", "a1"); got.State != task.Running || got.Notified || got.MessageID != 0 {
		t.Errorf("p1's a1 after p2's b1 ended: %+v, want running, not notified", got)
	}
}

func testTasksOrder(t *testing.T, s task.Store, _ task.Inbox) {
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

func testRunningTasks(t *testing.T, s task.Store, in task.Inbox) {
	create(t, s, newTask("a1", "p1", "dev"))
	create(t, s, newTask("a2", "p1", "dev"))
	create(t, s, newTask("b1", "p2", "dev"))
	complete(t, s, in, get(t, s, "p1", "a2"), task.Result{State: task.Killed})
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

func testCompleteOnce(t *testing.T, s task.Store, in task.Inbox) {
	tk := newTask("a1", "p1", "dev")
	create(t, s, tk)
	end := task.Result{State: task.Exited, ExitCode: 3, EndedAt: base.Add(3 * time.Second)}
	msgID, done := complete(t, s, in, tk, end)
	if !done {
		t.Fatal("CompleteTask: not done")
	}
	want := tk
	want.State, want.ExitCode, want.EndedAt, want.Notified, want.MessageID = task.Exited, 3, end.EndedAt, true, msgID
	same(t, get(t, s, "p1", "a1"), want)

	// A second end, even with another message, changes nothing.
	again := end
	again.State, again.ExitCode = task.Killed, 9
	other, _, err := in.AppendOnce(t.Context(), "other", completion(tk))
	if err != nil {
		t.Fatal(err)
	}
	if done, err := s.CompleteTask(t.Context(), "a1", again, other.ID); err != nil || done {
		t.Errorf("second CompleteTask: done %v, %v; want false, nil", done, err)
	}
	same(t, get(t, s, "p1", "a1"), want)
}

func testCompleteForPerson(t *testing.T, s task.Store, in task.Inbox) {
	// A task of the person's ends like any other; its message is the
	// inbox's business (delivered at once: the person has no inbox).
	tk := newTask("a1", "p1", troupe.Person)
	create(t, s, tk)
	msgID, done := complete(t, s, in, tk, task.Result{State: task.TimedOut, ExitCode: -1, Signal: "SIGTERM", Reason: "ran past its timeout"})
	if !done {
		t.Fatal("CompleteTask: not done")
	}
	got := get(t, s, "p1", "a1")
	if got.State != task.TimedOut || got.Signal != "SIGTERM" || got.Reason != "ran past its timeout" || got.ExitCode != -1 ||
		!got.Notified || got.MessageID != msgID || got.EndedAt.IsZero() {
		t.Errorf("task after completion: %+v", got)
	}
}

func testCompleteKeepsTimes(t *testing.T, s task.Store, in task.Inbox) {
	tk := newTask("a1", "p1", "dev")
	create(t, s, tk)
	complete(t, s, in, tk, task.Result{State: task.Exited, EndedAt: base.Add(30 * time.Second)})
	if got := get(t, s, "p1", "a1"); !got.EndedAt.Equal(base.Add(30 * time.Second)) {
		t.Errorf("ended_at %v, want %v", got.EndedAt, base.Add(30*time.Second))
	}
	// Without an end time, the store sets now.
	tk2 := newTask("a2", "p1", "dev")
	create(t, s, tk2)
	before := time.Now()
	complete(t, s, in, tk2, task.Result{State: task.Lost})
	if got := get(t, s, "p1", "a2"); got.EndedAt.Before(before.Add(-time.Second)) || got.EndedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("ended_at %v, want about now", got.EndedAt)
	}
}

func testCompleteUnknown(t *testing.T, s task.Store, in task.Inbox) {
	msgID := post(t, in, newTask("nope", "p1", "dev"))
	done, err := s.CompleteTask(t.Context(), "nope", task.Result{State: task.Exited}, msgID)
	if !errors.Is(err, troupe.ErrNotFound) || done {
		t.Errorf("CompleteTask(unknown): done %v, %v; want ErrNotFound", done, err)
	}
	if _, err := s.Task(t.Context(), "p1", "nope"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Task(nope) after CompleteTask: %v, want ErrNotFound", err)
	}
}

func testCompleteInvalid(t *testing.T, s task.Store, in task.Inbox) {
	tk := newTask("a1", "p1", "dev")
	create(t, s, tk)
	msgID := post(t, in, tk)
	for name, tc := range map[string]struct {
		end   task.Result
		msgID int64
	}{
		"running end":         {task.Result{State: task.Running}, msgID},
		"empty end":           {task.Result{}, msgID},
		"no message":          {task.Result{State: task.Exited}, 0},
		"negative message id": {task.Result{State: task.Exited}, -1},
	} {
		if done, err := s.CompleteTask(t.Context(), "a1", tc.end, tc.msgID); !errors.Is(err, troupe.ErrInvalid) || done {
			t.Errorf("%s: done %v, %v; want ErrInvalid", name, done, err)
		}
	}
	same(t, get(t, s, "p1", "a1"), tk)
}

// Two watchers (an old and a new Manager, or adoption racing a live
// watcher) may complete the same task: exactly one wins, and the task
// names the one message both appended.
func testCompleteConcurrent(t *testing.T, s task.Store, in task.Inbox) {
	const tasks, racers = 4, 8
	for i := range tasks {
		create(t, s, newTask(task.ID(fmt.Sprintf("t%d", i)), "p1", "dev"))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[task.ID]int{}
	msgs := map[task.ID]map[int64]bool{}
	for i := range tasks {
		tk := get(t, s, "p1", task.ID(fmt.Sprintf("t%d", i)))
		mu.Lock() // racers of earlier tasks read msgs
		msgs[tk.ID] = map[int64]bool{}
		mu.Unlock()
		for range racers {
			wg.Go(func() {
				m, _, err := in.AppendOnce(context.Background(), task.CompletionKey(tk.ID), completion(tk))
				if err != nil {
					t.Errorf("append the completion of %s: %v", tk.ID, err)
					return
				}
				done, err := s.CompleteTask(context.Background(), tk.ID, task.Result{State: task.Exited}, m.ID)
				if err != nil {
					t.Errorf("CompleteTask(%s): %v", tk.ID, err)
				}
				mu.Lock()
				defer mu.Unlock()
				msgs[tk.ID][m.ID] = true
				if done {
					wins[tk.ID]++
				}
			})
		}
	}
	wg.Wait()
	for i := range tasks {
		id := task.ID(fmt.Sprintf("t%d", i))
		if wins[id] != 1 {
			t.Errorf("%s completed %d times, want 1", id, wins[id])
		}
		if len(msgs[id]) != 1 {
			t.Errorf("%s: the racers appended messages %v, want one", id, msgs[id])
		}
		if got := get(t, s, "p1", id); !msgs[id][got.MessageID] || !got.Notified {
			t.Errorf("%s: message id %d notified %v, want the one message appended", id, got.MessageID, got.Notified)
		}
	}
}
