package troupe

import (
	"fmt"
	"time"
)

// Person is the participant id of the human user in conversations. It can
// never be an agent's name: names start with a letter or digit.
const Person AgentID = "@person"

// TurnID identifies one turn of one agent's session.
type TurnID string

// RequestID identifies an ask in flight or answered.
type RequestID string

// MessageKind says what a message is for.
type MessageKind string

// Message kinds.
const (
	KindMessage  MessageKind = "message"  // send_message: fire and forget
	KindAsk      MessageKind = "ask"      // a question whose answer is captured (C4)
	KindReply    MessageKind = "reply"    // the answer to an ask, for an asker that stopped waiting
	KindDelegate MessageKind = "delegate" // work whose result comes back to the delegator
	KindResult   MessageKind = "result"   // the result of a delegation
	KindTask     MessageKind = "task"     // a background task's completion
)

// MessageState is where a message is in its life (contract C5). Every
// message ends delivered, failed or expired.
type MessageState string

// Message states.
const (
	MsgQueued    MessageState = "queued"    // in the inbox, not yet given to a turn
	MsgInTurn    MessageState = "in_turn"   // given to a turn that has not ended
	MsgDelivered MessageState = "delivered" // the turn that got it ended
	MsgFailed    MessageState = "failed"    // could not be handled; Reason says why
	MsgExpired   MessageState = "expired"   // its recipient went away; Reason says why
)

// Final reports whether s is an end state.
func (s MessageState) Final() bool { return s == MsgDelivered || s == MsgFailed || s == MsgExpired }

// Message is one entry of an inbox and of its project's conversation.
// ID is assigned by the store, increasing in the order messages are
// accepted; an inbox is delivered in ID order.
type Message struct {
	ID          int64        `json:"id"`
	Project     ProjectID    `json:"project"`
	To          AgentID      `json:"to"`
	From        AgentID      `json:"from"`
	Kind        MessageKind  `json:"kind"`
	Text        string       `json:"text"`
	Request     RequestID    `json:"request,omitempty"` // for asks, replies, delegations and results
	State       MessageState `json:"state"`
	Reason      string       `json:"reason,omitempty"`
	Turn        TurnID       `json:"turn,omitempty"`
	Redelivered bool         `json:"redelivered,omitempty"` // was in a turn when the daemon died (C6)
	CreatedAt   time.Time    `json:"created_at"`
	DoneAt      time.Time    `json:"done_at,omitzero"`
	// Clipped says Text is only part of the message's text, whose whole
	// length in bytes is Size: a conversation page clips long messages,
	// and a message is read whole a part at a time (inbox.Store.Text).
	Clipped bool `json:"clipped,omitempty"`
	Size    int  `json:"size,omitempty"`
}

// Key is the RuntimeKey of the message's recipient.
func (m Message) Key() RuntimeKey { return RuntimeKey{Project: m.Project, Agent: m.To} }

// RequestState is where an ask is.
type RequestState string

// Request states.
const (
	ReqPending  RequestState = "pending"
	ReqAnswered RequestState = "answered"
	ReqNoReply  RequestState = "no_reply" // a full inactivity window of silence, or the ceiling
	ReqFailed   RequestState = "failed"   // the target's turn failed or its process died
)

// Request is an ask (or a delegation) and its outcome.
type Request struct {
	ID        RequestID    `json:"id"`
	Project   ProjectID    `json:"project"`
	From      AgentID      `json:"from"`
	To        AgentID      `json:"to"`
	Kind      MessageKind  `json:"kind"` // KindAsk or KindDelegate
	Question  string       `json:"question"`
	State     RequestState `json:"state"`
	Answer    string       `json:"answer,omitempty"`
	Error     string       `json:"error,omitempty"`
	Detached  bool         `json:"detached,omitempty"` // the asker stopped waiting: the answer goes to its inbox
	CreatedAt time.Time    `json:"created_at"`
	DoneAt    time.Time    `json:"done_at,omitzero"`
	// LimitedUntil is set on a pending request returned to its asker at
	// once, detached, because its target is limited (its engine's usage
	// limit) until then: the question stays in its inbox and runs after.
	// Not stored: it says why this wait ended.
	LimitedUntil time.Time `json:"limited_until,omitzero"`
	// Unreachable, with LimitedUntil, says the target's runner cannot be
	// reached (the agent's state reason): the question waits in its inbox
	// for the runner to come back. Not stored.
	Unreachable string `json:"unreachable,omitempty"`

	// A verified delegation (Verify set): when a turn of the worker on it
	// ends, troupe runs check Verify on the worker's workspace. Tries is
	// how many of its turns the check may judge (DefaultVerifyTries,
	// 1..MaxVerifyTries), Tried how many it judged or is judging. A
	// failure with tries left goes back to the worker; the request ends
	// answered only when the check passed, else failed with the worker's
	// last answer kept in Answer.
	Verify CheckName `json:"verify,omitempty"`
	Tries  int       `json:"tries,omitempty"`
	Tried  int       `json:"tried,omitempty"`
	// Checking says the worker's turn ended and troupe checks its answer
	// (in Answer) now. It is stored before the check runs: a daemon that
	// dies meanwhile runs the check again when it restarts.
	Checking bool `json:"checking,omitempty"`
	// Verdict is troupe's last check of the worker's work; nil before the
	// first.
	Verdict *Verdict `json:"verdict,omitempty"`
}

// Outcome is the message that carries a finished request's outcome to an
// asker that stopped waiting (kind reply), or to a delegator (kind result).
// A verified delegation's outcome starts with troupe's verdict (Verdict.Header)
// and, when the check failed, its output's tail.
func (r Request) Outcome() Message {
	kind := KindReply
	if r.Kind == KindDelegate {
		kind = KindResult
	}
	text := r.Answer
	if r.State != ReqAnswered {
		text = fmt.Sprintf("%s (request %s): %s", r.State, r.ID, r.Error)
	}
	if v := r.Verdict; v != nil && r.Verify != "" {
		// Troupe's verdict comes first: never the worker's claim alone.
		switch {
		case r.State == ReqAnswered:
			text = v.Header(r.Tries) + "\n\n" + r.Answer
		case !v.Passed():
			text += "\n\n" + v.Header(r.Tries) + "\n" + v.Details()
			if r.Answer != "" {
				text += fmt.Sprintf("\n%s's last answer, which did not pass the check:\n%s", r.To, r.Answer)
			}
		}
	}
	return Message{Project: r.Project, To: r.From, From: r.To, Kind: kind, Text: text, Request: r.ID}
}
