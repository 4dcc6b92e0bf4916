package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// JournalStore is the store of what each agent did, turn by turn (journal.Store), on the database of the DB it came from.
type JournalStore struct{ *conn }

// Journal is the store of what each agent did, turn by turn (journal.Store).
func (db *DB) Journal() *JournalStore { return &JournalStore{db.conn} }

// JournalStore implements journal.Store (schema version 7), held to journal.MemStore's
// behaviour by journaltest.
//
// Record is one IMMEDIATE transaction on the writer connection, like every
// write, but committed with synchronous=NORMAL: in WAL mode its commit
// waits for no fsync, so a journal batch never holds an inbox commit for
// the time of a disk flush. It survives the daemon being killed (the WAL is
// written before Record returns); a power loss may lose the last batches,
// which the journal allows. The connection is set back to FULL before it
// goes back to the pool, or closed when that fails.
var _ journal.Store = (*JournalStore)(nil)

// turnEnd is the JSON of journal_turns.final.
type turnEnd struct {
	Text    string         `json:"text,omitempty"`
	TextCut bool           `json:"text_cut,omitempty"`
	Error   string         `json:"error,omitempty"`
	Usage   *journal.Usage `json:"usage,omitempty"`
}

// Record implements journal.Store.
func (db *JournalStore) Record(ctx context.Context, entries ...journal.Entry) error {
	for _, e := range entries {
		if err := journal.Check(e); err != nil {
			return err
		}
		if _, ok := toNanos(e.At()); !ok && !e.At().IsZero() {
			return fmt.Errorf("record journal entry of turn %s: time %s outside years 1677-2262: %w", e.Turn, e.At(), troupe.ErrInvalid)
		}
	}
	if len(entries) == 0 {
		return nil
	}
	if err := db.writeRelaxed(ctx, func(tx *sql.Tx) error {
		rows := map[journalTurnKey]*turnRowState{} // the turn rows the batch touches
		for _, e := range entries {
			if err := recordEntry(ctx, tx, rows, e); err != nil {
				return err
			}
		}
		for _, r := range rows {
			if err := r.save(ctx, tx); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("record journal: %w", err)
	}
	return nil
}

// writeRelaxed is write with synchronous=NORMAL for this transaction only.
func (db *conn) writeRelaxed(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	if err := db.checkFile(); err != nil {
		return err
	}
	conn, err := db.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// Back to FULL, whatever happened, before anyone else writes.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), busyTimeout)
		defer cancel()
		if _, rerr := conn.ExecContext(rctx, "PRAGMA synchronous = FULL"); rerr != nil {
			db.log.Error("restore synchronous=FULL: closing the connection", "err", rerr)
			// ErrBadConn makes the pool discard the connection: a new one
			// gets its pragmas (FULL) from the DSN.
			conn.Raw(func(any) error { return driver.ErrBadConn })
			err = errors.Join(err, rerr)
		}
		conn.Close()
	}()
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		return err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	return tx.Commit()
}

// journalTurnKey names one turn of one agent.
type journalTurnKey struct {
	key  troupe.RuntimeKey
	turn troupe.TurnID
}

// turnRowState is what a batch changes of one turn row, saved once at
// the end of the batch.
type turnRowState struct {
	id      int64
	events  int64 // the last seq
	bytes   int64 // added by the batch
	dropped int   // added by the batch
}

func (r *turnRowState) save(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `UPDATE journal_turns SET events = ?, bytes = bytes + ?, dropped = dropped + ? WHERE id = ?`,
		r.events, r.bytes, r.dropped, r.id)
	return err
}

