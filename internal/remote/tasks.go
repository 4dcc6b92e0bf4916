package remote

// Background tasks of the agents on runners. The daemon keeps each task's
// row (task.Manager with Options.Remote = Daemon.Tasks()); the runner runs
// it with a task.Manager of its own (its supervisor, its folder under
// <Root>/.tasks, the agent's worktree and sandbox there) whose ends go to
// a taskBook instead of an inbox: each end is kept in a file, then
// published durably to the runner's stream (Nats-Msg-Id = the task's
// completion key), tried again until the stream acknowledges it, across
// the daemon's absence and the runner's restarts. The daemon's consumer
// hands it to task.Manager.CompleteRemote, which posts the message under
// the same key (a redelivery is no second message), then acknowledges it.

import (
	"cmp"
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
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/troupe-dev/troupe/internal/atomicfile"
	"github.com/troupe-dev/troupe/internal/bus"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// The folders of a runner's tasks under its root: names no project id
// takes (safeName starts with a letter or digit).
const (
	runnerTasksDir  = ".tasks"        // task.Manager's Dir
	runnerRecordDir = ".task-records" // taskBook's
)

// taskRetry is how long a task's end the daemon could not record waits
// before the stream gives it again.
const taskRetry = 2 * time.Second

// taskStartReq asks a runner to run task Task for the agent of session
// Session (its worktree and sandbox there).
type taskStartReq struct {
	Session   string    `json:"session"`
	Task      task.Task `json:"task"`
	MaxOutput int64     `json:"max_output,omitempty"`
}

// taskReq names a task of a runner, for a kill or its output.
type taskReq struct {
	Project  troupe.ProjectID `json:"project"`
	Owner    troupe.AgentID   `json:"owner"`
	ID       task.ID          `json:"id"`
	MaxBytes int              `json:"max_bytes,omitempty"`
}

type taskOutput struct {
	Output string          `json:"output"`
	Size   task.OutputSize `json:"size"`
}

// Tasks is the daemon's task.Remote: the tasks of its runners' agents.
func (d *Daemon) Tasks() task.Remote { return remoteTasks{d} }

// TaskRows is what the daemon's side needs of the daemon's task manager
// (task.Manager).
type TaskRows interface {
	// CompleteRemote records the end of a task a runner reported; an
	// error other than troupe.ErrNotFound leaves the end in the stream,
	// given again.
	CompleteRemote(ctx context.Context, runner string, e task.Ended) error
	// RunningOn lists the tasks recorded as running on runner.
	RunningOn(ctx context.Context, runner string) ([]task.Task, error)
}

// SetTasks gives the daemon's side its task manager. Call it before Run.
func (d *Daemon) SetTasks(m TaskRows) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.taskRows = m
}

// taskEnded records a task's end from runner name's stream.
func (d *Daemon) taskEnded(name string, e *task.Ended) error {
	d.mu.Lock()
	rows, ctx := d.taskRows, d.ctx
	d.mu.Unlock()
	if rows == nil || ctx == nil {
		return errors.New("record a task's end: no task manager yet")
	}
	ctx, cancel := context.WithTimeout(ctx, closeWait)
	defer cancel()
	err := rows.CompleteRemote(ctx, name, *e)
	if errors.Is(err, troupe.ErrNotFound) {
		// Not a task of this runner's: dropped, said.
		d.log.Warn("a runner reported the end of a task it does not run; dropped", "runner", name, "task", e.Task.ID, "err", err)
		return nil
	}
	return err
}

// runningOn is what hello answers a runner of its tasks: those recorded
// here as running on it, their ids and owners only. The runner reports
// the ones it has no record of as lost.
func (d *Daemon) runningOn(ctx context.Context, name string) []task.Task {
	d.mu.Lock()
	rows := d.taskRows
	d.mu.Unlock()
	if rows == nil {
		return nil
	}
	ts, err := rows.RunningOn(ctx, name)
	if err != nil {
		d.log.Warn("list a runner's tasks", "runner", name, "err", err)
		return nil
	}
	out := make([]task.Task, len(ts))
	for i, t := range ts {
		out[i] = task.Task{ID: t.ID, Project: t.Project, Owner: t.Owner, Runner: t.Runner, State: t.State, StartedAt: t.StartedAt}
	}
	return out
}

