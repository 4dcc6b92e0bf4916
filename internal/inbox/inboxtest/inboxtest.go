// Package inboxtest holds the contract suite of inbox.Store (contracts
// C1, C5 and C6 as the store sees them), one file per topic: appends and
// pending mail (append.go), turns (turns.go), expiry and recovery after a
// crash (recovery.go), conversations (conversation.go), the life of asks
// and delegations (requests.go), concurrent use (concurrency.go) and
// idempotent appends (idempotency.go), verified delegations (verify.go). Every Store implementation runs it,
// so the SQLite store is held to the behaviour of inbox.MemStore, the
// reference.
//
// Store tests import it (internal/store/sqlite, and this package's own test
// for MemStore); production code never does. It imports the standard
// library, go-cmp, internal/troupe and internal/inbox. RunStore starts
// goroutines only inside its concurrency subtests and waits for them;
// those subtests are meaningful under -race.
package inboxtest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// RunStore runs the inbox.Store contract against the stores that open
// returns. open is called once per subtest and must return a new, empty
// store; it registers any cleanup with t.Cleanup.
//
// Time precision: a store must give times back as the same instant to the
// nanosecond (time.Time.Equal). It may drop the location and the monotonic
// clock reading. The suite uses times within the years 1678 to 2261.
//
// The suite checks what the interface's documentation promises and nothing
// the reference happens to do beyond it: result order is checked only
// where the documentation gives one, and an empty result may be nil or
// empty.
func RunStore(t *testing.T, open func(t *testing.T) inbox.Store) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s inbox.Store)
	}{
		{"AppendAssigns", testAppendAssigns},
		{"AppendKeepsFields", testAppendKeepsFields},
		{"AppendInvalidKey", testAppendInvalidKey},
		{"AppendToPerson", testAppendToPerson},
		{"PendingOrderPerKey", testPendingOrderPerKey},
		{"PendingLimit", testPendingLimit},
		{"PendingBytes", testPendingBytes},
		{"ProjectIsolation", testProjectIsolation},
		{"StartTurn", testStartTurn},
		{"StartTurnNoIDs", testStartTurnNoIDs},
		{"FinishTurn", testFinishTurn},
		{"EndTurnEndsItsRequests", testEndTurnEndsItsRequests},
		{"EndTurnRequeues", testEndTurnRequeues},
		{"EndTurnIsAtomic", testEndTurnIsAtomic},
		{"Expire", testExpire},
		{"Recover", testRecover},
		{"RecoverEmpty", testRecoverEmpty},
		{"Conversation", testConversation},
		{"ConversationPages", testConversationPages},
		{"ConversationBounds", testConversationBounds},
		{"Ask", testAsk},
		{"AskDuplicate", testAskDuplicate},
		{"FinishAttachedAsk", testFinishAttachedAsk},
		{"FinishDetachedAsk", testFinishDetachedAsk},
		{"FinishDetachedAskFromPerson", testFinishDetachedAskFromPerson},
		{"FinishDelegation", testFinishDelegation},
		{"FinishRequestTwice", testFinishRequestTwice},
		{"FinishRequestUnknown", testFinishRequestUnknown},
		{"FinishRequestExpiresQueuedAsk", testFinishRequestExpiresQueuedAsk},
		{"FinishRequestLeavesAskInTurn", testFinishRequestLeavesAskInTurn},
		{"Detach", testDetach},
		{"DetachFinished", testDetachFinished},
		{"DetachUnknown", testDetachUnknown},
		{"RequestScopedByProject", testRequestScopedByProject},
		{"PendingRequests", testPendingRequests},
		{"ExpireProject", testExpireProject},
		{"ConcurrentAppends", testConcurrentAppends},
		{"ConcurrentFinishRequest", testConcurrentFinishRequest},
		{"AppendOnce", testAppendOnce},
		{"AppendOnceScopedByProject", testAppendOnceScopedByProject},
		{"AppendOnceInvalid", testAppendOnceInvalid},
		{"ConcurrentAppendOnce", testConcurrentAppendOnce},
		{"VerifiedDelegation", testVerifiedDelegation},
		{"VerifiedDelegationFails", testVerifiedDelegationFails},
		{"JudgeUnknown", testJudgeUnknown},
		{"CheckOfAnUnverifiedRequest", testCheckOfAnUnverifiedRequest},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// base is a fixed instant with nanoseconds, far from any rounding boundary.
var base = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)

// Two projects with the same agent names: a copied project (C1).
const (
	p1 troupe.ProjectID = "p-one"
	p2 troupe.ProjectID = "p-two"
)

func key(p troupe.ProjectID, a troupe.AgentID) troupe.RuntimeKey {
	return troupe.RuntimeKey{Project: p, Agent: a}
}

func msg(k troupe.RuntimeKey, from troupe.AgentID, text string) troupe.Message {
	return troupe.Message{Project: k.Project, To: k.Agent, From: from, Kind: troupe.KindMessage, Text: text}
}

func mustAppend(t *testing.T, s inbox.Store, ms ...troupe.Message) []troupe.Message {
	t.Helper()
	out := make([]troupe.Message, len(ms))
	for i, m := range ms {
		got, err := s.Append(t.Context(), m)
		if err != nil {
			t.Fatalf("Append(%s %q): %v", m.Key(), m.Text, err)
		}
		out[i] = got
	}
	return out
}

func mustPending(t *testing.T, s inbox.Store, k troupe.RuntimeKey) []troupe.Message {
	t.Helper()
	ms, err := s.Pending(t.Context(), k, 0)
	if err != nil {
		t.Fatalf("Pending(%s): %v", k, err)
	}
	return ms
}

