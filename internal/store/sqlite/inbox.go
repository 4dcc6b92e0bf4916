package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// InboxStore is the store of messages and requests (inbox.Store), on the database of the DB it came from.
type InboxStore struct{ *conn }

// Inbox is the store of messages and requests (inbox.Store).
func (db *DB) Inbox() *InboxStore { return &InboxStore{db.conn} }

// InboxStore implements inbox.Store: the durable inboxes, conversations and
// requests of contract C6, held to inbox.MemStore's behaviour by the
// contract suite in internal/inbox/inboxtest.
//
// Every method that changes something is one IMMEDIATE transaction on the
// writer connection, committed with synchronous=FULL before it returns.
// Reads that are not part of a change go to the read pool: in WAL mode a
// read transaction sees every transaction committed before it began, so a
// read that happens after a write returned (in any goroutine) sees it.
var _ inbox.Store = (*InboxStore)(nil)

const messageCols = `id, project, to_agent, from_agent, kind, text, request, state, reason, turn, redelivered, created_at, done_at`

const requestCols = `id, project, from_agent, to_agent, kind, question, state, answer, error, detached, message_id, created_at, done_at,
	verify, tries, tried, checking, verdict`

// Append implements inbox.Store. A CreatedAt (or DoneAt) outside the
// years 1677 to 2262 is refused with troupe.ErrInvalid. Concurrent Appends
// share one transaction (group commit, see appendQueue); each returns once
// its message is durable.
func (db *InboxStore) Append(ctx context.Context, m troupe.Message) (troupe.Message, error) {
	m, _, err := db.appendMessage(ctx, "", m)
	return m, err
}

// AppendOnce implements inbox.Store, in the same group commit as Append:
// the key is a column with a unique index on (project, idem_key), so the
// first insert with a key wins, whether the calls share a transaction or
// not.
func (db *InboxStore) AppendOnce(ctx context.Context, key string, m troupe.Message) (troupe.Message, bool, error) {
	if err := inbox.CheckOnce(key, m); err != nil {
		return troupe.Message{}, false, err
	}
	return db.appendMessage(ctx, key, m)
}

// appendMessage is Append with an idempotency key ("" for none).
func (db *conn) appendMessage(ctx context.Context, key string, m troupe.Message) (troupe.Message, bool, error) {
	if err := inbox.CheckKey(m); err != nil {
		return troupe.Message{}, false, err
	}
	m = inbox.Admit(m, time.Now().UTC())
	if err := ctx.Err(); err != nil {
		return troupe.Message{}, false, fmt.Errorf("append message to %s: %w", m.Key(), err)
	}
	// Refuse what would fail the whole batch before joining one.
	if _, _, err := messageTimes(m); err != nil {
		return troupe.Message{}, false, fmt.Errorf("append message to %s: %w", m.Key(), err)
	}
	stored, added, err := db.appendDurably(m, key)
	if err != nil {
		return troupe.Message{}, false, fmt.Errorf("append message to %s: %w", m.Key(), err)
	}
	return stored, added, nil
}

