package task

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// completions lists project p's messages in the harness's inbox.
func (h *harness) completions(tb testing.TB, p troupe.ProjectID) []troupe.Message {
	tb.Helper()
	ms, err := h.inbox.Conversation(context.Background(), p, inbox.Page{})
	if err != nil {
		tb.Fatal(err)
	}
	return ms
}

// record makes a running task row for owner without starting anything: the
// steps of a completion are called directly.
func (h *harness) record(tb testing.TB, id ID, owner troupe.AgentID) Task {
	tb.Helper()
	t := Task{ID: id, Project: "p1", Owner: owner, Command: "make test", Cwd: h.proj, State: Running,
		StartedAt: time.Now().UTC(), SupervisorPID: 1 << 22, SupervisorStart: 1}
	if err := h.store.CreateTask(context.Background(), t); err != nil {
		tb.Fatal(err)
	}
	return t
}

// C6: a daemon that dies between the two steps of a completion (message
// appended, end not recorded) leaves the task running; the next daemon
// completes it again, and the owner still gets exactly one message, the
// one the first daemon appended, which the task row then names.
func TestC6_CompletionExactlyOnceAfterACrashBetweenItsSteps(t *testing.T) {
	for _, tc := range []struct {
		name      string
		owner     troupe.AgentID
		delivered bool // the restarted runtime delivered the message before the task manager got to it
		notify    bool
	}{
		{"message still queued", "dev", false, true},
		{"message already delivered", "dev", true, false},
		{"the person's message", troupe.Person, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			ctx := t.Context()
			tk := h.record(t, "t1", tc.owner)
			res := Result{State: Exited, ExitCode: 0, EndedAt: time.Now().UTC()}

			// The first daemon: step one, then it dies.
			first, added, err := h.manager().post(ctx, tk, "task t1 exited 0 (first daemon)")
			if err != nil || !added {
				t.Fatalf("post: added %v, %v", added, err)
			}
			if ts, _ := h.store.RunningTasks(ctx); len(ts) != 1 {
				t.Fatalf("running tasks after the crash: %+v, want t1 (the next daemon adopts it)", ts)
			}
			if tc.delivered {
				must(t, h.inbox.StartTurn(ctx, p1dev, []int64{first.ID}, "turn-1"))
				if _, err := h.inbox.EndTurn(ctx, p1dev, "turn-1", troupe.MsgDelivered, "", nil); err != nil {
					t.Fatal(err)
				}
			}

			// The next daemon adopts the task and completes it again.
			m := h.manager()
			m.finish(ctx, m.log, tk, res, nil)
			ms := h.completions(t, "p1")
			if len(ms) != 1 || ms[0].ID != first.ID || ms[0].Text != first.Text {
				t.Fatalf("messages after the second completion: %+v, want only the first daemon's %d", ms, first.ID)
			}
			got := h.task(t, "p1", "t1")
			if got.State != Exited || !got.Notified || got.MessageID != first.ID {
				t.Errorf("task after the second completion: %+v, want exited, notified, message %d", got, first.ID)
			}
			if tc.notify {
				if n := h.next(t); n.ID != first.ID || n.State != troupe.MsgQueued {
					t.Errorf("notified %+v, want the queued message %d", n, first.ID)
				}
			}
			h.noMore(t)

			// And once more: nothing new.
			m.finish(ctx, m.log, tk, res, nil)
			if ms := h.completions(t, "p1"); len(ms) != 1 {
				t.Errorf("%d messages after a third completion, want 1", len(ms))
			}
			h.noMore(t)
		})
	}
}

// The same crash with real processes: the task ends while no daemon runs,
// after the dead daemon appended its message; the next Manager adopts it,
// reads its status file, and the owner gets one message, notified once.
func TestC6_AdoptionAfterACrashBetweenTheStepsNotifiesOnce(t *testing.T) {
	h := newHarness(t, nil)
	m1, tk := h.endWhileDown(t)
	first, added, err := m1.post(t.Context(), tk, "exited (the dead daemon's message)")
	if err != nil || !added {
		t.Fatalf("post: added %v, %v", added, err)
	}

	_, stop2 := h.run(t)
	n := h.next(t)
	stop2()
	h.noMore(t)
	if n.ID != first.ID || !strings.HasSuffix(n.Text, "(the dead daemon's message)") {
		t.Errorf("notified %+v, want the dead daemon's message %d", n, first.ID)
	}
	if ms := h.completions(t, "p1"); len(ms) != 1 {
		t.Errorf("%d messages, want 1", len(ms))
	}
	if got := h.task(t, "p1", tk.ID); got.State != Exited || got.MessageID != first.ID {
		t.Errorf("task %+v, want exited with message %d", got, first.ID)
	}
	h.noLeftovers(t, tk)
}

// Watchers racing on one task (an old and a new Manager, adoption racing a
// live watcher): one message, one recorded end, one notification.
func TestCompletionRaceStoresAndNotifiesOnce(t *testing.T) {
	h := newHarness(t, nil)
	tk := h.record(t, "t1", "dev")
	const racers = 8
	var wg sync.WaitGroup
	for i := range racers {
		m := h.manager()
		wg.Go(func() {
			m.finish(context.Background(), m.log, tk, Result{State: Exited, ExitCode: i}, nil)
		})
	}
	wg.Wait()
	ms := h.completions(t, "p1")
	if len(ms) != 1 {
		t.Fatalf("%d messages, want 1: %+v", len(ms), ms)
	}
	if n := h.next(t); n.ID != ms[0].ID {
		t.Errorf("notified %+v, want message %d", n, ms[0].ID)
	}
	h.noMore(t)
	if got := h.task(t, "p1", "t1"); !got.Notified || got.MessageID != ms[0].ID {
		t.Errorf("task %+v, want notified with message %d", got, ms[0].ID)
	}
}

// The completion message is built from the task: to its owner's key, of
// kind task, from @task, under the task's key; a Store no longer sees it.
func TestCompletionMessageComesFromTheTask(t *testing.T) {
	h := newHarness(t, nil)
	tk := h.record(t, "t1", "dev")
	m := h.manager()
	msg, _, err := m.post(t.Context(), tk, "text")
	if err != nil {
		t.Fatal(err)
	}
	if msg.Key() != tk.Key() || msg.Kind != troupe.KindTask || msg.From != From || msg.Text != "text" || msg.State != troupe.MsgQueued {
		t.Errorf("completion message %+v", msg)
	}
	if again, added, err := h.inbox.AppendOnce(t.Context(), CompletionKey("t1"), troupe.Message{Project: "p1", To: "dev", Text: "x"}); err != nil || added || again.ID != msg.ID {
		t.Errorf("append under the task's key: %+v added %v %v; want message %d", again, added, err, msg.ID)
	}
}
