// Package inbox is the one door to troupe's durable inboxes: the Store
// every message and every request goes through (contracts C5 and C6), the
// rules every store applies the same way (Admit, Outcome), and MemStore,
// the reference implementation in memory. The contract suite that holds
// every Store to MemStore's behaviour is internal/inbox/inboxtest.
//
// Messages and requests are one store: a request's outcome is a message,
// and the end of a turn ends its messages and its requests in one
// transaction, so a daemon killed at the end of a turn never leaves a
// delivered ask whose request stays pending.
//
// Concurrency: a Store is safe for concurrent use; every method is one
// transaction. The runtime calls a key's inbox methods from that key's
// actor only, and request methods from anywhere; other components (the
// task manager) only append, from any goroutine.
//
// Who imports it: internal/runtime (it delivers inboxes), internal/store/sqlite
// (it implements Store), internal/daemon (wiring), and tests. It imports
// the standard library and internal/troupe only; the task manager reaches
// it through the small interface it defines itself (task.Inbox).
package inbox

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// RequestResult is the outcome a turn gives one request it handled.
//
// Check says the answer goes to troupe's check first when the request is
// a verified delegation (troupe.Request.Verify): such a request is not
// ended but stays pending, Checking, with Answer kept and Tried one more,
// for troupe to check (Store.Judge). Other requests end with State as
// without Check.
type RequestResult struct {
	ID     troupe.RequestID
	State  troupe.RequestState
	Answer string
	Error  string
	Check  bool
}

// Finished is a request a store call ended, and the outcome message it
// queued in the asker's inbox (nil when none). For a RequestResult with
// Check it is the request now being checked (Request.Checking set,
// Queued nil), not ended.
type Finished struct {
	Request troupe.Request
	Queued  *troupe.Message
}

// Judged is what Store.Judge did: the request it ended (with its queued
// outcome, as Finished), or the message it sent back to the worker.
type Judged struct {
	Finished *Finished
	Retry    *troupe.Message
}

