package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// ProjectStore is the store of registered projects, their last team and approvals (project.Store), on the database of the DB it came from.
type ProjectStore struct{ *conn }

// Projects is the store of registered projects, their last team and approvals (project.Store).
func (db *DB) Projects() *ProjectStore { return &ProjectStore{db.conn} }

var _ project.Store = (*ProjectStore)(nil)

// Times are stored as INTEGER unix nanoseconds: exact to the nanosecond,
// ordered by plain integer comparison, and read back in UTC. Location and
// monotonic clock reading are not kept. The range is what int64 nanoseconds
// hold, years 1677 to 2262; times outside it are refused.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

func toNanos(t time.Time) (int64, bool) {
	if t.Before(minTime) || t.After(maxTime) {
		return 0, false
	}
	return t.UnixNano(), true
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// write runs fn in an IMMEDIATE transaction on the writer connection and
// commits it when fn succeeds. It fails with a *GoneError, before anything,
// when the file is no longer the one Open opened.
func (db *conn) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := db.checkFile(); err != nil {
		return err
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	return tx.Commit()
}

// ignoreDone drops the error Rollback reports when the transaction is
// already over (database/sql rolls back itself when the context ends).
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// AddProject records p. It fails with troupe.ErrAlreadyExists, naming the
// colliding field, when p.ID or p.Path is registered, and with
// troupe.ErrInvalid when p.ID or p.Path is empty or p.AddedAt is out of the
// stored range.
func (db *ProjectStore) AddProject(ctx context.Context, p troupe.Project) error {
	added, ok := toNanos(p.AddedAt)
	switch {
	case p.ID == "":
		return fmt.Errorf("add project: empty id: %w", troupe.ErrInvalid)
	case p.Path == "":
		return fmt.Errorf("add project %s: empty path: %w", p.ID, troupe.ErrInvalid)
	case !ok:
		return fmt.Errorf("add project %s: added_at %s outside years 1677-2262: %w", p.ID, p.AddedAt, troupe.ErrInvalid)
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		// The writer is one connection in an IMMEDIATE transaction, so
		// nothing can register either value between these checks and the
		// insert.
		var path string
		err := tx.QueryRowContext(ctx, `SELECT path FROM projects WHERE id = ?`, p.ID).Scan(&path)
		switch {
		case err == nil:
			return fmt.Errorf("id %s is registered for %s: %w", p.ID, path, troupe.ErrAlreadyExists)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		var id string
		err = tx.QueryRowContext(ctx, `SELECT id FROM projects WHERE path = ?`, p.Path).Scan(&id)
		switch {
		case err == nil:
			return fmt.Errorf("path %s is registered as project %s: %w", p.Path, id, troupe.ErrAlreadyExists)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		_, err = tx.ExecContext(ctx,
			`INSERT INTO projects (id, path, name, added_at) VALUES (?, ?, ?, ?)`,
			string(p.ID), p.Path, p.Name, added)
		return err
	})
	if err != nil {
		return fmt.Errorf("add project %s: %w", p.ID, err)
	}
	return nil
}

// Projects lists registered projects ordered by AddedAt, then ID. AddedAt
// is in UTC.
func (db *ProjectStore) Projects(ctx context.Context) ([]troupe.Project, error) {
	ps, err := db.projects(ctx)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return ps, nil
}

func (db *conn) projects(ctx context.Context) ([]troupe.Project, error) {
	rows, err := db.r.QueryContext(ctx,
		`SELECT id, path, name, added_at FROM projects ORDER BY added_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ps := []troupe.Project{}
	for rows.Next() {
		var (
			p     troupe.Project
			added int64
		)
		if err := rows.Scan(&p.ID, &p.Path, &p.Name, &added); err != nil {
			return nil, err
		}
		p.AddedAt = fromNanos(added)
		ps = append(ps, p)
	}
	return ps, rows.Err()
}

// RemoveProject deletes the project and, by cascade, its saved team, and
// its check results and attempts. It fails with troupe.ErrNotFound when id is not
// registered.
func (db *ProjectStore) RemoveProject(ctx context.Context, id troupe.ProjectID) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM check_results WHERE project = ?`, string(id)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM attempts WHERE project = ?`, string(id)); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM projects WHERE id = ?`, string(id))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return troupe.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove project %s: %w", id, err)
	}
	return nil
}

// SaveTeam records source as the project's last good team file, replacing
// any earlier one. It fails with troupe.ErrNotFound when id is not
// registered. source is copied; an empty source is kept as empty, not as
// none.
func (db *ProjectStore) SaveTeam(ctx context.Context, id troupe.ProjectID, source []byte) error {
	if source == nil {
		source = []byte{} // nil would bind as NULL
	}
	saved, _ := toNanos(time.Now())
	err := db.write(ctx, func(tx *sql.Tx) error {
		if err := registered(ctx, tx, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO project_teams (project_id, source, saved_at) VALUES (?, ?, ?)
			ON CONFLICT (project_id) DO UPDATE SET source = excluded.source, saved_at = excluded.saved_at`,
			string(id), source, saved)
		return err
	})
	if err != nil {
		return fmt.Errorf("save team %s: %w", id, err)
	}
	return nil
}

// LastTeam returns the source saved by SaveTeam, or nil when none was (also
// when id is not registered). A saved empty source comes back as a non-nil
// empty slice.
func (db *ProjectStore) LastTeam(ctx context.Context, id troupe.ProjectID) ([]byte, error) {
	var source []byte
	err := db.r.QueryRowContext(ctx,
		`SELECT source FROM project_teams WHERE project_id = ?`, string(id)).Scan(&source)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read team %s: %w", id, err)
	}
	if source == nil {
		source = []byte{}
	}
	return source, nil
}

// SaveApproval records a as the project's approved team, replacing any
// earlier one. It fails with troupe.ErrNotFound when id is not registered.
func (db *ProjectStore) SaveApproval(ctx context.Context, id troupe.ProjectID, a project.Approval) error {
	team := a.Team
	if team == nil {
		team = []byte{} // nil would bind as NULL
	}
	saved, _ := toNanos(time.Now())
	err := db.write(ctx, func(tx *sql.Tx) error {
		if err := registered(ctx, tx, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO project_approvals (project_id, team, rejected, saved_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (project_id) DO UPDATE SET team = excluded.team, rejected = excluded.rejected, saved_at = excluded.saved_at`,
			string(id), team, a.Rejected, saved)
		return err
	})
	if err != nil {
		return fmt.Errorf("save approved team %s: %w", id, err)
	}
	return nil
}

// Approval returns what SaveApproval saved, and false when nothing was
// (also when id is not registered).
func (db *ProjectStore) Approval(ctx context.Context, id troupe.ProjectID) (project.Approval, bool, error) {
	var a project.Approval
	err := db.r.QueryRowContext(ctx,
		`SELECT team, rejected FROM project_approvals WHERE project_id = ?`, string(id)).Scan(&a.Team, &a.Rejected)
	if errors.Is(err, sql.ErrNoRows) {
		return project.Approval{}, false, nil
	}
	if err != nil {
		return project.Approval{}, false, fmt.Errorf("read approved team %s: %w", id, err)
	}
	if a.Team == nil {
		a.Team = []byte{}
	}
	return a, true, nil
}

// registered fails with troupe.ErrNotFound when project id is not
// registered, inside the write transaction tx.
func registered(ctx context.Context, tx *sql.Tx, id troupe.ProjectID) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM projects WHERE id = ?`, string(id)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("project %s is not registered: %w", id, troupe.ErrNotFound)
	}
	return err
}
