package sqlite

import (
	"errors"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/task/tasktest"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestTaskStoreContract(t *testing.T) {
	tasktest.RunStore(t, func(t *testing.T) (task.Store, task.Inbox) {
		db := openTest(t, newPath(t))
		return db.Tasks(), db.Inbox()
	})
}

// C6: a completion is queued in the owner's real inbox (what the runtime
// delivers from), the task row names it, and both survive a restart of
// the store; appending the completion again after the restart (a daemon
// that died between the two steps) stores nothing.
func TestTaskCompletionReachesTheInboxAndSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "troupe.db")
	ctx := t.Context()
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	running := task.Task{ID: "aa", Project: "p1", Owner: "dev", Command: "sleep 1", Cwd: "/src",
		Timeout: time.Minute, StartedAt: time.Unix(1700000000, 5).UTC(), SupervisorPID: 99, SupervisorStart: 12345}
	ended := running
	ended.ID = "bb"
	for _, tk := range []task.Task{running, ended} {
		if err := db.Tasks().CreateTask(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	msg := troupe.Message{Project: "p1", To: "dev", From: task.From, Kind: troupe.KindTask, Text: "task bb exited 2"}
	stored, added, err := db.Inbox().AppendOnce(ctx, task.CompletionKey("bb"), msg)
	if err != nil || !added {
		t.Fatalf("AppendOnce: %v, %v", added, err)
	}
	done, err := db.Tasks().CompleteTask(ctx, "bb", task.Result{State: task.Exited, ExitCode: 2}, stored.ID)
	if err != nil || !done {
		t.Fatalf("CompleteTask: %v, %v", done, err)
	}
	pending, err := db.Inbox().Pending(ctx, key, 0)
	if err != nil || len(pending) != 1 || pending[0].ID != stored.ID || pending[0].Kind != troupe.KindTask {
		t.Fatalf("Pending(p1/dev) = %+v, %v; want the task's completion", pending, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openTest(t, path)
	ts, err := db.Tasks().RunningTasks(ctx)
	if err != nil || len(ts) != 1 || ts[0].ID != "aa" || ts[0].SupervisorStart != 12345 || !ts[0].StartedAt.Equal(running.StartedAt) {
		t.Errorf("RunningTasks after reopen: %+v, %v", ts, err)
	}
	got, err := db.Tasks().Task(ctx, "p1", "bb")
	if err != nil || got.State != task.Exited || got.ExitCode != 2 || !got.Notified || got.MessageID != stored.ID {
		t.Errorf("Task(bb) after reopen: %+v, %v; want exited 2, notified, message %d", got, err, stored.ID)
	}
	if again, added, err := db.Inbox().AppendOnce(ctx, task.CompletionKey("bb"), msg); err != nil || added || again.ID != stored.ID {
		t.Errorf("AppendOnce again after reopen: %+v, added %v, %v; want message %d, not added", again, added, err, stored.ID)
	}
	if pending, _ := db.Inbox().Pending(ctx, key, 0); len(pending) != 1 {
		t.Errorf("Pending after reopen: %+v", pending)
	}
}

func TestCreateTaskRefusesOutOfRange(t *testing.T) {
	db := openTest(t, newPath(t))
	tk := task.Task{ID: "aa", Project: "p1", Owner: "dev", Command: "true", Cwd: "/", SupervisorStart: math.MaxUint64}
	if err := db.Tasks().CreateTask(t.Context(), tk); !errors.Is(err, troupe.ErrInvalid) {
		t.Errorf("huge supervisor start: %v, want ErrInvalid", err)
	}
	tk.SupervisorStart, tk.StartedAt = 1, time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := db.Tasks().CreateTask(t.Context(), tk); !errors.Is(err, troupe.ErrInvalid) {
		t.Errorf("started in 2300: %v, want ErrInvalid", err)
	}
}