// Store keeps inboxes, requests and conversations durably (contract C6).
// Every method is one transaction. Implementations must be safe for
// concurrent use.
//
// Every message a store accepts goes through Admit: queued in its
// recipient's inbox, except a message to troupe.Person, who has no inbox,
// which is recorded as delivered at once and never queued.
type Store interface {
	// Append accepts a message into its recipient's inbox (m.Key()). The
	// store assigns ID, sets State (Admit) and CreatedAt if zero. A key
	// that is not valid fails with troupe.ErrInvalid and stores nothing.
	Append(ctx context.Context, m troupe.Message) (troupe.Message, error)
	// AppendOnce is Append with an idempotency key, unique within m's
	// project: the first call with a key stores m and returns it with
	// added == true; every later call with the same key and project,
	// concurrent ones included, stores nothing and returns the message
	// the first one stored, as it is now (its state may have moved on),
	// with added == false. The key is the store's: it is not part of the
	// message. An empty key fails with troupe.ErrInvalid.
	AppendOnce(ctx context.Context, key string, m troupe.Message) (stored troupe.Message, added bool, err error)
	// Ask records a pending request and its ask (or delegate) message in one
	// transaction, and returns the stored message.
	Ask(ctx context.Context, r troupe.Request, m troupe.Message) (troupe.Message, error)
	// Pending returns the oldest queued messages of k in ID order, at most
	// limit of them (0 or less: all, for tests and tools; the runtime
	// always passes one, so a long queue is never read whole into
	// memory). With a limit it also stops after the message that brings
	// their texts to MaxPendingBytes (always more than a turn takes).
	// Messages past the limit stay queued, in order, for the next call.
	Pending(ctx context.Context, k troupe.RuntimeKey, limit int) ([]troupe.Message, error)
	// StartTurn moves the given queued messages of k to in_turn for turn.
	StartTurn(ctx context.Context, k troupe.RuntimeKey, ids []int64, turn troupe.TurnID) error
	// EndTurn moves every in_turn message of turn to state (delivered or
	// failed) with reason and, in the same transaction, ends each request of
	// results as FinishRequest would (a verified delegation's with Check
	// is set Checking instead, if still pending and not Checking already). It returns the requests it ended (those
	// still pending), each with its queued outcome message if any. State
	// queued puts them back in the inbox, in their order, marked
	// redelivered, with reason (a turn ended on its engine's usage limit:
	// they run again once it resets).
	EndTurn(ctx context.Context, k troupe.RuntimeKey, turn troupe.TurnID, state troupe.MessageState, reason string, results []RequestResult) ([]Finished, error)
	// Expire moves every queued or in_turn message of k to expired.
	Expire(ctx context.Context, k troupe.RuntimeKey, reason string) (int, error)
	// Recover is called once at start: messages left in_turn by a daemon
	// that died go back to queued, marked redelivered. It returns every key
	// that has queued messages.
	Recover(ctx context.Context) ([]troupe.RuntimeKey, error)
	// Conversation returns one page of project p's messages, as q selects
	// (see Page): always in ID order, oldest first, whichever end of the
	// window it was taken from. Its cost depends on the page, not on the
	// size of the history. Long texts are clipped and the page is bounded
	// in bytes (Fill): it may hold fewer messages than q.Size() although
	// the window holds more.
	Conversation(ctx context.Context, p troupe.ProjectID, q Page) ([]troupe.Message, error)
	// Text returns message id of project p with the part of its text
	// that starts at byte offset: at most MaxTextBytes, ending at a
	// character boundary (Part). Size is the whole text's length and
	// Clipped is set unless Text is all of it. An offset inside a
	// character, or past the end, fails with troupe.ErrInvalid; an
	// unknown id (or one of another project) with troupe.ErrNotFound.
	Text(ctx context.Context, p troupe.ProjectID, id int64, offset int) (troupe.Message, error)

	// FinishRequest ends a pending request with state, answer and error
	// text, and records its outcome (Outcome) in the conversation in the
	// same transaction: queued in the asker's inbox, and returned as
	// queued so the caller wakes the asker, when the request is detached
	// (the asker stopped waiting, and always for delegations); otherwise
	// delivered (the asker got the answer from its call). A request that
	// is no longer pending is returned unchanged with done == false. A
	// failed or no_reply outcome also expires the request's message if it
	// is still queued (its recipient never started on it), with errText as
	// reason.
	FinishRequest(ctx context.Context, id troupe.RequestID, state troupe.RequestState, answer, errText string) (r troupe.Request, queued *troupe.Message, done bool, err error)
	// Judge records troupe's verdict v on the answer of a verified
	// delegation being checked (pending, Checking, and Tried == tried),
	// in one transaction. With retry nil it ends the request as
	// FinishRequest would: answered with the answer it kept when v
	// passed, else failed with errText, the answer still kept; Checking
	// is cleared and Verdict set either way. With retry set (a message to
	// the worker about the failure, for request id) the request stays
	// pending, no longer Checking, with Verdict v, and retry is queued in
	// the worker's inbox. A request that is not so (ended meanwhile, or
	// judged already) is left as it is: Judged is zero. An unknown id
	// fails with troupe.ErrNotFound.
	Judge(ctx context.Context, id troupe.RequestID, tried int, v troupe.Verdict, errText string, retry *troupe.Message) (Judged, error)
	// Detach marks a pending request detached. It returns the request as
	// it is; if it is no longer pending, its outcome is final and the caller
	// returns it instead of a request id.
	Detach(ctx context.Context, id troupe.RequestID) (troupe.Request, error)
	// Request returns one request of project p (troupe.ErrNotFound when the
	// id is unknown or belongs to another project).
	Request(ctx context.Context, p troupe.ProjectID, id troupe.RequestID) (troupe.Request, error)
	// PendingRequests lists every pending request, for the watchdogs to
	// re-arm after a restart.
	PendingRequests(ctx context.Context) ([]troupe.Request, error)
	// ExpireProject ends everything of a removed project: queued and
	// in_turn messages expire, pending requests fail with reason.
	ExpireProject(ctx context.Context, p troupe.ProjectID, reason string) error
}

// MaxPendingBytes bounds the texts one Pending call with a limit reads:
// it stops after the message that brings them to this many bytes.
const MaxPendingBytes = 4 << 20

// MaxPage is the most messages one Conversation call returns.
const MaxPage = 1000

// Bounds of what one read of the conversation holds (C14): a page clips
// each text at ClipBytes (Clip) and takes messages while their texts stay
// within MaxPageBytes, the first one always (Fill); Store.Text gives a
// message's text MaxTextBytes at a time. A page of MaxPage messages is
// thus at most 4 MB of text, whatever the messages hold.
const (
	ClipBytes    = 64 << 10
	MaxPageBytes = 4 << 20
	MaxTextBytes = 1 << 20
)

// Retention is how much of a project's conversation the durable store
// keeps (sqlite's Prune applies it, at the daemon's start and every
// PruneEvery): of each registered project, the messages that ended
// (delivered, failed, expired) go once they are older than Age, or beyond
// the newest Messages, or beyond the newest Bytes of text; open mail
// (queued, in a turn) and the message of a pending request always stay.
// A removed project's messages and requests all go (its id is never
// registered again: adding the folder again mints a new one).
type Retention struct {
	Age      time.Duration
	Messages int
	Bytes    int64
}

// DefaultRetention: 30 days, 10,000 messages and 256 MB of text per
// project, checked hourly.
var DefaultRetention = Retention{Age: 30 * 24 * time.Hour, Messages: 10_000, Bytes: 256 << 20}

// PruneEvery is how often the daemon applies the Retention.
const PruneEvery = time.Hour