func mustStart(t *testing.T, s inbox.Store, k troupe.RuntimeKey, turn troupe.TurnID, ms ...troupe.Message) {
	t.Helper()
	if err := s.StartTurn(t.Context(), k, msgIDs(ms), turn); err != nil {
		t.Fatalf("StartTurn(%s, %s): %v", k, turn, err)
	}
}

func mustFinishTurn(t *testing.T, s inbox.Store, k troupe.RuntimeKey, turn troupe.TurnID, state troupe.MessageState, reason string) {
	t.Helper()
	if _, err := s.EndTurn(t.Context(), k, turn, state, reason, nil); err != nil {
		t.Fatalf("EndTurn(%s, %s): %v", k, turn, err)
	}
}

func mustConversation(t *testing.T, s inbox.Store, p troupe.ProjectID) []troupe.Message {
	t.Helper()
	ms, err := s.Conversation(t.Context(), p, inbox.Page{})
	if err != nil {
		t.Fatalf("Conversation(%s): %v", p, err)
	}
	return ms
}

// stored returns the message with id as the store holds it now.
func stored(t *testing.T, s inbox.Store, p troupe.ProjectID, id int64) troupe.Message {
	t.Helper()
	for _, m := range mustConversation(t, s, p) {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("message %d is not in project %s's conversation", id, p)
	return troupe.Message{}
}

func mustRequest(t *testing.T, s inbox.Store, p troupe.ProjectID, id troupe.RequestID) troupe.Request {
	t.Helper()
	r, err := s.Request(t.Context(), p, id)
	if err != nil {
		t.Fatalf("Request(%s, %s): %v", p, id, err)
	}
	return r
}

func msgIDs(ms []troupe.Message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func texts(ms []troupe.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Text
	}
	return out
}

// checkRecent fails unless at is within [from, time.Now()]: a time the
// store took from the clock during the call.
func checkRecent(t *testing.T, what string, at, from time.Time) {
	t.Helper()
	if at.Before(from) || at.After(time.Now()) {
		t.Errorf("%s = %v, want a time of the call (between %v and now)", what, at, from)
	}
}

// now returns the clock reading to check recent times against, without
// its monotonic reading: stores drop it, so comparisons are of wall clock
// readings on both sides.
func now() time.Time { return time.Now().Round(0) }

// ask returns a request of kind ask from from to k, with the ask message
// that goes with it.
func ask(id troupe.RequestID, k troupe.RuntimeKey, from troupe.AgentID, question string) (troupe.Request, troupe.Message) {
	r := troupe.Request{ID: id, Project: k.Project, From: from, To: k.Agent, Kind: troupe.KindAsk, Question: question,
		State: troupe.ReqPending, CreatedAt: base}
	m := troupe.Message{Project: k.Project, To: k.Agent, From: from, Kind: troupe.KindAsk, Text: question, Request: id}
	return r, m
}

// delegation is ask for a delegation: detached from its creation.
func delegation(id troupe.RequestID, k troupe.RuntimeKey, from troupe.AgentID, task string) (troupe.Request, troupe.Message) {
	r, m := ask(id, k, from, task)
	r.Kind, r.Detached, m.Kind = troupe.KindDelegate, true, troupe.KindDelegate
	return r, m
}

func mustAsk(t *testing.T, s inbox.Store, r troupe.Request, m troupe.Message) troupe.Message {
	t.Helper()
	got, err := s.Ask(t.Context(), r, m)
	if err != nil {
		t.Fatalf("Ask(%s): %v", r.ID, err)
	}
	return got
}

type finished struct {
	r      troupe.Request
	queued *troupe.Message
	done   bool
}

func mustFinishRequest(t *testing.T, s inbox.Store, id troupe.RequestID, state troupe.RequestState, answer, errText string) finished {
	t.Helper()
	r, q, done, err := s.FinishRequest(t.Context(), id, state, answer, errText)
	if err != nil {
		t.Fatalf("FinishRequest(%s, %s): %v", id, state, err)
	}
	return finished{r, q, done}
}

func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// checkMsg reports how got differs from want; times compare as instants
// (cmp uses time.Time.Equal). opts may ignore what the caller checked
// otherwise.
func checkMsg(t *testing.T, what string, got, want troupe.Message, opts ...cmp.Option) {
	t.Helper()
	if d := cmp.Diff(want, got, opts...); d != "" {
		t.Errorf("%s (message %d) mismatch (-want +got):\n%s", what, want.ID, d)
	}
}

// checkMsgs is checkMsg for lists, in order; nil and empty are the same.
func checkMsgs(t *testing.T, what string, got, want []troupe.Message) {
	t.Helper()
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("%s: got messages %v %q, want %v %q (-want +got):\n%s", what,
			msgIDs(got), texts(got), msgIDs(want), texts(want), d)
	}
}

// checkReq is checkMsg for requests.
func checkReq(t *testing.T, what string, got, want troupe.Request, opts ...cmp.Option) {
	t.Helper()
	if d := cmp.Diff(want, got, opts...); d != "" {
		t.Errorf("%s (request %s) mismatch (-want +got):\n%s", what, want.ID, d)
	}
}

// ignoreDoneAt leaves DoneAt out of a comparison, for a time the store
// took from its clock (checked with checkRecent).
var ignoreDoneAt = cmpopts.IgnoreFields(troupe.Message{}, "DoneAt")