// insertOnce stores m with idempotency key (none when ""), unless a
// message of m's project already holds that key: it then returns that
// message as it is, and added == false.
func insertOnce(ctx context.Context, tx *sql.Tx, key string, m troupe.Message) (_ troupe.Message, added bool, _ error) {
	if key == "" {
		m, err := insertMessage(ctx, tx, m)
		return m, true, err
	}
	created, done, err := messageTimes(m)
	if err != nil {
		return m, false, err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO messages (project, to_agent, from_agent, kind, text, request,
		state, reason, turn, redelivered, created_at, done_at, idem_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`,
		string(m.Project), string(m.To), string(m.From), string(m.Kind), m.Text, string(m.Request),
		string(m.State), m.Reason, string(m.Turn), m.Redelivered, created, done, key)
	if err != nil {
		return m, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		m.ID, err = res.LastInsertId()
		return m, true, err
	}
	// The WHERE term repeats the partial index messages_once's.
	first, err := scanMessage(tx.QueryRowContext(ctx, `SELECT `+messageCols+` FROM messages
		WHERE project = ? AND idem_key = ? AND idem_key IS NOT NULL`, string(m.Project), key))
	return first, false, err
}

// insertMessage stores m as it is, but for its ID, and returns it with the
// ID the table assigned.
func insertMessage(ctx context.Context, tx *sql.Tx, m troupe.Message) (troupe.Message, error) {
	created, done, err := messageTimes(m)
	if err != nil {
		return m, err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO messages (project, to_agent, from_agent, kind, text, request,
		state, reason, turn, redelivered, created_at, done_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		string(m.Project), string(m.To), string(m.From), string(m.Kind), m.Text, string(m.Request),
		string(m.State), m.Reason, string(m.Turn), m.Redelivered, created, done)
	if err != nil {
		return m, err
	}
	m.ID, err = res.LastInsertId()
	return m, err
}

// messageTimes returns m's CreatedAt and DoneAt as column values, or
// troupe.ErrInvalid for a time the columns cannot hold.
func messageTimes(m troupe.Message) (created, done any, err error) {
	created, ok := toNanos(m.CreatedAt)
	if !ok {
		return nil, nil, fmt.Errorf("created_at %s outside years 1677-2262: %w", m.CreatedAt, troupe.ErrInvalid)
	}
	if done, ok = nullNanos(m.DoneAt); !ok {
		return nil, nil, fmt.Errorf("done_at %s outside years 1677-2262: %w", m.DoneAt, troupe.ErrInvalid)
	}
	return created, done, nil
}

// nullNanos is toNanos for a time that may be unset: the zero time is NULL.
func nullNanos(t time.Time) (any, bool) {
	if t.IsZero() {
		return nil, true
	}
	n, ok := toNanos(t)
	return n, ok
}

func fromNullNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromNanos(n.Int64)
}

type scanner interface{ Scan(dest ...any) error }

func scanMessage(sc scanner) (troupe.Message, error) {
	var (
		m       troupe.Message
		created int64
		done    sql.NullInt64
	)
	err := sc.Scan(&m.ID, &m.Project, &m.To, &m.From, &m.Kind, &m.Text, &m.Request,
		&m.State, &m.Reason, &m.Turn, &m.Redelivered, &created, &done)
	m.CreatedAt, m.DoneAt = fromNanos(created), fromNullNanos(done)
	return m, err
}

// pendingQuery reads an inbox's oldest queued messages: arguments project,
// agent, limit (-1: none).
const pendingQuery = `SELECT ` + messageCols + ` FROM messages
	WHERE project = ? AND to_agent = ? AND state = 'queued' ORDER BY id LIMIT ?`

// Pending implements inbox.Store: a range of the index messages_inbox
// (project, to_agent, state, id), read in id order and cut by LIMIT, so
// its cost grows with limit, not with the queue.
func (db *InboxStore) Pending(ctx context.Context, k troupe.RuntimeKey, limit int) ([]troupe.Message, error) {
	budget := inbox.MaxPendingBytes
	if limit <= 0 {
		limit, budget = -1, math.MaxInt // SQLite: no limit
	}
	rows, err := db.r.QueryContext(ctx, pendingQuery, string(k.Project), string(k.Agent), limit)
	if err != nil {
		return nil, fmt.Errorf("read inbox %s: %w", k, err)
	}
	defer rows.Close()
	var ms []troupe.Message
	for size := 0; size < budget && rows.Next(); {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, fmt.Errorf("read inbox %s: %w", k, err)
		}
		ms = append(ms, m)
		size += len(m.Text)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read inbox %s: %w", k, err)
	}
	return ms, nil
}

// StartTurn implements inbox.Store. Ids that are not queued messages of
// k are ignored.
func (db *InboxStore) StartTurn(ctx context.Context, k troupe.RuntimeKey, ids []int64, turn troupe.TurnID) error {
	if len(ids) == 0 {
		return nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("start turn %s of %s: %w", turn, k, err)
	}
	err = db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE messages SET state = 'in_turn', turn = ?
			WHERE project = ? AND to_agent = ? AND state = 'queued' AND id IN (SELECT value FROM json_each(?))`,
			string(turn), string(k.Project), string(k.Agent), string(list))
		return err
	})
	if err != nil {
		return fmt.Errorf("start turn %s of %s: %w", turn, k, err)
	}
	return nil
}

