package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// ChatStore is the store of the openai agents' conversations (openai.Store), on the database of the DB it came from.
type ChatStore struct{ *conn }

// Chats is the store of the openai agents' conversations (openai.Store).
func (db *DB) Chats() *ChatStore { return &ChatStore{db.conn} }

// The methods below implement openai.Store (asserted in internal/daemon:
// this package does not import the engines): the conversations of openai
// agents, message by message.

// ChatHistory returns conv's entries of k in the order appended.
func (db *ChatStore) ChatHistory(ctx context.Context, k troupe.RuntimeKey, conv string) ([]troupe.ConversationEntry, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT turn, data FROM openai_messages
		WHERE project = ? AND agent = ? AND conversation = ? ORDER BY id`,
		string(k.Project), string(k.Agent), conv)
	if err != nil {
		return nil, fmt.Errorf("read conversation %s of %s: %w", conv, k.Agent, err)
	}
	defer rows.Close()
	var out []troupe.ConversationEntry
	for rows.Next() {
		var e troupe.ConversationEntry
		if err := rows.Scan(&e.Turn, &e.Data); err != nil {
			return nil, fmt.Errorf("read conversation %s of %s: %w", conv, k.Agent, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read conversation %s of %s: %w", conv, k.Agent, err)
	}
	return out, nil
}

// AppendChat adds entries at the end of conv, in one transaction.
func (db *ChatStore) AppendChat(ctx context.Context, k troupe.RuntimeKey, conv string, entries []troupe.ConversationEntry) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		for _, e := range entries {
			if _, err := tx.ExecContext(ctx, `INSERT INTO openai_messages (project, agent, conversation, turn, data)
				VALUES (?, ?, ?, ?, ?)`, string(k.Project), string(k.Agent), conv, e.Turn, e.Data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("append to conversation %s of %s: %w", conv, k.Agent, err)
	}
	return nil
}

// TrimChat deletes conv's entries of turns before turn.
func (db *ChatStore) TrimChat(ctx context.Context, k troupe.RuntimeKey, conv string, turn int64) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM openai_messages
			WHERE project = ? AND agent = ? AND conversation = ? AND turn < ?`,
			string(k.Project), string(k.Agent), conv, turn)
		return err
	})
	if err != nil {
		return fmt.Errorf("trim conversation %s of %s: %w", conv, k.Agent, err)
	}
	return nil
}

// KeepChat deletes k's conversations other than keep.
func (db *ChatStore) KeepChat(ctx context.Context, k troupe.RuntimeKey, keep string) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM openai_messages
			WHERE project = ? AND agent = ? AND conversation <> ?`,
			string(k.Project), string(k.Agent), keep)
		return err
	})
	if err != nil {
		return fmt.Errorf("forget conversations of %s: %w", k.Agent, err)
	}
	return nil
}