// recordEntry applies one entry (see journal.Store); rows holds the turn
// rows the transaction has seen.
func recordEntry(ctx context.Context, tx *sql.Tx, rows map[journalTurnKey]*turnRowState, e journal.Entry) error {
	tk := journalTurnKey{e.Key, e.Turn}
	r, ok := rows[tk]
	if !ok {
		if e.Start != nil {
			// A new turn may prune old ones: first save what the batch
			// added, so pruning counts it (and forget rows it may delete).
			for k, o := range rows {
				if err := o.save(ctx, tx); err != nil {
					return err
				}
				delete(rows, k)
			}
		}
		var err error
		if r, err = turnRow(ctx, tx, e); err != nil {
			return err
		}
		rows[tk] = r
	}
	switch {
	case e.Event != nil:
		ev := *e.Event
		r.events++
		ev.Seq = int(r.events)
		r.bytes += int64(ev.Bytes())
		data, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO journal_events (turn_id, seq, data) VALUES (?, ?, ?)`, r.id, ev.Seq, data); err != nil {
			return err
		}
	case e.End != nil:
		final, err := json.Marshal(turnEnd{Text: e.End.Text, TextCut: e.End.TextCut, Error: e.End.Error, Usage: e.End.Usage})
		if err != nil {
			return err
		}
		r.bytes += int64(e.End.Bytes())
		if _, err := tx.ExecContext(ctx, `UPDATE journal_turns SET ended_at = ?, final = ? WHERE id = ?`,
			nanosOrNow(e.End.At), final, r.id); err != nil {
			return err
		}
	}
	r.dropped += e.Dropped
	return nil
}

// turnRow reads e's turn row, or creates it (pruning the agent's oldest
// turns when e is a Start).
func turnRow(ctx context.Context, tx *sql.Tx, e journal.Entry) (*turnRowState, error) {
	r := &turnRowState{}
	err := tx.QueryRowContext(ctx, `SELECT id, events FROM journal_turns WHERE project = ? AND agent = ? AND turn = ?`,
		e.Key.Project, e.Key.Agent, e.Turn).Scan(&r.id, &r.events)
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		return r, err
	}
	msgs := []journal.Message{}
	if e.Start != nil {
		if e.Start.Messages != nil {
			msgs = e.Start.Messages
		}
		r.bytes = int64(e.Start.Bytes())
	}
	data, err := json.Marshal(msgs)
	if err != nil {
		return nil, err
	}
	// The row starts with the start's size, so pruning counts the new turn.
	if err := tx.QueryRowContext(ctx, `INSERT INTO journal_turns (project, agent, turn, started_at, messages, dropped, events, bytes)
		VALUES (?, ?, ?, ?, ?, 0, 0, ?) RETURNING id`, e.Key.Project, e.Key.Agent, e.Turn, nanosOrNow(e.At()), data, r.bytes).Scan(&r.id); err != nil {
		return nil, err
	}
	r.bytes = 0 // in the row already
	if e.Start != nil && r.id%journal.PruneEvery == 0 {
		return r, prune(ctx, tx, e.Key)
	}
	return r, nil
}

// prune deletes k's oldest turns beyond journal's bounds (journal.Prune).
func prune(ctx context.Context, tx *sql.Tx, k troupe.RuntimeKey) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, bytes FROM journal_turns WHERE project = ? AND agent = ? ORDER BY id`, k.Project, k.Agent)
	if err != nil {
		return err
	}
	var ids, sizes []int64
	for rows.Next() {
		var id, size int64
		if err := rows.Scan(&id, &size); err != nil {
			rows.Close()
			return err
		}
		ids, sizes = append(ids, id), append(sizes, size)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if n := journal.Prune(sizes); n > 0 {
		_, err := tx.ExecContext(ctx, `DELETE FROM journal_turns WHERE project = ? AND agent = ? AND id <= ?`, k.Project, k.Agent, ids[n-1])
		return err
	}
	return nil
}

func nanosOrNow(t time.Time) int64 {
	if t.IsZero() {
		t = time.Now()
	}
	n, _ := toNanos(t) // checked by Record
	return n
}

const journalTurnCols = `id, project, agent, turn, started_at, messages, ended_at, final, dropped`

// Turns implements journal.Store.
func (db *JournalStore) Turns(ctx context.Context, k troupe.RuntimeKey, before int64, limit int) ([]journal.Turn, error) {
	q := `SELECT ` + journalTurnCols + ` FROM journal_turns WHERE project = ? AND agent = ?`
	args := []any{k.Project, k.Agent}
	if before > 0 {
		q += ` AND id < ?`
		args = append(args, before)
	}
	q += ` ORDER BY id DESC LIMIT ?`
	args = append(args, journal.Limit(limit))
	ts, err := db.readTurns(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read journal of %s: %w", k, err)
	}
	return ts, nil
}

// Turn implements journal.Store.
func (db *JournalStore) Turn(ctx context.Context, k troupe.RuntimeKey, turn troupe.TurnID) (journal.Turn, error) {
	ts, err := db.readTurns(ctx, `SELECT `+journalTurnCols+` FROM journal_turns WHERE project = ? AND agent = ? AND turn = ?`, k.Project, k.Agent, turn)
	if err != nil {
		return journal.Turn{}, fmt.Errorf("read journal of %s: %w", k, err)
	}
	if len(ts) == 0 {
		return journal.Turn{}, journal.NotFound(k, turn)
	}
	return ts[0], nil
}

// readTurns reads turn rows and their events, in one read transaction.
func (db *conn) readTurns(ctx context.Context, q string, args ...any) ([]journal.Turn, error) {
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var ts []journal.Turn
	for rows.Next() {
		var t journal.Turn
		var started int64
		var ended sql.NullInt64
		var msgs []byte
		var final sql.NullString
		if err := rows.Scan(&t.Seq, &t.Project, &t.Agent, &t.ID, &started, &msgs, &ended, &final, &t.Dropped); err != nil {
			rows.Close()
			return nil, err
		}
		t.StartedAt = fromNanos(started)
		if err := json.Unmarshal(msgs, &t.Messages); err != nil {
			rows.Close()
			return nil, fmt.Errorf("turn %s: messages: %w", t.ID, err)
		}
		if ended.Valid {
			t.EndedAt = fromNanos(ended.Int64)
			var end turnEnd
			if err := json.Unmarshal([]byte(final.String), &end); err != nil {
				rows.Close()
				return nil, fmt.Errorf("turn %s: end: %w", t.ID, err)
			}
			t.Text, t.TextCut, t.Error, t.Usage = end.Text, end.TextCut, end.Error, end.Usage
		}
		ts = append(ts, t)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	for i := range ts {
		if ts[i].Events, err = turnEvents(ctx, tx, ts[i].Seq); err != nil {
			return nil, fmt.Errorf("turn %s: %w", ts[i].ID, err)
		}
		ts[i] = journal.Finish(ts[i])
	}
	return ts, nil
}

func turnEvents(ctx context.Context, tx *sql.Tx, id int64) ([]journal.Event, error) {
	rows, err := tx.QueryContext(ctx, `SELECT data FROM journal_events WHERE turn_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	evs := []journal.Event{}
	for rows.Next() {
		var data []byte
		var ev journal.Event
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, fmt.Errorf("event: %w", err)
		}
		evs = append(evs, ev)
	}
	return evs, rows.Err()
}
