package runtime

import (
	"context"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// RequestResult is the outcome a turn gives one request it handled.
type RequestResult struct {
	ID     troupe.RequestID
	State  troupe.RequestState
	Answer string
	Error  string
}

// Finished is a request a store call ended, and the outcome message it
// queued in the asker's inbox (nil when none).
type Finished struct {
	Request troupe.Request
	Queued  *troupe.Message
}

// Store keeps inboxes, requests and conversations durably (contract C6).
// Every method is one transaction. Implementations must be safe for
// concurrent use; the runtime calls a key's inbox methods from that key's
// actor only, and request methods from anywhere.
type Store interface {
	// Append accepts a message into its recipient's inbox (m.Key()). The
	// store assigns ID, sets State to queued and CreatedAt if zero.
	Append(ctx context.Context, m troupe.Message) (troupe.Message, error)
	// Ask records a pending request and its ask (or delegate) message in one
	// transaction, and returns the stored message.
	Ask(ctx context.Context, r troupe.Request, m troupe.Message) (troupe.Message, error)
	// Pending returns the queued messages of k in ID order.
	Pending(ctx context.Context, k troupe.RuntimeKey) ([]troupe.Message, error)
	// StartTurn moves the given queued messages of k to in_turn for turn.
	StartTurn(ctx context.Context, k troupe.RuntimeKey, ids []int64, turn troupe.TurnID) error
	// EndTurn moves every in_turn message of turn to state (delivered or
	// failed) with reason and, in the same transaction, ends each request of
	// results as FinishRequest would. It returns the requests it ended (those
	// still pending), each with its queued outcome message if any.
	EndTurn(ctx context.Context, k troupe.RuntimeKey, turn troupe.TurnID, state troupe.MessageState, reason string, results []RequestResult) ([]Finished, error)
	// Expire moves every queued or in_turn message of k to expired.
	Expire(ctx context.Context, k troupe.RuntimeKey, reason string) (int, error)
	// Recover is called once at start: messages left in_turn by a daemon
	// that died go back to queued, marked redelivered. It returns every key
	// that has queued messages.
	Recover(ctx context.Context) ([]troupe.RuntimeKey, error)
	// Conversation lists a project's messages in ID order, after the given
	// ID, at most limit (0: no limit); with agent set, only those from or to
	// that agent.
	Conversation(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, after int64, limit int) ([]troupe.Message, error)

	// FinishRequest ends a pending request with state, answer and error
	// text, and records its outcome (Request.Outcome) in the conversation in
	// the same transaction. When the request is detached (the asker stopped
	// waiting, and always for delegations) and the asker is an agent, that
	// message is queued in the asker's inbox and returned as queued, so the
	// caller wakes the asker; otherwise it is recorded as delivered (the
	// asker got the answer from its call). A request that is no
	// longer pending is returned unchanged with done == false. A failed or
	// no_reply outcome also expires the request's message if it is still
	// queued (its recipient never started on it), with errText as reason.
	FinishRequest(ctx context.Context, id troupe.RequestID, state troupe.RequestState, answer, errText string) (r troupe.Request, queued *troupe.Message, done bool, err error)
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