// EndTurn implements inbox.Store: the turn's messages and the outcomes
// of the requests it handled commit together, so a daemon killed at the end
// of a turn never leaves a delivered ask whose request stays pending.
func (db *InboxStore) EndTurn(ctx context.Context, k troupe.RuntimeKey, turn troupe.TurnID, state troupe.MessageState, reason string, results []inbox.RequestResult) ([]inbox.Finished, error) {
	now, _ := toNanos(time.Now())
	var finished []inbox.Finished
	err := db.write(ctx, func(tx *sql.Tx) error {
		finished = finished[:0]
		q, args := `UPDATE messages SET state = ?, reason = ?, done_at = ?
			WHERE project = ? AND to_agent = ? AND state = 'in_turn' AND turn = ?`,
			[]any{string(state), reason, now, string(k.Project), string(k.Agent), string(turn)}
		if state == troupe.MsgQueued {
			q, args = `UPDATE messages SET state = 'queued', reason = ?, redelivered = 1, turn = ''
			WHERE project = ? AND to_agent = ? AND state = 'in_turn' AND turn = ?`,
				[]any{reason, string(k.Project), string(k.Agent), string(turn)}
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
		for _, res := range results {
			if res.Check {
				r, verified, ok, err := checkRequest(ctx, tx, res.ID, res.Answer)
				if err != nil {
					return err
				}
				if ok {
					finished = append(finished, inbox.Finished{Request: r})
				}
				if verified {
					continue
				}
			}
			r, queued, done, err := finishRequest(ctx, tx, res.ID, res.State, res.Answer, res.Error)
			if err != nil {
				return err
			}
			if done {
				finished = append(finished, inbox.Finished{Request: r, Queued: queued})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("end turn %s of %s: %w", turn, k, err)
	}
	return finished, nil
}

// Expire implements inbox.Store.
func (db *InboxStore) Expire(ctx context.Context, k troupe.RuntimeKey, reason string) (int, error) {
	now, _ := toNanos(time.Now())
	var n int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE messages SET state = 'expired', reason = ?, done_at = ?
			WHERE state IN ('queued', 'in_turn') AND project = ? AND to_agent = ?`,
			reason, now, string(k.Project), string(k.Agent))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("expire inbox %s: %w", k, err)
	}
	return int(n), nil
}

// Recover implements inbox.Store. The keys come in the order of their
// oldest queued message.
func (db *InboxStore) Recover(ctx context.Context) ([]troupe.RuntimeKey, error) {
	var keys []troupe.RuntimeKey
	err := db.write(ctx, func(tx *sql.Tx) error {
		// Both statements read messages_open, which holds open mail
		// only, not the whole history: this runs on the daemon's start.
		// Without statistics the planner would rather scan the covering
		// messages_inbox; INDEXED BY fails loudly if the index cannot
		// serve the query.
		if _, err := tx.ExecContext(ctx, `UPDATE messages INDEXED BY messages_open
			SET state = 'queued', redelivered = 1, turn = ''
			WHERE state IN ('queued', 'in_turn') AND state = 'in_turn'`); err != nil {
			return err
		}
		// Every open message is queued now.
		rows, err := tx.QueryContext(ctx, `SELECT project, to_agent FROM messages INDEXED BY messages_open
			WHERE state IN ('queued', 'in_turn')
			GROUP BY project, to_agent ORDER BY min(id)`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k troupe.RuntimeKey
			if err := rows.Scan(&k.Project, &k.Agent); err != nil {
				return err
			}
			keys = append(keys, k)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("recover inboxes: %w", err)
	}
	return keys, nil
}

// Conversation implements inbox.Store with index range reads only: the
// whole project through messages_project (project, id); one agent's
// through messages_to and messages_from, each read from the page's end
// for at most a page and the two merged (a UNION, which also keeps a
// message to oneself once), so a page costs the same at any history size.
// TestConversationQueryPlans holds them to it.
//
// A text is read clipped by SQLite (pageCols), never whole into Go, and
// the rows stop once the page is full (inbox.Fill): a page costs at most
// inbox.MaxPageBytes of memory whatever the messages hold.
func (db *InboxStore) Conversation(ctx context.Context, p troupe.ProjectID, q inbox.Page) ([]troupe.Message, error) {
	query, args := conversationQuery(p, q)
	ms, err := queryPage(ctx, db.r, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read conversation %s: %w", p, err)
	}
	if q.Newest {
		slices.Reverse(ms)
	}
	return ms, nil
}

// pageCols are messageCols with the text clipped in SQL at a few bytes
// over inbox.ClipBytes (inbox.Clip cuts it at a character boundary), and
// then the whole text's length in bytes.
var pageCols = strings.Replace(messageCols, "text,",
	fmt.Sprintf("coalesce(CAST(substr(CAST(text AS BLOB), 1, %d) AS TEXT), ''),", inbox.ClipBytes+utf8.UTFMax), 1) +
	", octet_length(text)"

// queryPage runs a query selecting pageCols, from the end its page is
// read from, until the page is full.
func queryPage(ctx context.Context, db *sql.DB, query string, args ...any) ([]troupe.Message, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		ms   []troupe.Message
		fill inbox.Fill
	)
	for rows.Next() {
		var (
			m       troupe.Message
			created int64
			done    sql.NullInt64
			size    int
		)
		if err := rows.Scan(&m.ID, &m.Project, &m.To, &m.From, &m.Kind, &m.Text, &m.Request,
			&m.State, &m.Reason, &m.Turn, &m.Redelivered, &created, &done, &size); err != nil {
			return nil, err
		}
		m.CreatedAt, m.DoneAt = fromNanos(created), fromNullNanos(done)
		if !fill.Take(&m, size) {
			break
		}
		ms = append(ms, m)
	}
	return ms, rows.Err()
}

// Text implements inbox.Store, reading only the part asked for (and a few
// bytes more, to end it at a character boundary).
func (db *InboxStore) Text(ctx context.Context, p troupe.ProjectID, id int64, offset int) (troupe.Message, error) {
	var (
		m       troupe.Message
		created int64
		done    sql.NullInt64
		size    int
	)
	cols := strings.Replace(messageCols, "text,", "coalesce(CAST(substr(CAST(text AS BLOB), ?3, ?4) AS TEXT), ''),", 1)
	err := db.r.QueryRowContext(ctx, `SELECT `+cols+`, octet_length(text) FROM messages WHERE project = ?1 AND id = ?2`,
		string(p), id, max(offset, 0)+1, inbox.MaxTextBytes+utf8.UTFMax).Scan(
		&m.ID, &m.Project, &m.To, &m.From, &m.Kind, &m.Text, &m.Request,
		&m.State, &m.Reason, &m.Turn, &m.Redelivered, &created, &done, &size)
	if errors.Is(err, sql.ErrNoRows) {
		err = troupe.ErrNotFound
	}
	if err != nil {
		return troupe.Message{}, fmt.Errorf("read message %d: %w", id, err)
	}
	m.CreatedAt, m.DoneAt = fromNanos(created), fromNullNanos(done)
	return inbox.Part(m, m.Text, offset, size)
}

// conversationQuery is the statement Conversation runs for q, and its
// arguments; a Newest page comes newest first.
func conversationQuery(p troupe.ProjectID, q inbox.Page) (string, []any) {
	order := "ASC"
	if q.Newest {
		order = "DESC"
	}
	before := q.Before
	if before <= 0 {
		before = math.MaxInt64
	}
	args := []any{string(p), q.After, before, q.Size(), string(q.Agent)}
	if q.Agent == "" {
		return `SELECT ` + pageCols + ` FROM messages INDEXED BY messages_project
			WHERE project = ?1 AND id > ?2 AND id < ?3
			ORDER BY id ` + order + ` LIMIT ?4`, args[:4]
	}
	side := func(index, where string) string {
		return `SELECT * FROM (SELECT ` + pageCols + ` FROM messages INDEXED BY ` + index + `
			WHERE project = ?1 AND ` + where + ` AND id > ?2 AND id < ?3
			ORDER BY id ` + order + ` LIMIT ?4)`
	}
	return side("messages_to", "to_agent = ?5") + ` UNION ALL ` +
		side("messages_from", "from_agent = ?5 AND to_agent <> ?5") +
		` ORDER BY id ` + order + ` LIMIT ?4`, args
}

// Ask implements inbox.Store. The request is stored as given but for
// its state (pending) and a zero CreatedAt (now); a request id that is
// already known, in any project, is refused with troupe.ErrAlreadyExists
// and nothing is stored.
func (db *InboxStore) Ask(ctx context.Context, r troupe.Request, m troupe.Message) (troupe.Message, error) {
	r.State = troupe.ReqPending
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now().UTC()
	}
	m = inbox.Admit(m, time.Now().UTC())
	created, ok := toNanos(r.CreatedAt)
	if !ok {
		return troupe.Message{}, fmt.Errorf("record request %s: created_at %s outside years 1677-2262: %w", r.ID, r.CreatedAt, troupe.ErrInvalid)
	}
	done, ok := nullNanos(r.DoneAt)
	if !ok {
		return troupe.Message{}, fmt.Errorf("record request %s: done_at %s outside years 1677-2262: %w", r.ID, r.DoneAt, troupe.ErrInvalid)
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM requests WHERE id = ?`, string(r.ID)).Scan(&one)
		switch {
		case err == nil:
			return troupe.ErrAlreadyExists
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if m, err = insertMessage(ctx, tx, m); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO requests (`+requestCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			string(r.ID), string(r.Project), string(r.From), string(r.To), string(r.Kind), r.Question,
			string(r.State), r.Answer, r.Error, r.Detached, m.ID, created, done,
			string(r.Verify), r.Tries, r.Tried, r.Checking, verdictJSON(r.Verdict))
		return err
	})
	if err != nil {
		return troupe.Message{}, fmt.Errorf("record request %s: %w", r.ID, err)
	}
	return m, nil
}

// readRequest returns the request with id and the id of its message, or
// troupe.ErrNotFound.
func readRequest(ctx context.Context, tx *sql.Tx, id troupe.RequestID) (troupe.Request, int64, error) {
	r, msgID, err := scanRequest(tx.QueryRowContext(ctx, `SELECT `+requestCols+` FROM requests WHERE id = ?`, string(id)))
	if errors.Is(err, sql.ErrNoRows) {
		err = troupe.ErrNotFound
	}
	return r, msgID, err
}

func scanRequest(sc scanner) (troupe.Request, int64, error) {
	var (
		r       troupe.Request
		msgID   int64
		created int64
		done    sql.NullInt64
		verdict sql.NullString
	)
	err := sc.Scan(&r.ID, &r.Project, &r.From, &r.To, &r.Kind, &r.Question, &r.State,
		&r.Answer, &r.Error, &r.Detached, &msgID, &created, &done,
		&r.Verify, &r.Tries, &r.Tried, &r.Checking, &verdict)
	r.CreatedAt, r.DoneAt = fromNanos(created), fromNullNanos(done)
	if err == nil && verdict.Valid {
		var v troupe.Verdict
		if err = json.Unmarshal([]byte(verdict.String), &v); err != nil {
			err = fmt.Errorf("read the verdict of request %s: %w", r.ID, err)
		}
		r.Verdict = &v
	}
	return r, msgID, err
}

// verdictJSON is v as the verdict column keeps it: NULL for none.
func verdictJSON(v *troupe.Verdict) any {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v) // plain fields: cannot fail
	return string(b)
}

// FinishRequest implements inbox.Store. An unknown id fails with
// troupe.ErrNotFound.
func (db *InboxStore) FinishRequest(ctx context.Context, id troupe.RequestID, state troupe.RequestState, answer, errText string) (troupe.Request, *troupe.Message, bool, error) {
	var (
		r      troupe.Request
		queued *troupe.Message
		done   bool
	)
	err := db.write(ctx, func(tx *sql.Tx) (err error) {
		r, queued, done, err = finishRequest(ctx, tx, id, state, answer, errText)
		return err
	})
	if err != nil {
		return troupe.Request{}, nil, false, fmt.Errorf("finish request %s: %w", id, err)
	}
	return r, queued, done, nil
}

// finishRequest is FinishRequest inside the caller's transaction.
func finishRequest(ctx context.Context, tx *sql.Tx, id troupe.RequestID, state troupe.RequestState, answer, errText string) (r troupe.Request, queued *troupe.Message, done bool, err error) {
	var msgID int64
	r, msgID, err = readRequest(ctx, tx, id)
	if err != nil || r.State != troupe.ReqPending {
		return r, nil, false, err
	}
	now := time.Now().UTC()
	nanos, _ := toNanos(now)
	r.State, r.Answer, r.Error, r.DoneAt, r.Checking = state, answer, errText, now, false
	if _, err := tx.ExecContext(ctx, `UPDATE requests SET state = ?, answer = ?, error = ?, done_at = ?, checking = 0, verdict = ? WHERE id = ?`,
		string(state), answer, errText, nanos, verdictJSON(r.Verdict), string(id)); err != nil {
		return r, nil, false, err
	}
	if state != troupe.ReqAnswered {
		// Its recipient never started on it: it will not.
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET state = 'expired', reason = ?, done_at = ?
			WHERE id = ? AND state = 'queued'`, errText, nanos, msgID); err != nil {
			return r, nil, false, err
		}
	}
	out, err := insertMessage(ctx, tx, inbox.Outcome(r, now))
	if err != nil {
		return r, nil, false, err
	}
	if out.State == troupe.MsgQueued {
		queued = &out
	}
	return r, queued, true, nil
}

// checkRequest sets request id, a verified delegation, Checking with the
// worker's answer and one more try, inside the caller's transaction
// (EndTurn). verified is false when it is no verified delegation; ok
// when it was set (it was pending and not Checking already).
func checkRequest(ctx context.Context, tx *sql.Tx, id troupe.RequestID, answer string) (r troupe.Request, verified, ok bool, err error) {
	if r, _, err = readRequest(ctx, tx, id); err != nil || r.Verify == "" {
		return r, false, false, err
	}
	if r.State != troupe.ReqPending || r.Checking {
		return r, true, false, nil
	}
	r.Checking, r.Answer, r.Tried = true, answer, r.Tried+1
	_, err = tx.ExecContext(ctx, `UPDATE requests SET checking = 1, answer = ?, tried = ? WHERE id = ?`, answer, r.Tried, string(id))
	return r, true, err == nil, err
}

// Judge implements inbox.Store.
func (db *InboxStore) Judge(ctx context.Context, id troupe.RequestID, tried int, v troupe.Verdict, errText string, retry *troupe.Message) (inbox.Judged, error) {
	if retry != nil {
		if err := inbox.CheckKey(*retry); err != nil {
			return inbox.Judged{}, err
		}
	}
	var j inbox.Judged
	err := db.write(ctx, func(tx *sql.Tx) error {
		j = inbox.Judged{}
		r, _, err := readRequest(ctx, tx, id)
		if err != nil || r.State != troupe.ReqPending || !r.Checking || r.Tried != tried {
			return err
		}
		r.Verdict = &v
		if retry != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE requests SET checking = 0, verdict = ? WHERE id = ?`, verdictJSON(r.Verdict), string(id)); err != nil {
				return err
			}
			m, err := insertMessage(ctx, tx, inbox.Admit(*retry, time.Now().UTC()))
			if err != nil {
				return err
			}
			j.Retry = &m
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE requests SET verdict = ? WHERE id = ?`, verdictJSON(r.Verdict), string(id)); err != nil {
			return err
		}
		state := troupe.ReqFailed
		if v.Passed() {
			state, errText = troupe.ReqAnswered, ""
		}
		r, queued, _, err := finishRequest(ctx, tx, id, state, r.Answer, errText)
		if err != nil {
			return err
		}
		j.Finished = &inbox.Finished{Request: r, Queued: queued}
		return nil
	})
	if err != nil {
		return inbox.Judged{}, fmt.Errorf("judge request %s: %w", id, err)
	}
	return j, nil
}

// Detach implements inbox.Store. An unknown id fails with
// troupe.ErrNotFound.
func (db *InboxStore) Detach(ctx context.Context, id troupe.RequestID) (troupe.Request, error) {
	var r troupe.Request
	err := db.write(ctx, func(tx *sql.Tx) error {
		var err error
		if r, _, err = readRequest(ctx, tx, id); err != nil || r.State != troupe.ReqPending || r.Detached {
			return err
		}
		r.Detached = true
		_, err = tx.ExecContext(ctx, `UPDATE requests SET detached = 1 WHERE id = ?`, string(id))
		return err
	})
	if err != nil {
		return troupe.Request{}, fmt.Errorf("detach request %s: %w", id, err)
	}
	return r, nil
}

// Request implements inbox.Store.
func (db *InboxStore) Request(ctx context.Context, p troupe.ProjectID, id troupe.RequestID) (troupe.Request, error) {
	r, _, err := scanRequest(db.r.QueryRowContext(ctx,
		`SELECT `+requestCols+` FROM requests WHERE id = ? AND project = ?`, string(id), string(p)))
	if errors.Is(err, sql.ErrNoRows) {
		err = troupe.ErrNotFound
	}
	if err != nil {
		return troupe.Request{}, fmt.Errorf("find request %s: %w", id, err)
	}
	return r, nil
}

// PendingRequests implements inbox.Store, oldest first.
func (db *InboxStore) PendingRequests(ctx context.Context) ([]troupe.Request, error) {
	rs, err := db.pendingRequests(ctx)
	if err != nil {
		return nil, fmt.Errorf("list pending requests: %w", err)
	}
	return rs, nil
}

func (db *conn) pendingRequests(ctx context.Context) ([]troupe.Request, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+requestCols+` FROM requests
		WHERE state = 'pending' ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var rs []troupe.Request
	for rows.Next() {
		r, _, err := scanRequest(rows)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, rows.Err()
}

// ExpireProject implements inbox.Store. It records no outcome messages
// for the requests it fails: nobody is left to read them.
func (db *InboxStore) ExpireProject(ctx context.Context, p troupe.ProjectID, reason string) error {
	now, _ := toNanos(time.Now())
	err := db.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE messages INDEXED BY messages_open
			SET state = 'expired', reason = ?, done_at = ?
			WHERE state IN ('queued', 'in_turn') AND project = ?`, reason, now, string(p)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE requests SET state = 'failed', error = ?, done_at = ?
			WHERE state = 'pending' AND project = ?`, reason, now, string(p))
		return err
	})
	if err != nil {
		return fmt.Errorf("expire project %s: %w", p, err)
	}
	return nil
}

// Prune applies r at now (see inbox.Retention) in one transaction: every
// message of a project not in live created before now, and of the live
// ones what r lets go; the requests of the messages it deletes go with
// them, and a task's link to its completion message is cleared. The
// message of a pending request is kept. It returns how many messages it
// deleted. The freed pages are reused by later writes; the file does not
// shrink.
func (db *DB) Prune(ctx context.Context, live []troupe.ProjectID, r inbox.Retention, now time.Time) (int64, error) {
	ids := make([]string, len(live))
	for i, p := range live {
		ids[i] = string(p)
	}
	list, _ := json.Marshal(ids)
	at, _ := toNanos(now)
	old, _ := toNanos(now.Add(-r.Age))
	var n int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		for _, st := range []struct {
			sql  string
			args []any
		}{
			{`CREATE TEMP TABLE IF NOT EXISTS doomed (id INTEGER PRIMARY KEY)`, nil},
			{`DELETE FROM temp.doomed`, nil},
			{`INSERT INTO temp.doomed SELECT id FROM messages
				WHERE project NOT IN (SELECT value FROM json_each(?)) AND created_at < ?`, []any{string(list), at}},
			{`INSERT OR IGNORE INTO temp.doomed SELECT id FROM (
				SELECT id, state, created_at, row_number() OVER w AS n, sum(octet_length(text)) OVER w AS total
				FROM messages WHERE project IN (SELECT value FROM json_each(?))
				WINDOW w AS (PARTITION BY project ORDER BY id DESC))
				WHERE state NOT IN ('queued', 'in_turn') AND (n > ? OR total > ? OR created_at < ?)`,
				[]any{string(list), r.Messages, r.Bytes, old}},
			{`DELETE FROM temp.doomed WHERE id IN (SELECT message_id FROM requests WHERE state = 'pending')`, nil},
			{`DELETE FROM requests WHERE message_id IN (SELECT id FROM temp.doomed)`, nil},
			{`UPDATE tasks SET message_id = NULL WHERE message_id IN (SELECT id FROM temp.doomed)`, nil},
		} {
			if _, err := tx.ExecContext(ctx, st.sql, st.args...); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE id IN (SELECT id FROM temp.doomed)`)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune messages: %w", err)
	}
	return n, nil
}