type remoteTasks struct{ d *Daemon }

// live is agent k's session on a runner, if it has one.
func (d *Daemon) live(k troupe.RuntimeKey) *session {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.sessions {
		if s.key == k {
			return s
		}
	}
	return nil
}

func (rt remoteTasks) RunnerOf(k troupe.RuntimeKey) (string, error) {
	s := rt.d.live(k)
	if s == nil {
		return "", fmt.Errorf("%s has no session on a runner now: its tasks run where its session runs", k.Agent)
	}
	if err := rt.d.Reachable(s.runner); err != nil {
		return "", err
	}
	return s.runner, nil
}

func (rt remoteTasks) Start(ctx context.Context, t task.Task, j task.Job) error {
	s := rt.d.live(t.Key())
	if s == nil || s.runner != t.Runner {
		return fmt.Errorf("%s has no session on runner %s now", t.Owner, t.Runner)
	}
	_, err := rt.call(ctx, t.Runner, opTaskStart, taskStartReq{Session: s.id, Task: t, MaxOutput: j.MaxOutput})
	return err
}

func (rt remoteTasks) Kill(ctx context.Context, t task.Task) error {
	_, err := rt.call(ctx, t.Runner, opTaskKill, taskReq{Project: t.Project, Owner: t.Owner, ID: t.ID})
	return err
}

func (rt remoteTasks) Output(ctx context.Context, t task.Task, maxBytes int) (string, task.OutputSize, error) {
	data, err := rt.call(ctx, t.Runner, opTaskOutput, taskReq{Project: t.Project, Owner: t.Owner, ID: t.ID, MaxBytes: maxBytes})
	if err != nil {
		return "", task.OutputSize{}, err
	}
	var out taskOutput
	if err := json.Unmarshal(data, &out); err != nil {
		return "", task.OutputSize{}, fmt.Errorf("decode runner %s's answer: %w", t.Runner, err)
	}
	return out.Output, out.Size, nil
}

// call asks runner name, bounded; a runner not connected is said
// unreachable, naming it.
func (rt remoteTasks) call(ctx context.Context, name, op string, v any) (json.RawMessage, error) {
	if err := rt.d.Reachable(name); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, closeWait)
	defer cancel()
	data, err := rt.d.request(ctx, name, op, v)
	if errors.Is(err, errNotConnected) {
		return nil, rt.d.unreachable(name)
	}
	if err != nil && !strings.Contains(err.Error(), name) {
		err = fmt.Errorf("runner %s: %w", name, err)
	}
	return data, err
}

// taskOp answers one of the daemon's requests about this runner's tasks.
func (r *Runner) taskOp(ctx context.Context, op string, data []byte) (any, error) {
	if r.tasks == nil {
		return nil, fmt.Errorf("runner %s runs no background tasks", r.o.Name)
	}
	if op == opTaskStart {
		var req taskStartReq
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, fmt.Errorf("decode task start: %w", err)
		}
		r.mu.Lock()
		h := r.sessions[req.Session]
		r.mu.Unlock()
		if h == nil || h.key != req.Task.Key() {
			return nil, fmt.Errorf("no session %q of %s on runner %s", req.Session, req.Task.Owner, r.o.Name)
		}
		j := task.Job{ID: req.Task.ID, Command: req.Task.Command, Cwd: req.Task.Cwd, Timeout: req.Task.Timeout,
			MaxOutput: req.MaxOutput}
		if h.pol.On {
			pol := h.pol
			j.Sandbox = &pol // the agent's own, its credentials file hidden
		}
		t, err := r.tasks.Start(ctx, h.key, h.work, j)
		if err != nil {
			return nil, err
		}
		r.log.Info("task started", "project", t.Project, "agent", t.Owner, "task", t.ID)
		return nil, nil
	}
	var req taskReq
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("decode task request: %w", err)
	}
	t, err := r.tasks.Task(ctx, req.Project, req.ID)
	if err != nil {
		return nil, err
	}
	if t.Owner != req.Owner {
		return nil, fmt.Errorf("task %s not found among %s's on runner %s: %w", req.ID, req.Owner, r.o.Name, troupe.ErrNotFound)
	}
	if op == opTaskKill {
		return nil, r.tasks.Kill(ctx, req.Project, req.ID)
	}
	out, size, err := r.tasks.ReadOutput(ctx, req.Project, req.ID, req.MaxBytes)
	if err != nil {
		return nil, err
	}
	return taskOutput{Output: out, Size: size}, nil
}

