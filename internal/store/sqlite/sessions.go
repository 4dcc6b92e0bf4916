package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// SessionStore is the store of each agent's engine conversation id (the runtime's Sessions), on the database of the DB it came from.
type SessionStore struct{ *conn }

// Sessions is the store of each agent's engine conversation id (the runtime's Sessions).
func (db *DB) Sessions() *SessionStore { return &SessionStore{db.conn} }

// The methods below implement runtime.Sessions (asserted in
// internal/daemon: this package does not import the runtime).

// SessionID returns k's engine conversation id and its engine; an empty id
// when none is stored.
func (db *SessionStore) SessionID(ctx context.Context, k troupe.RuntimeKey) (troupe.Engine, string, error) {
	var eng, id string
	err := db.r.QueryRowContext(ctx, `SELECT engine, session_id FROM agent_sessions WHERE project = ? AND agent = ?`,
		string(k.Project), string(k.Agent)).Scan(&eng, &id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("read session id of %s: %w", k.Agent, err)
	}
	return troupe.Engine(eng), id, nil
}

// SetSessionID records k's conversation id, replacing any earlier one.
func (db *SessionStore) SetSessionID(ctx context.Context, k troupe.RuntimeKey, eng troupe.Engine, id string) error {
	if id == "" {
		return fmt.Errorf("set session id of %s: empty id: %w", k.Agent, troupe.ErrInvalid)
	}
	now, _ := toNanos(time.Now())
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO agent_sessions (project, agent, engine, session_id, updated_at)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (project, agent) DO UPDATE SET engine = excluded.engine,
				session_id = excluded.session_id, updated_at = excluded.updated_at`,
			string(k.Project), string(k.Agent), string(eng), id, now)
		if err != nil || eng != troupe.EngineClaude {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO claude_agent_sessions (session_id, project, agent, seen_at)
			VALUES (?, ?, ?, ?)`, id, string(k.Project), string(k.Agent), now)
		return err
	})
	if err != nil {
		return fmt.Errorf("set session id of %s: %w", k.Agent, err)
	}
	return nil
}

// ClearSessionID forgets k's conversation id, and the messages of an
// openai agent's conversation kept here (openai.Store).
func (db *SessionStore) ClearSessionID(ctx context.Context, k troupe.RuntimeKey) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM agent_sessions WHERE project = ? AND agent = ?`,
			string(k.Project), string(k.Agent)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM openai_messages WHERE project = ? AND agent = ?`,
			string(k.Project), string(k.Agent))
		return err
	})
	if err != nil {
		return fmt.Errorf("clear session id of %s: %w", k.Agent, err)
	}
	return nil
}

// ClearProjectSessions forgets the conversation ids of p's agents, and
// its openai agents' conversations.
func (db *SessionStore) ClearProjectSessions(ctx context.Context, p troupe.ProjectID) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM agent_sessions WHERE project = ?`, string(p)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM openai_messages WHERE project = ?`, string(p))
		return err
	})
	if err != nil {
		return fmt.Errorf("clear session ids of project %s: %w", p, err)
	}
	return nil
}
