package sqlite

import (
	"context"
	"database/sql"
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
// The notes' files stay the truth; this is a cache that memory.Store keeps
// up to date before searching, with each note's file stamp (column stamp),
// so that a daemon started later reconciles it with the files instead of
// rebuilding it. Update is one IMMEDIATE transaction holding only the notes
// that changed; Search and Entries read from the read pool. A MemoryIndex
// is safe for concurrent use.
type MemoryIndex struct {
	db *conn
}

// MemoryIndex returns the database's index of memory notes.
func (db *DB) MemoryIndex() *MemoryIndex { return &MemoryIndex{db: db.conn} }

// Update implements memory.Index, in one IMMEDIATE transaction: the rows
// of drop go, then each note of put is inserted or its row updated in place
// (its id kept). It fails with troupe.ErrNotFound when project is not
// registered, and with troupe.ErrInvalid for a note with an empty name or
// a ModTime outside the years 1677-2262; then nothing changes.
func (x *MemoryIndex) Update(ctx context.Context, project troupe.ProjectID, put []memory.Entry, drop []string) error {
	for _, e := range put {
		if e.Name == "" {
			return fmt.Errorf("index memory notes of %s: a note without a name: %w", project, troupe.ErrInvalid)
		}
		if _, ok := memoryNanos(e.ModTime); !ok {
			return fmt.Errorf("index memory note %s of %s: mod time %s outside years 1677-2262: %w", e.Name, project, e.ModTime, troupe.ErrInvalid)
		}
	}
	err := x.db.write(ctx, func(tx *sql.Tx) error {
		if err := registered(ctx, tx, project); err != nil {
			return err
		}
		if len(drop) > 0 {
			del, err := tx.PrepareContext(ctx, `DELETE FROM memory_notes WHERE project_id = ? AND name = ?`)
			if err != nil {
				return err
			}
			defer del.Close()
			for _, name := range drop {
				if _, err := del.ExecContext(ctx, string(project), name); err != nil {
					return err
				}
			}
		}
		if len(put) > 0 {
			// ON CONFLICT ... DO UPDATE keeps the row's id (the FTS rowid);
			// the update trigger re-indexes it.
			ins, err := tx.PrepareContext(ctx, `INSERT INTO memory_notes (project_id, name, description, type, body, path, mod_time, stamp)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (project_id, name) DO UPDATE SET description = excluded.description, type = excluded.type,
					body = excluded.body, path = excluded.path, mod_time = excluded.mod_time, stamp = excluded.stamp`)
			if err != nil {
				return err
			}
			defer ins.Close()
			for _, e := range put {
				mt, _ := memoryNanos(e.ModTime)
				if _, err := ins.ExecContext(ctx, string(project), e.Name, e.Description, e.Type, e.Body, e.Path, mt, e.Stamp); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index memory notes of %s: %w", project, err)
	}
	return nil
}

// Entries implements memory.Index.
func (x *MemoryIndex) Entries(ctx context.Context, project troupe.ProjectID) ([]memory.Entry, error) {
	rows, err := x.db.r.QueryContext(ctx, `SELECT name, description, type, path, mod_time, stamp
		FROM memory_notes WHERE project_id = ? ORDER BY name`, string(project))
	if err != nil {
		return nil, fmt.Errorf("list memory notes of %s: %w", project, err)
	}
	defer rows.Close()
	es := []memory.Entry{}
	for rows.Next() {
		var (
			e  memory.Entry
			mt sql.NullInt64
		)
		if err := rows.Scan(&e.Name, &e.Description, &e.Type, &e.Path, &mt, &e.Stamp); err != nil {
			return nil, fmt.Errorf("list memory notes of %s: %w", project, err)
		}
		if mt.Valid {
			e.ModTime = fromNanos(mt.Int64)
		}
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list memory notes of %s: %w", project, err)
	}
	return es, nil
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