// startTasks opens the runner's task book and manager; the manager's Run
// and the publisher of the tasks' ends are Run's goroutines.
func (r *Runner) startTasks(ctx context.Context) error {
	book, err := openTaskBook(filepath.Join(r.o.Root, runnerRecordDir), filepath.Join(r.o.Root, runnerTasksDir), r.log)
	if err != nil {
		return err
	}
	m := task.New(task.Options{Store: book, Reporter: book, Dir: filepath.Join(r.o.Root, runnerTasksDir),
		Supervisor: r.o.TaskSupervisor, Logger: r.log})
	book.kick = r.kickTasks
	r.mu.Lock()
	r.tasks, r.book = m, book
	r.mu.Unlock()
	r.wg.Go(func() {
		if err := m.Run(ctx); err != nil {
			r.log.Error("task manager stopped", "err", err)
		}
	})
	r.wg.Go(func() { r.publishTasks(ctx) })
	return nil
}

// checkTasks reports as lost the tasks the daemon records as running here
// that this runner has no record of (its records were lost, or the start
// never reached it); the daemon lists them again at the next hello, so a
// report that does not get through is tried again then.
func (r *Runner) checkTasks(ts []task.Task) {
	for _, t := range ts {
		if r.book == nil || r.book.has(t.ID) {
			continue
		}
		e := task.Ended{Task: t, Result: task.Result{State: task.Lost, ExitCode: -1, EndedAt: time.Now().UTC(),
			Reason: fmt.Sprintf("runner %s has no record of it (its records were lost, or the start never reached it)", r.o.Name)}}
		data, err := json.Marshal(durable{TaskEnd: &e})
		if err != nil {
			continue
		}
		msg := &nats.Msg{Subject: bus.Durable(r.o.Name) + ".task", Data: data,
			Header: nats.Header{nats.MsgIdHdr: []string{task.CompletionKey(t.ID)}}}
		if err := r.publishOnce(msg); err != nil {
			r.log.Warn("report a task this runner does not know as lost", "task", t.ID, "err", err)
			return
		}
		r.log.Warn("a task the daemon records here is unknown: reported lost", "project", t.Project, "agent", t.Owner, "task", t.ID)
	}
}

// kickTasks wakes the publisher of the tasks' ends.
func (r *Runner) kickTasks() {
	select {
	case r.taskKick <- struct{}{}:
	default:
	}
}

// publishTasks publishes every task end the stream has not acknowledged,
// at each kick (an end kept, a hello answered) and each beat, until ctx
// ends.
func (r *Runner) publishTasks(ctx context.Context) {
	tick := time.NewTicker(DefaultBeat)
	defer tick.Stop()
	for {
		for _, rec := range r.book.unsent() {
			data, err := json.Marshal(durable{TaskEnd: rec.End})
			if err != nil {
				r.log.Error("encode a task's end", "task", rec.Task.ID, "err", err)
				continue
			}
			msg := &nats.Msg{Subject: bus.Durable(r.o.Name) + ".task", Data: data,
				Header: nats.Header{nats.MsgIdHdr: []string{task.CompletionKey(rec.Task.ID)}}}
			if err := r.publishOnce(msg); err != nil {
				r.log.Warn("publish a task's end; trying again", "task", rec.Task.ID, "err", err)
				break // the link is down: the next kick or beat
			}
			r.book.sent(rec.Task.ID)
			r.log.Info("task's end published", "project", rec.Task.Project, "agent", rec.Task.Owner, "task", rec.Task.ID)
		}
		select {
		case <-ctx.Done():
			return
		case <-r.taskKick:
		case <-tick.C:
		}
	}
}

