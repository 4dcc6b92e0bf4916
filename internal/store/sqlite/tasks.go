package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TaskStore is the store of background tasks (task.Store), on the database of the DB it came from.
type TaskStore struct{ *conn }

// Tasks is the store of background tasks (task.Store).
func (db *DB) Tasks() *TaskStore { return &TaskStore{db.conn} }

// TaskStore implements task.Store: background tasks (table tasks), each pointing
// at its completion message once it ended (contract C6). The message is
// appended through the inbox (AppendOnce) before the end is recorded; see
// task.Manager. It is held to task.MemStore's behaviour by the suite in
// internal/task/tasktest.
var _ task.Store = (*TaskStore)(nil)

const taskCols = `id, project, owner, command, cwd, timeout, state, exit_code, signal, reason,
	started_at, ended_at, supervisor_pid, supervisor_start, notified, message_id, runner`

// CreateTask implements task.Store. A StartedAt outside the years 1677 to
// 2262, or a SupervisorStart above 2^63-1, is refused with
// troupe.ErrInvalid.
func (db *TaskStore) CreateTask(ctx context.Context, t task.Task) error {
	if err := task.CheckNew(t); err != nil {
		return err
	}
	if t.StartedAt.IsZero() {
		t.StartedAt = time.Now().UTC()
	}
	started, ok := toNanos(t.StartedAt)
	switch {
	case !ok:
		return fmt.Errorf("create task %s: started_at %s outside years 1677-2262: %w", t.ID, t.StartedAt, troupe.ErrInvalid)
	case t.SupervisorStart > math.MaxInt64:
		return fmt.Errorf("create task %s: supervisor start time %d out of range: %w", t.ID, t.SupervisorStart, troupe.ErrInvalid)
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		// One writer connection in an IMMEDIATE transaction: nothing can
		// insert the id between this check and the insert.
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM tasks WHERE id = ?`, string(t.ID)).Scan(&one)
		switch {
		case err == nil:
			return troupe.ErrAlreadyExists
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO tasks (`+taskCols+`)
			VALUES (?, ?, ?, ?, ?, ?, 'running', ?, '', '', ?, NULL, ?, ?, 0, NULL, ?)`,
			string(t.ID), string(t.Project), string(t.Owner), t.Command, t.Cwd, int64(t.Timeout),
			t.ExitCode, started, t.SupervisorPID, int64(t.SupervisorStart), t.Runner)
		return err
	})
	if err != nil {
		return fmt.Errorf("create task %s: %w", t.ID, err)
	}
	return nil
}

func scanTask(sc scanner) (task.Task, error) {
	var (
		t       task.Task
		timeout int64
		started int64
		ended   sql.NullInt64
		start   int64
		msgID   sql.NullInt64
	)
	err := sc.Scan(&t.ID, &t.Project, &t.Owner, &t.Command, &t.Cwd, &timeout, &t.State, &t.ExitCode,
		&t.Signal, &t.Reason, &started, &ended, &t.SupervisorPID, &start, &t.Notified, &msgID, &t.Runner)
	t.MessageID = msgID.Int64
	t.Timeout = time.Duration(timeout)
	t.StartedAt, t.EndedAt = fromNanos(started), fromNullNanos(ended)
	t.SupervisorStart = uint64(start)
	return t, err
}

func (db *conn) queryTasks(ctx context.Context, query string, args ...any) ([]task.Task, error) {
	rows, err := db.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ts []task.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, rows.Err()
}

// Task implements task.Store.
func (db *TaskStore) Task(ctx context.Context, p troupe.ProjectID, id task.ID) (task.Task, error) {
	row := db.r.QueryRowContext(ctx, `SELECT `+taskCols+` FROM tasks WHERE id = ? AND project = ?`, string(id), string(p))
	t, err := scanTask(row)
	if errors.Is(err, sql.ErrNoRows) {
		return task.Task{}, fmt.Errorf("find task %s: %w", id, troupe.ErrNotFound)
	}
	if err != nil {
		return task.Task{}, fmt.Errorf("find task %s: %w", id, err)
	}
	return t, nil
}

// Tasks implements task.Store.
func (db *TaskStore) Tasks(ctx context.Context, p troupe.ProjectID) ([]task.Task, error) {
	ts, err := db.queryTasks(ctx, `SELECT `+taskCols+` FROM tasks WHERE project = ? ORDER BY seq`, string(p))
	if err != nil {
		return nil, fmt.Errorf("list tasks of %s: %w", p, err)
	}
	return ts, nil
}

// RunningTasks implements task.Store.
func (db *TaskStore) RunningTasks(ctx context.Context) ([]task.Task, error) {
	// The WHERE term repeats the partial index tasks_running's word for word.
	ts, err := db.queryTasks(ctx, `SELECT `+taskCols+` FROM tasks WHERE state = 'running' ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("list running tasks: %w", err)
	}
	return ts, nil
}

// CompleteTask implements task.Store: one IMMEDIATE transaction,
// committed with synchronous=FULL. The message id must be a stored
// message's (a foreign key).
func (db *TaskStore) CompleteTask(ctx context.Context, id task.ID, end task.Result, msgID int64) (bool, error) {
	if err := task.CheckEnd(id, end, msgID); err != nil {
		return false, err
	}
	if end.EndedAt.IsZero() {
		end.EndedAt = time.Now().UTC()
	}
	ended, ok := toNanos(end.EndedAt)
	if !ok {
		return false, fmt.Errorf("complete task %s: ended_at %s outside years 1677-2262: %w", id, end.EndedAt, troupe.ErrInvalid)
	}
	var done bool
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE tasks SET state = ?, exit_code = ?, signal = ?, reason = ?,
			ended_at = ?, notified = 1, message_id = ? WHERE id = ? AND state = 'running'`,
			string(end.State), end.ExitCode, end.Signal, end.Reason, ended, msgID, string(id))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 1 {
			done = err == nil
			return err
		}
		// Not running: ended before (exactly once), or unknown.
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM tasks WHERE id = ?`, string(id)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return troupe.ErrNotFound
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("complete task %s: %w", id, err)
	}
	return done, nil
}
