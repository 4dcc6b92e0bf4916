package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/memory"
	"github.com/troupe-dev/troupe/internal/troupe"
)

var _ memory.Index = (*MemoryIndex)(nil)

// MemoryIndex is the full-text index of memory notes (memory.Index): the
// table memory_notes, one row per project and note name, and its FTS5 index
// memory_fts (tokenizer unicode61 with diacritics removed, so "vivacite"
// finds "vivacité"), kept in step by triggers. Rows belong to a registered
// project and go when it is removed.
//
// The notes' files stay the truth; this is a cache that memory.Store syncs
// before searching. Sync is one IMMEDIATE transaction that rewrites only the
// notes that changed; Search reads from the read pool. A MemoryIndex is safe
// for concurrent use.
type MemoryIndex struct {
	db *DB
}

// MemoryIndex returns the database's index of memory notes.
func (db *DB) MemoryIndex() *MemoryIndex { return &MemoryIndex{db: db} }

// memoryRow is a note as stored.
type memoryRow struct {
	id                           int64
	description, typ, body, path string
	modTime                      sql.NullInt64
}

// Sync implements memory.Index. It fails with troupe.ErrNotFound when
// project is not registered, and with troupe.ErrInvalid for a note with an
// empty name or a ModTime outside the years 1677-2262. When notes repeat a
// name, the last one counts.
func (x *MemoryIndex) Sync(ctx context.Context, project troupe.ProjectID, notes []memory.Note) error {
	want := make(map[string]memory.Note, len(notes))
	for _, n := range notes {
		if n.Name == "" {
			return fmt.Errorf("index memory notes of %s: a note without a name: %w", project, troupe.ErrInvalid)
		}
		if _, ok := memoryNanos(n.ModTime); !ok {
			return fmt.Errorf("index memory note %s of %s: mod time %s outside years 1677-2262: %w", n.Name, project, n.ModTime, troupe.ErrInvalid)
		}
		want[n.Name] = n
	}
	err := x.db.write(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM projects WHERE id = ?`, string(project)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("project %s is not registered: %w", project, troupe.ErrNotFound)
		}
		if err != nil {
			return err
		}
		have, err := memoryRows(ctx, tx, project)
		if err != nil {
			return err
		}
		for name, n := range want {
			mt, _ := memoryNanos(n.ModTime)
			old, ok := have[name]
			delete(have, name)
			switch {
			case ok && old.description == n.Description && old.typ == n.Type && old.body == n.Body &&
				old.path == n.Path && old.modTime == mt:
				continue // unchanged: leave its row and its index entry alone
			case ok:
				_, err = tx.ExecContext(ctx, `UPDATE memory_notes SET description = ?, type = ?, body = ?, path = ?, mod_time = ?
					WHERE id = ?`, n.Description, n.Type, n.Body, n.Path, mt, old.id)
			default:
				_, err = tx.ExecContext(ctx, `INSERT INTO memory_notes (project_id, name, description, type, body, path, mod_time)
					VALUES (?, ?, ?, ?, ?, ?, ?)`, string(project), name, n.Description, n.Type, n.Body, n.Path, mt)
			}
			if err != nil {
				return err
			}
		}
		for _, gone := range have {
			if _, err := tx.ExecContext(ctx, `DELETE FROM memory_notes WHERE id = ?`, gone.id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index memory notes of %s: %w", project, err)
	}
	return nil
}

// memoryRows reads the project's stored notes by name.
func memoryRows(ctx context.Context, tx *sql.Tx, project troupe.ProjectID) (map[string]memoryRow, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, name, description, type, body, path, mod_time
		FROM memory_notes WHERE project_id = ?`, string(project))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := map[string]memoryRow{}
	for rows.Next() {
		var (
			r    memoryRow
			name string
		)
		if err := rows.Scan(&r.id, &name, &r.description, &r.typ, &r.body, &r.path, &r.modTime); err != nil {
			return nil, err
		}
		have[name] = r
	}
	return have, rows.Err()
}

// memoryNanos stores a note's ModTime: NULL when zero.
func memoryNanos(t time.Time) (sql.NullInt64, bool) {
	if t.IsZero() {
		return sql.NullInt64{}, true
	}
	n, ok := toNanos(t)
	return sql.NullInt64{Int64: n, Valid: ok}, ok
}

// memoryRank weighs a match in the name, the description and the body, in
// the order of memory_fts's columns.
const memoryRank = `bm25(memory_fts, 10.0, 5.0, 1.0)`

// Search implements memory.Index. The query's terms (memory.Terms) are each
// quoted as an FTS5 string and marked as a prefix, so that no text an agent
// writes is read as FTS5 syntax: `"probe"* "codex"*`.
func (x *MemoryIndex) Search(ctx context.Context, project troupe.ProjectID, query string, limit int) ([]memory.Hit, error) {
	if limit <= 0 {
		limit = memory.DefaultSearchLimit
	}
	terms := memory.Terms(query)
	if len(terms) == 0 {
		return []memory.Hit{}, nil
	}
	hits, err := x.search(ctx, project, memoryMatch(terms), limit)
	if err != nil {
		return nil, fmt.Errorf("search memory notes of %s: %w", project, err)
	}
	return hits, nil
}

// memoryMatch builds the FTS5 expression for terms: every term, as a
// quoted prefix.
func memoryMatch(terms []string) string {
	var b strings.Builder
	for i, t := range terms {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(`"` + strings.ReplaceAll(t, `"`, `""`) + `"*`)
	}
	return b.String()
}

func (x *MemoryIndex) search(ctx context.Context, project troupe.ProjectID, match string, limit int) ([]memory.Hit, error) {
	rows, err := x.db.r.QueryContext(ctx, `SELECT n.name, n.description, n.type, n.path, n.mod_time,
			snippet(memory_fts, -1, '**', '**', '…', 16), `+memoryRank+` AS score
		FROM memory_fts JOIN memory_notes n ON n.id = memory_fts.rowid
		WHERE memory_fts MATCH ? AND n.project_id = ?
		ORDER BY score, n.name
		LIMIT ?`, match, string(project), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	hits := []memory.Hit{}
	for rows.Next() {
		var (
			h     memory.Hit
			mt    sql.NullInt64
			score float64
		)
		if err := rows.Scan(&h.Note.Name, &h.Note.Description, &h.Note.Type, &h.Note.Path, &mt, &h.Snippet, &score); err != nil {
			return nil, err
		}
		if mt.Valid {
			h.Note.ModTime = fromNanos(mt.Int64)
		}
		h.Snippet = strings.Join(strings.Fields(h.Snippet), " ")
		h.Rank = -score // bm25 is lower for better matches
		hits = append(hits, h)
	}
	return hits, rows.Err()
}