// taskRecord is one task of a runner, in its own file: the row, and its
// end once the Manager reported it (End), until the stream acknowledged
// it (Sent).
type taskRecord struct {
	Seq      int64       `json:"seq"`
	Task     task.Task   `json:"task"`
	End      *task.Ended `json:"end,omitempty"`
	ReportID int64       `json:"report_id,omitempty"`
	Sent     bool        `json:"sent,omitempty"`
}

// taskBook is a runner's task.Store and task.Reporter: a file per task
// under dir, written atomically, read back at start (the runner's Manager
// adopts the running ones, the publisher sends the ends not acknowledged).
// A record goes once its end was sent and its task's folder (in tasksDir,
// bounded by the Manager's retention) is gone. It is safe for concurrent
// use.
type taskBook struct {
	dir, tasksDir string
	log           *slog.Logger
	kick          func() // set before use

	mu   sync.Mutex
	recs map[task.ID]*taskRecord
	next int64
}

var (
	_ task.Store    = (*taskBook)(nil)
	_ task.Reporter = (*taskBook)(nil)
)

func openTaskBook(dir, tasksDir string, log *slog.Logger) (*taskBook, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make task records folder: %w", err)
	}
	b := &taskBook{dir: dir, tasksDir: tasksDir, log: log, kick: func() {}, recs: map[task.ID]*taskRecord{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list task records: %w", err)
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !e.Type().IsRegular() {
			continue // a temporary file of a write cut short
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read task record: %w", err)
		}
		var rec taskRecord
		if err := json.Unmarshal(data, &rec); err != nil || string(rec.Task.ID) != name {
			log.Warn("a task record does not decode; left aside", "file", e.Name(), "err", err)
			continue
		}
		b.recs[rec.Task.ID] = &rec
		b.next = max(b.next, rec.Seq, rec.ReportID)
	}
	for id, rec := range b.recs {
		b.drop(id, rec)
	}
	return b, nil
}

// drop forgets rec when nothing needs it any more. The caller holds mu
// or owns b.
func (b *taskBook) drop(id task.ID, rec *taskRecord) {
	if !rec.Sent {
		return
	}
	if _, err := os.Stat(filepath.Join(b.tasksDir, string(id))); !errors.Is(err, fs.ErrNotExist) {
		return // its output can still be read
	}
	if err := os.Remove(b.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.log.Warn("remove a task record", "task", id, "err", err)
		return
	}
	delete(b.recs, id)
}

func (b *taskBook) path(id task.ID) string { return filepath.Join(b.dir, string(id)+".json") }

// save writes rec; the caller holds mu.
func (b *taskBook) save(rec *taskRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode task record: %w", err)
	}
	return atomicfile.Write(b.path(rec.Task.ID), data, 0o600)
}

// CreateTask implements task.Store.
func (b *taskBook) CreateTask(_ context.Context, t task.Task) error {
	if err := task.CheckNew(t); err != nil {
		return err
	}
	t.State, t.Notified, t.MessageID, t.EndedAt = task.Running, false, 0, time.Time{}
	t.StartedAt = cmp.Or(t.StartedAt, time.Now().UTC())
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.recs[t.ID]; ok {
		return fmt.Errorf("create task %s: %w", t.ID, troupe.ErrAlreadyExists)
	}
	b.next++
	rec := &taskRecord{Seq: b.next, Task: t}
	if err := b.save(rec); err != nil {
		return fmt.Errorf("create task %s: %w", t.ID, err)
	}
	b.recs[t.ID] = rec
	return nil
}

// Task implements task.Store.
func (b *taskBook) Task(_ context.Context, p troupe.ProjectID, id task.ID) (task.Task, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rec := b.recs[id]
	if rec == nil || rec.Task.Project != p {
		return task.Task{}, fmt.Errorf("find task %s: %w", id, troupe.ErrNotFound)
	}
	return rec.Task, nil
}