// Clip returns m as a page holds it: a text longer than ClipBytes cut at
// a character boundary at most ClipBytes in, Clipped set and Size the
// whole length, which is size (a store may have read the text cut
// already: size is then the stored text's length, not len(m.Text)).
func Clip(m troupe.Message, size int) troupe.Message {
	if size <= ClipBytes {
		return m
	}
	m.Text, m.Clipped, m.Size = clip.Head(m.Text, ClipBytes), true, size
	return m
}

// Part returns m with the part of its text that starts at offset bytes
// in, as Store.Text defines it; text is the stored text from offset on,
// or a prefix of it at least MaxTextBytes+utf8.UTFMax long, and size the
// whole text's length.
func Part(m troupe.Message, text string, offset, size int) (troupe.Message, error) {
	if offset < 0 || offset > size || offset == size && size > 0 || text != "" && !utf8.RuneStart(text[0]) {
		return troupe.Message{}, fmt.Errorf("read message %d: offset %d: give 0, or the next offset a part named (the text is %d bytes): %w",
			m.ID, offset, size, troupe.ErrInvalid)
	}
	m.Text = clip.Head(text, MaxTextBytes)
	m.Size, m.Clipped = size, offset > 0 || len(m.Text) < size
	return m, nil
}

// Fill keeps the count of a page's text while a store reads its messages
// from the end the page is taken from (MaxPageBytes). The zero Fill is an
// empty page.
type Fill struct {
	n, bytes int
}

// Take clips m (see Clip; size is its whole text's length) and reports
// whether the page takes it: the first message always, the next ones
// while the page's texts stay within MaxPageBytes. Once it refuses, the
// page is full: the store stops reading.
func (f *Fill) Take(m *troupe.Message, size int) bool {
	*m = Clip(*m, size)
	if f.n > 0 && f.bytes+len(m.Text) > MaxPageBytes {
		return false
	}
	f.n++
	f.bytes += len(m.Text)
	return true
}

// Page selects a window of a project's conversation for Store.Conversation:
// the messages with After < ID < Before (a bound of 0 is none), from or to
// Agent when it is set, and of those the Limit oldest or, with Newest, the
// Limit newest. The zero Page is the oldest MaxPage of the whole project.
//
// To read the history back from its end, ask with Newest and then with
// Before set to the first (oldest) ID of the page before; to follow it,
// ask without Newest, After set to the last ID seen.
type Page struct {
	Agent  troupe.AgentID // only the messages from or to this agent; "" for all
	After  int64          // only IDs above it; 0: no lower bound
	Before int64          // only IDs below it; 0: no upper bound
	Limit  int            // at most this many; 0 (or below) or more than MaxPage: MaxPage
	Newest bool           // the newest of the window, not the oldest
}

// Size is the number of messages q asks for: Limit, within 1 to MaxPage.
func (q Page) Size() int {
	if q.Limit <= 0 || q.Limit > MaxPage {
		return MaxPage
	}
	return q.Limit
}

// Holds reports whether m belongs to q's window (project aside), Limit
// aside.
func (q Page) Holds(m troupe.Message) bool {
	return m.ID > q.After && (q.Before <= 0 || m.ID < q.Before) &&
		(q.Agent == "" || m.To == q.Agent || m.From == q.Agent)
}

// Admit returns m as a store accepts it at now: queued in its recipient's
// inbox, with CreatedAt set to now when zero; or, for troupe.Person, who
// has no inbox, delivered at once (DoneAt now). This is the only place
// the rule is written; every Store calls it for every message it stores.
func Admit(m troupe.Message, now time.Time) troupe.Message {
	if m.CreatedAt.IsZero() {
		m.CreatedAt = now
	}
	m.State = troupe.MsgQueued
	if m.To == troupe.Person {
		m.State, m.DoneAt = troupe.MsgDelivered, now
	}
	return m
}

// Outcome returns the message that records finished request r's outcome
// at now, as a store keeps it: admitted into the asker's inbox when r is
// detached, else delivered, since the asker got the answer from its call.
func Outcome(r troupe.Request, now time.Time) troupe.Message {
	m := r.Outcome()
	m.CreatedAt = now
	if !r.Detached {
		m.State, m.DoneAt = troupe.MsgDelivered, now
		return m
	}
	return Admit(m, now)
}

// CheckKey refuses a message whose recipient is not a project-qualified
// key (contract C1) with troupe.ErrInvalid. Stores call it before they
// store anything.
func CheckKey(m troupe.Message) error {
	if !m.Key().Valid() {
		return fmt.Errorf("append message: recipient %q: %w", m.Key(), troupe.ErrInvalid)
	}
	return nil
}

// CheckOnce is CheckKey for AppendOnce, which also refuses an empty
// idempotency key with troupe.ErrInvalid.
func CheckOnce(key string, m troupe.Message) error {
	if err := CheckKey(m); err != nil {
		return err
	}
	if key == "" {
		return fmt.Errorf("append message to %s: empty idempotency key: %w", m.Key(), troupe.ErrInvalid)
	}
	return nil
}
