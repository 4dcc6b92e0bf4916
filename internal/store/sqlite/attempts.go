package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/troupe-dev/troupe/internal/attempt"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// AttemptStore keeps attempts (attempt.Store) on the database of the DB
// it came from, each as JSON.
type AttemptStore struct{ *conn }

// Attempts is the store of attempts (attempt.Store).
func (db *DB) Attempts() *AttemptStore { return &AttemptStore{db.conn} }

var _ attempt.Store = (*AttemptStore)(nil)

// AddAttempt implements attempt.Store.
func (db *AttemptStore) AddAttempt(ctx context.Context, a attempt.Attempt) (attempt.Attempt, error) {
	if err := attempt.Valid(a); err != nil {
		return attempt.Attempt{}, err
	}
	created, ok := toNanos(a.CreatedAt)
	if !ok {
		return attempt.Attempt{}, fmt.Errorf("add attempt: created_at %s outside years 1677-2262: %w", a.CreatedAt, troupe.ErrInvalid)
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO attempts (project, state, created_at, body) VALUES (?, ?, ?, '{}')`,
			string(a.Project), string(a.State), created)
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		a.ID = attempt.ID(id)
		body, err := json.Marshal(a)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE attempts SET body = ? WHERE id = ?`, string(body), id); err != nil {
			return err
		}
		// The project's newest attempt.KeepPerProject stay.
		_, err = tx.ExecContext(ctx, `DELETE FROM attempts WHERE project = ?1 AND id <= (
			SELECT id FROM attempts WHERE project = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)`,
			string(a.Project), attempt.KeepPerProject)
		return err
	})
	if err != nil {
		return attempt.Attempt{}, fmt.Errorf("add attempt: %w", err)
	}
	return a, nil
}

// SaveAttempt implements attempt.Store.
func (db *AttemptStore) SaveAttempt(ctx context.Context, a attempt.Attempt) error {
	if err := attempt.Valid(a); err != nil {
		return err
	}
	body, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("save attempt %d: %w", a.ID, err)
	}
	err = db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE attempts SET state = ?, body = ? WHERE id = ? AND project = ?`,
			string(a.State), string(body), int64(a.ID), string(a.Project))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return troupe.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save attempt %d: %w", a.ID, err)
	}
	return nil
}

// Attempt implements attempt.Store.
func (db *AttemptStore) Attempt(ctx context.Context, p troupe.ProjectID, id attempt.ID) (attempt.Attempt, error) {
	as, err := db.query(ctx, `SELECT id, project, state, body FROM attempts WHERE project = ? AND id = ?`, string(p), int64(id))
	if err != nil {
		return attempt.Attempt{}, fmt.Errorf("read attempt %d: %w", id, err)
	}
	if len(as) == 0 {
		return attempt.Attempt{}, fmt.Errorf("read attempt %d: no such attempt in project %s: see `troupe attempts`: %w", id, p, troupe.ErrNotFound)
	}
	return as[0], nil
}

// Attempts implements attempt.Store.
func (db *AttemptStore) Attempts(ctx context.Context, p troupe.ProjectID, limit int) ([]attempt.Attempt, error) {
	if limit <= 0 || limit > attempt.KeepPerProject {
		limit = attempt.KeepPerProject
	}
	as, err := db.query(ctx, `SELECT id, project, state, body FROM attempts WHERE project = ? ORDER BY id DESC LIMIT ?`, string(p), limit)
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	return as, nil
}

// RunningAttempts implements attempt.Store.
func (db *AttemptStore) RunningAttempts(ctx context.Context) ([]attempt.Attempt, error) {
	as, err := db.query(ctx, `SELECT id, project, state, body FROM attempts WHERE state = ? ORDER BY id`, string(attempt.Running))
	if err != nil {
		return nil, fmt.Errorf("list running attempts: %w", err)
	}
	return as, nil
}

// query reads attempts; the columns say their id, project and state
// whatever the body says.
func (db *AttemptStore) query(ctx context.Context, q string, args ...any) ([]attempt.Attempt, error) {
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []attempt.Attempt{}
	for rows.Next() {
		var id int64
		var p, state, body string
		if err := rows.Scan(&id, &p, &state, &body); err != nil {
			return nil, err
		}
		var a attempt.Attempt
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			return nil, errors.Join(fmt.Errorf("attempt %d: its record is not JSON", id), err)
		}
		a.ID, a.Project, a.State = attempt.ID(id), troupe.ProjectID(p), attempt.State(state)
		out = append(out, a)
	}
	return out, rows.Err()
}