func (b *taskBook) list(keep func(task.Task) bool) []task.Task {
	b.mu.Lock()
	defer b.mu.Unlock()
	recs := make([]*taskRecord, 0, len(b.recs))
	for _, rec := range b.recs {
		if keep(rec.Task) {
			recs = append(recs, rec)
		}
	}
	slices.SortFunc(recs, func(a, b *taskRecord) int { return cmp.Compare(a.Seq, b.Seq) })
	out := make([]task.Task, len(recs))
	for i, rec := range recs {
		out[i] = rec.Task
	}
	return out
}

// Tasks implements task.Store. The records of p that nothing needs any
// more go first (the Manager lists them after each task's end).
func (b *taskBook) Tasks(_ context.Context, p troupe.ProjectID) ([]task.Task, error) {
	b.mu.Lock()
	for id, rec := range b.recs {
		if rec.Task.Project == p {
			b.drop(id, rec)
		}
	}
	b.mu.Unlock()
	return b.list(func(t task.Task) bool { return t.Project == p }), nil
}

// RunningTasks implements task.Store.
func (b *taskBook) RunningTasks(context.Context) ([]task.Task, error) {
	return b.list(func(t task.Task) bool { return t.State == task.Running }), nil
}

// CompleteTask implements task.Store.
func (b *taskBook) CompleteTask(_ context.Context, id task.ID, end task.Result, msgID int64) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rec := b.recs[id]
	if rec == nil {
		return false, fmt.Errorf("complete task %s: %w", id, troupe.ErrNotFound)
	}
	if err := task.CheckEnd(id, end, msgID); err != nil {
		return false, err
	}
	if rec.Task.State != task.Running {
		return false, nil
	}
	next := *rec
	t := &next.Task
	t.State, t.ExitCode, t.Signal, t.Reason, t.EndedAt = end.State, end.ExitCode, end.Signal, end.Reason, cmp.Or(end.EndedAt, time.Now().UTC())
	t.Notified, t.MessageID = true, msgID
	if err := b.save(&next); err != nil {
		return false, fmt.Errorf("complete task %s: %w", id, err)
	}
	*rec = next
	return true, nil
}

// Report implements task.Reporter: the end is kept in the task's record
// (on disk before Report returns), then published by the runner.
func (b *taskBook) Report(_ context.Context, key string, e task.Ended) (int64, bool, error) {
	if key != task.CompletionKey(e.Task.ID) {
		return 0, false, fmt.Errorf("report task %s under key %q", e.Task.ID, key)
	}
	b.mu.Lock()
	rec := b.recs[e.Task.ID]
	if rec == nil {
		b.mu.Unlock()
		return 0, false, fmt.Errorf("report task %s: %w", e.Task.ID, troupe.ErrNotFound)
	}
	if rec.End != nil {
		id := rec.ReportID
		b.mu.Unlock()
		return id, false, nil
	}
	next := *rec
	next.End, next.ReportID = &e, b.next+1
	if err := b.save(&next); err != nil {
		b.mu.Unlock()
		return 0, false, fmt.Errorf("report task %s: %w", e.Task.ID, err)
	}
	b.next++
	*rec = next
	b.mu.Unlock()
	b.kick()
	return next.ReportID, true, nil
}

// has says whether the book has a record of task id.
func (b *taskBook) has(id task.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.recs[id] != nil
}

// unsent lists the ends kept and not yet acknowledged, oldest first.
func (b *taskBook) unsent() []taskRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []taskRecord
	for _, rec := range b.recs {
		if rec.End != nil && !rec.Sent {
			out = append(out, *rec)
		}
	}
	slices.SortFunc(out, func(a, b taskRecord) int { return cmp.Compare(a.ReportID, b.ReportID) })
	return out
}

// sent records that task id's end was acknowledged by the stream.
func (b *taskBook) sent(id task.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rec := b.recs[id]
	if rec == nil || rec.Sent {
		return
	}
	next := *rec
	next.Sent = true
	if err := b.save(&next); err != nil {
		// Sent again after a restart: the daemon's key keeps it single.
		b.log.Warn("record a task's end as sent", "task", id, "err", err)
		return
	}
	*rec = next
	b.drop(id, rec)
}
