package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/internal/check"
	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// CheckStore is the store of check results (check.Store), on the database
// of the DB it came from. It is held to check.MemStore's behaviour by the
// suite in internal/check/checktest.
type CheckStore struct{ *conn }

// Checks is the store of check results (check.Store).
func (db *DB) Checks() *CheckStore { return &CheckStore{db.conn} }

var _ check.Store = (*CheckStore)(nil)

const checkCols = `id, project, agent, check_name, command, dir, state, exit_code, reason, turn,
	started_at, duration_ms, output, output_bytes, output_cut`

// AddCheckResult implements check.Store. The output is kept to
// check.MaxOutput bytes whatever the caller gave.
func (db *CheckStore) AddCheckResult(ctx context.Context, r check.Result) (check.Result, error) {
	if err := check.CheckResult(r); err != nil {
		return check.Result{}, err
	}
	started, ok := toNanos(r.StartedAt)
	if !ok {
		return check.Result{}, fmt.Errorf("add check result: started_at %s outside years 1677-2262: %w", r.StartedAt, troupe.ErrInvalid)
	}
	r.Output = string(clip.Tail([]byte(r.Output), check.MaxOutput))
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO check_results (project, agent, check_name, command, dir, state, exit_code, reason, turn,
			started_at, duration_ms, output, output_bytes, output_cut) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			string(r.Project), string(r.Agent), string(r.Check), r.Command, r.Dir, string(r.State), r.ExitCode, r.Reason,
			string(r.Turn), started, r.DurationMS, r.Output, r.OutputBytes, r.OutputCut)
		if err != nil {
			return err
		}
		if r.ID, err = res.LastInsertId(); err != nil {
			return err
		}
		// The agent's newest check.MaxResultsPerAgent stay.
		_, err = tx.ExecContext(ctx, `DELETE FROM check_results WHERE project = ?1 AND agent = ?2 AND id <= (
			SELECT id FROM check_results WHERE project = ?1 AND agent = ?2 ORDER BY id DESC LIMIT 1 OFFSET ?3)`,
			string(r.Project), string(r.Agent), check.MaxResultsPerAgent)
		return err
	})
	if err != nil {
		return check.Result{}, fmt.Errorf("add check result: %w", err)
	}
	return r, nil
}

// CheckResults implements check.Store.
func (db *CheckStore) CheckResults(ctx context.Context, f check.Filter) ([]check.Result, error) {
	if f.Project == "" {
		return nil, fmt.Errorf("list check results: a project is required: %w", troupe.ErrInvalid)
	}
	where, args := []string{"project = ?"}, []any{string(f.Project)}
	for col, v := range map[string]string{"agent": string(f.Agent), "turn": string(f.Turn), "check_name": string(f.Check)} {
		if v != "" {
			where, args = append(where, col+" = ?"), append(args, v)
		}
	}
	args = append(args, check.Limit(f.Limit))
	rows, err := db.r.QueryContext(ctx, `SELECT `+checkCols+` FROM check_results WHERE `+strings.Join(where, " AND ")+
		` ORDER BY id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list check results: %w", err)
	}
	defer rows.Close()
	out := []check.Result{}
	for rows.Next() {
		var r check.Result
		var started int64
		if err := rows.Scan(&r.ID, &r.Project, &r.Agent, &r.Check, &r.Command, &r.Dir, &r.State, &r.ExitCode, &r.Reason, &r.Turn,
			&started, &r.DurationMS, &r.Output, &r.OutputBytes, &r.OutputCut); err != nil {
			return nil, fmt.Errorf("list check results: %w", err)
		}
		r.StartedAt = fromNanos(started)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list check results: %w", err)
	}
	return out, nil
}
