package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/internal/claudesessions"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// ClaudeStore is the store of the Claude Code sessions' index and the Claude session ids of troupe's agents (claudesessions.Store and AgentSessions), on the database of the DB it came from.
type ClaudeStore struct{ *conn }

// ClaudeSessions is the store of the Claude Code sessions' index and the Claude session ids of troupe's agents (claudesessions.Store and AgentSessions).
func (db *DB) ClaudeSessions() *ClaudeStore { return &ClaudeStore{db.conn} }

var (
	_ claudesessions.Store         = (*ClaudeStore)(nil)
	_ claudesessions.AgentSessions = (*ClaudeStore)(nil)
)

// ClaudeFiles implements claudesessions.Store: every row of claude_files.
func (db *ClaudeStore) ClaudeFiles(ctx context.Context) ([]claudesessions.File, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT path, session_id, size, mtime, inode, read_to, complete, cwd, title, title_kind,
		prompt, version, git_branch, first_at, last_at, messages, model, skipped FROM claude_files`)
	if err != nil {
		return nil, fmt.Errorf("read claude sessions index: %w", err)
	}
	defer rows.Close()
	var out []claudesessions.File
	for rows.Next() {
		var f claudesessions.File
		var inode, first, last int64
		if err := rows.Scan(&f.Path, &f.ID, &f.Stamp.Size, &f.Stamp.ModTime, &inode, &f.Offset, &f.Complete, &f.Cwd, &f.Title, &f.TitleKind,
			&f.Prompt, &f.Version, &f.GitBranch, &first, &last, &f.Messages, &f.Model, &f.Skipped); err != nil {
			return nil, fmt.Errorf("read claude sessions index: %w", err)
		}
		f.Stamp.Inode = uint64(inode)
		f.First, f.Last = claudeTime(first), claudeTime(last)
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read claude sessions index: %w", err)
	}
	return out, nil
}

func claudeTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return fromNanos(n)
}

func claudeNanos(t time.Time) int64 {
	n, ok := toNanos(t)
	if t.IsZero() || !ok {
		return 0
	}
	return n
}

// SaveClaudeFiles implements claudesessions.Store in one transaction,
// committed with synchronous=NORMAL: the index is a cache of the files.
func (db *ClaudeStore) SaveClaudeFiles(ctx context.Context, changed []claudesessions.File, removed []string) error {
	err := db.writeRelaxed(ctx, func(tx *sql.Tx) error {
		if len(changed) > 0 {
			ins, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO claude_files (path, session_id, size, mtime, inode, read_to, complete,
				cwd, title, title_kind, prompt, version, git_branch, first_at, last_at, messages, model, skipped)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
			if err != nil {
				return err
			}
			defer ins.Close()
			for _, f := range changed {
				if _, err := ins.ExecContext(ctx, f.Path, f.ID, f.Stamp.Size, f.Stamp.ModTime, int64(f.Stamp.Inode), f.Offset, f.Complete,
					f.Cwd, f.Title, f.TitleKind, f.Prompt, f.Version, f.GitBranch, claudeNanos(f.First), claudeNanos(f.Last),
					f.Messages, f.Model, f.Skipped); err != nil {
					return err
				}
			}
		}
		if len(removed) > 0 {
			del, err := tx.PrepareContext(ctx, `DELETE FROM claude_files WHERE path = ?`)
			if err != nil {
				return err
			}
			defer del.Close()
			for _, p := range removed {
				if _, err := del.ExecContext(ctx, p); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save claude sessions index: %w", err)
	}
	return nil
}

// ClaudeAgentSessions implements claudesessions.AgentSessions: every
// Claude session id troupe's agents have had, with the agent.
func (db *ClaudeStore) ClaudeAgentSessions(ctx context.Context) (map[string]claudesessions.AgentRef, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT session_id, project, agent FROM claude_agent_sessions`)
	if err != nil {
		return nil, fmt.Errorf("read claude agent sessions: %w", err)
	}
	defer rows.Close()
	out := map[string]claudesessions.AgentRef{}
	for rows.Next() {
		var id, p, a string
		if err := rows.Scan(&id, &p, &a); err != nil {
			return nil, fmt.Errorf("read claude agent sessions: %w", err)
		}
		out[id] = troupe.RuntimeKey{Project: troupe.ProjectID(p), Agent: troupe.AgentID(a)}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read claude agent sessions: %w", err)
	}
	return out, nil
}
