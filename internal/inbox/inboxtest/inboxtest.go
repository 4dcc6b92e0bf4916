// Package runtimetest holds the contract suite of inbox.Store (contracts
// C1, C5 and C6 as the store sees them): inbox order and states, turns,
// expiry, recovery after a crash, conversations, and the life of asks and
// delegations. Every Store implementation runs it, so the SQLite store is
// held to the behaviour of inbox.MemStore, the reference.
//
// Store tests import it (internal/store/sqlite, and this package's own test
// for MemStore); production code never does. It imports only the standard
// library, internal/troupe and internal/runtime. RunStore starts goroutines
// only inside its concurrency subtests and waits for them; those subtests
// are meaningful under -race.
package inboxtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
		{"PendingOrderPerKey", testPendingOrderPerKey},
		{"ProjectIsolation", testProjectIsolation},
		{"StartTurn", testStartTurn},
		{"StartTurnNoIDs", testStartTurnNoIDs},
		{"FinishTurn", testFinishTurn},
		{"EndTurnEndsItsRequests", testEndTurnEndsItsRequests},
		{"EndTurnIsAtomic", testEndTurnIsAtomic},
		{"Expire", testExpire},
		{"Recover", testRecover},
		{"RecoverEmpty", testRecoverEmpty},
		{"Conversation", testConversation},
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
	ms, err := s.Pending(t.Context(), k)
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
	ms, err := s.Conversation(t.Context(), p, "", 0, 0)
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

// diffMsg describes how got differs from want, field by field, times as
// instants; "" when they are the same.
func diffMsg(got, want troupe.Message) string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	if got.ID != want.ID {
		add("ID", got.ID, want.ID)
	}
	if got.Project != want.Project {
		add("Project", got.Project, want.Project)
	}
	if got.To != want.To {
		add("To", got.To, want.To)
	}
	if got.From != want.From {
		add("From", got.From, want.From)
	}
	if got.Kind != want.Kind {
		add("Kind", got.Kind, want.Kind)
	}
	if got.Text != want.Text {
		add("Text", fmt.Sprintf("%q", got.Text), fmt.Sprintf("%q", want.Text))
	}
	if got.Request != want.Request {
		add("Request", got.Request, want.Request)
	}
	if got.State != want.State {
		add("State", got.State, want.State)
	}
	if got.Reason != want.Reason {
		add("Reason", fmt.Sprintf("%q", got.Reason), fmt.Sprintf("%q", want.Reason))
	}
	if got.Turn != want.Turn {
		add("Turn", got.Turn, want.Turn)
	}
	if got.Redelivered != want.Redelivered {
		add("Redelivered", got.Redelivered, want.Redelivered)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		add("CreatedAt", got.CreatedAt, want.CreatedAt)
	}
	if !got.DoneAt.Equal(want.DoneAt) {
		add("DoneAt", got.DoneAt, want.DoneAt)
	}
	return strings.Join(d, "; ")
}

func checkMsg(t *testing.T, what string, got, want troupe.Message) {
	t.Helper()
	if d := diffMsg(got, want); d != "" {
		t.Errorf("%s (message %d): %s", what, want.ID, d)
	}
}

func checkMsgs(t *testing.T, what string, got, want []troupe.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %d messages %v %q, want %d %v %q", what,
			len(got), msgIDs(got), texts(got), len(want), msgIDs(want), texts(want))
		return
	}
	for i := range got {
		checkMsg(t, fmt.Sprintf("%s[%d]", what, i), got[i], want[i])
	}
}

// diffReq is diffMsg for requests.
func diffReq(got, want troupe.Request) string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	if got.ID != want.ID {
		add("ID", got.ID, want.ID)
	}
	if got.Project != want.Project {
		add("Project", got.Project, want.Project)
	}
	if got.From != want.From {
		add("From", got.From, want.From)
	}
	if got.To != want.To {
		add("To", got.To, want.To)
	}
	if got.Kind != want.Kind {
		add("Kind", got.Kind, want.Kind)
	}
	if got.Question != want.Question {
		add("Question", fmt.Sprintf("%q", got.Question), fmt.Sprintf("%q", want.Question))
	}
	if got.State != want.State {
		add("State", got.State, want.State)
	}
	if got.Answer != want.Answer {
		add("Answer", fmt.Sprintf("%q", got.Answer), fmt.Sprintf("%q", want.Answer))
	}
	if got.Error != want.Error {
		add("Error", fmt.Sprintf("%q", got.Error), fmt.Sprintf("%q", want.Error))
	}
	if got.Detached != want.Detached {
		add("Detached", got.Detached, want.Detached)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		add("CreatedAt", got.CreatedAt, want.CreatedAt)
	}
	if !got.DoneAt.Equal(want.DoneAt) {
		add("DoneAt", got.DoneAt, want.DoneAt)
	}
	return strings.Join(d, "; ")
}

func checkReq(t *testing.T, what string, got, want troupe.Request) {
	t.Helper()
	if d := diffReq(got, want); d != "" {
		t.Errorf("%s (request %s): %s", what, want.ID, d)
	}
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

// --- inbox ---

func testAppendAssigns(t *testing.T, s inbox.Store) {
	a, b := key(p1, "dev"), key(p1, "lead")
	given := msg(a, "lead", "given time")
	given.CreatedAt = base
	// ID and State are the store's to set, whatever the caller put there.
	forged := msg(b, "dev", "forged id and state")
	forged.ID, forged.State = 1_000_000, troupe.MsgDelivered

	from := now()
	got := mustAppend(t, s, msg(a, "lead", "first"), given, forged, msg(a, troupe.Person, "last"))
	for i, m := range got {
		if m.State != troupe.MsgQueued {
			t.Errorf("Append[%d].State = %q, want %q", i, m.State, troupe.MsgQueued)
		}
		if m.ID <= 0 {
			t.Errorf("Append[%d].ID = %d, want a positive id", i, m.ID)
		}
		if i > 0 && m.ID <= got[i-1].ID {
			t.Errorf("Append[%d].ID = %d after %d, want increasing ids in the order messages are accepted", i, m.ID, got[i-1].ID)
		}
	}
	checkRecent(t, "CreatedAt of a message appended with none", got[0].CreatedAt, from)
	if !got[1].CreatedAt.Equal(base) {
		t.Errorf("CreatedAt of a message appended with one = %v, want it kept: %v", got[1].CreatedAt, base)
	}
	if got[2].ID == forged.ID {
		t.Errorf("Append kept the caller's ID %d, want one assigned by the store", forged.ID)
	}

	// What Append returned is what the store holds.
	checkMsgs(t, "Pending(p-one/dev)", mustPending(t, s, a), []troupe.Message{got[0], got[1], got[3]})
	checkMsgs(t, "Pending(p-one/lead)", mustPending(t, s, b), []troupe.Message{got[2]})
	checkMsgs(t, "Conversation(p-one)", mustConversation(t, s, p1), got)
}

func testAppendKeepsFields(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	in := []troupe.Message{
		{Project: p1, To: "dev", From: "lead", Kind: troupe.KindMessage, Text: "multi\nline\ttext, “quotes”, émoji 🎭, 'single' and \"double\"", CreatedAt: base},
		{Project: p1, To: "dev", From: troupe.Person, Kind: troupe.KindTask, Text: "", CreatedAt: base.Add(time.Nanosecond)},
		{Project: p1, To: "dev", From: "qa", Kind: troupe.KindReply, Text: strings.Repeat("long ", 20_000), Request: "r-7", CreatedAt: base.Add(-time.Hour)},
		{Project: p1, To: "dev", From: "qa", Kind: troupe.KindResult, Text: "nul \x00 inside", Request: "r-8",
			CreatedAt: time.Date(1678, 1, 1, 0, 0, 0, 1, time.UTC)},
		{Project: p1, To: "dev", From: "qa", Kind: troupe.KindMessage, Text: "other zone",
			CreatedAt: time.Date(2261, 12, 31, 23, 59, 59, 999999999, time.FixedZone("X", 5*3600))},
	}
	got := mustAppend(t, s, in...)
	for i := range in {
		want := in[i]
		want.ID, want.State = got[i].ID, troupe.MsgQueued
		checkMsg(t, fmt.Sprintf("Append[%d] result", i), got[i], want)
	}
	checkMsgs(t, "Pending after Append", mustPending(t, s, k), got)
}

func testAppendInvalidKey(t *testing.T, s inbox.Store) {
	for _, m := range []troupe.Message{
		{To: "dev", From: "lead", Kind: troupe.KindMessage, Text: "no project"},
		{Project: p1, From: "lead", Kind: troupe.KindMessage, Text: "no recipient"},
		{Kind: troupe.KindMessage, Text: "nothing"},
	} {
		if got, err := s.Append(t.Context(), m); !errors.Is(err, troupe.ErrInvalid) {
			t.Errorf("Append(%q) = %+v, %v; want troupe.ErrInvalid", m.Text, got, err)
		}
	}
	if ms := mustConversation(t, s, p1); len(ms) != 0 {
		t.Errorf("after refused appends, Conversation(p-one) = %q, want none", texts(ms))
	}
	if ms := mustConversation(t, s, ""); len(ms) != 0 {
		t.Errorf("after refused appends, Conversation(\"\") = %q, want none", texts(ms))
	}
	keys, err := s.Recover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("after refused appends, Recover = %v, want no key with queued mail", keys)
	}
}

func testPendingOrderPerKey(t *testing.T, s inbox.Store) {
	a, b := key(p1, "dev"), key(p1, "lead")
	got := mustAppend(t, s,
		msg(a, "lead", "a1"), msg(b, "dev", "b1"), msg(a, "qa", "a2"),
		msg(a, troupe.Person, "a3"), msg(b, "qa", "b2"))
	checkMsgs(t, "Pending(dev)", mustPending(t, s, a), []troupe.Message{got[0], got[2], got[3]})
	checkMsgs(t, "Pending(lead)", mustPending(t, s, b), []troupe.Message{got[1], got[4]})
	if ms := mustPending(t, s, key(p1, "nobody")); len(ms) != 0 {
		t.Errorf("Pending of a key with no mail = %q, want none", texts(ms))
	}
	// Only queued messages are pending.
	mustStart(t, s, a, "t1", got[2])
	checkMsgs(t, "Pending(dev) after a turn took a2", mustPending(t, s, a), []troupe.Message{got[0], got[3]})
}

// testProjectIsolation is contract C1 at the store: two projects with the
// same agent names, and every operation on one leaves the other alone.
func testProjectIsolation(t *testing.T, s inbox.Store) {
	ctx := t.Context()
	d1, d2 := key(p1, "dev"), key(p2, "dev")
	l1, l2 := key(p1, "lead"), key(p2, "lead")
	one := mustAppend(t, s, msg(d1, "lead", "one to dev"), msg(l1, "dev", "one to lead"))
	two := mustAppend(t, s, msg(d2, "lead", "two to dev"), msg(l2, "dev", "two to lead"))

	checkMsgs(t, "Pending(p-one/dev)", mustPending(t, s, d1), one[:1])
	checkMsgs(t, "Pending(p-two/dev)", mustPending(t, s, d2), two[:1])
	checkMsgs(t, "Conversation(p-one)", mustConversation(t, s, p1), one)
	checkMsgs(t, "Conversation(p-two)", mustConversation(t, s, p2), two)
	for _, agent := range []troupe.AgentID{"dev", "lead"} {
		c, err := s.Conversation(ctx, p1, agent, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkMsgs(t, "Conversation(p-one, "+string(agent)+")", c, one)
	}

	// A turn of p-one/dev given p-two/dev's message id takes nothing.
	mustStart(t, s, d1, "t", two[0])
	checkMsg(t, "p-two's message after p-one's StartTurn with its id", stored(t, s, p2, two[0].ID), two[0])

	// Same turn id in both projects: finishing one leaves the other.
	mustStart(t, s, d1, "t", one[0])
	mustStart(t, s, d2, "t", two[0])
	mustFinishTurn(t, s, d1, "t", troupe.MsgDelivered, "")
	if m := stored(t, s, p2, two[0].ID); m.State != troupe.MsgInTurn {
		t.Errorf("p-two/dev's message after FinishTurn of p-one/dev's turn with the same id: state %q, want in_turn", m.State)
	}
	if m := stored(t, s, p1, one[0].ID); m.State != troupe.MsgDelivered {
		t.Errorf("p-one/dev's message after its FinishTurn: state %q, want delivered", m.State)
	}

	// Expire on one key leaves the same agent name of the other project.
	if n, err := s.Expire(ctx, l1, "gone"); err != nil || n != 1 {
		t.Errorf("Expire(p-one/lead) = %d, %v; want 1", n, err)
	}
	checkMsgs(t, "Pending(p-two/lead) after Expire(p-one/lead)", mustPending(t, s, l2), two[1:])

	// Requests with the same agents in both projects.
	r1, m1 := ask("r-one", d1, "lead", "q one")
	r2, m2 := ask("r-two", d2, "lead", "q two")
	mustAsk(t, s, r1, m1)
	mustAsk(t, s, r2, m2)
	if _, err := s.Request(ctx, p2, "r-one"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Request(p-two, p-one's request) err = %v, want troupe.ErrNotFound", err)
	}
	f := mustFinishRequest(t, s, "r-one", troupe.ReqAnswered, "a one", "")
	if !f.done {
		t.Fatal("FinishRequest(r-one) done = false, want true")
	}
	if r := mustRequest(t, s, p2, "r-two"); r.State != troupe.ReqPending {
		t.Errorf("p-two's request after p-one's was answered: state %q, want pending", r.State)
	}
	for _, m := range mustConversation(t, s, p2) {
		if m.Project != p2 || strings.Contains(m.Text, "one") {
			t.Errorf("Conversation(p-two) holds %+v, which belongs to p-one", m)
		}
	}
	for _, m := range mustConversation(t, s, p1) {
		if m.Project != p1 || strings.Contains(m.Text, "two") {
			t.Errorf("Conversation(p-one) holds %+v, which belongs to p-two", m)
		}
	}
}

func testStartTurn(t *testing.T, s inbox.Store) {
	a, b := key(p1, "dev"), key(p1, "lead")
	got := mustAppend(t, s, msg(a, "lead", "m1"), msg(a, "lead", "m2"), msg(a, "lead", "m3"), msg(b, "dev", "other key"))
	m1, m2, m3, other := got[0], got[1], got[2], got[3]

	// Ids of another key's message and of no message are ignored.
	if err := s.StartTurn(t.Context(), a, []int64{m2.ID, other.ID, m1.ID, 1 << 40}, "t1"); err != nil {
		t.Fatal(err)
	}
	m1.State, m1.Turn = troupe.MsgInTurn, "t1"
	m2.State, m2.Turn = troupe.MsgInTurn, "t1"
	checkMsg(t, "m1 after StartTurn", stored(t, s, p1, m1.ID), m1)
	checkMsg(t, "m2 after StartTurn", stored(t, s, p1, m2.ID), m2)
	checkMsg(t, "m3, not in the turn", stored(t, s, p1, m3.ID), m3)
	checkMsg(t, "another key's message named in the turn", stored(t, s, p1, other.ID), other)
	checkMsgs(t, "Pending(dev) after StartTurn", mustPending(t, s, a), []troupe.Message{m3})

	// Only queued messages move: m1 stays in t1, m3 joins t2.
	mustStart(t, s, a, "t2", m1, m3)
	m3.State, m3.Turn = troupe.MsgInTurn, "t2"
	checkMsg(t, "m1 named again by a second turn", stored(t, s, p1, m1.ID), m1)
	checkMsg(t, "m3 after the second StartTurn", stored(t, s, p1, m3.ID), m3)

	// A final message is not taken back into a turn.
	mustFinishTurn(t, s, a, "t1", troupe.MsgDelivered, "")
	mustStart(t, s, a, "t3", m1)
	if m := stored(t, s, p1, m1.ID); m.State != troupe.MsgDelivered || m.Turn != "t1" {
		t.Errorf("delivered m1 after StartTurn(t3): state %q turn %q, want delivered in t1", m.State, m.Turn)
	}
}

func testStartTurnNoIDs(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	got := mustAppend(t, s, msg(k, "lead", "m1"))
	for _, ids := range [][]int64{nil, {}} {
		if err := s.StartTurn(t.Context(), k, ids, "t"); err != nil {
			t.Errorf("StartTurn(%v): %v", ids, err)
		}
	}
	checkMsgs(t, "Pending after StartTurn with no ids", mustPending(t, s, k), got)
}

func testFinishTurn(t *testing.T, s inbox.Store) {
	a, b := key(p1, "dev"), key(p1, "lead")
	got := mustAppend(t, s, msg(a, "lead", "m1"), msg(a, "lead", "m2"), msg(a, "lead", "m3"),
		msg(a, "lead", "queued"), msg(b, "dev", "other key, same turn id"))
	m1, m2, m3, queued, other := got[0], got[1], got[2], got[3], got[4]
	mustStart(t, s, a, "t1", m1, m2)
	mustStart(t, s, a, "t2", m3)
	mustStart(t, s, b, "t1", other)

	from := now()
	mustFinishTurn(t, s, a, "t1", troupe.MsgDelivered, "")
	for _, m := range []troupe.Message{m1, m2} {
		got := stored(t, s, p1, m.ID)
		checkRecent(t, fmt.Sprintf("DoneAt of delivered %s", m.Text), got.DoneAt, from)
		want := m
		want.State, want.Turn, want.DoneAt = troupe.MsgDelivered, "t1", got.DoneAt
		checkMsg(t, "after FinishTurn(t1, delivered)", got, want)
	}
	if m := stored(t, s, p1, m3.ID); m.State != troupe.MsgInTurn || !m.DoneAt.IsZero() {
		t.Errorf("m3 of turn t2 after FinishTurn(t1): state %q done %v, want in_turn, not done", m.State, m.DoneAt)
	}
	checkMsg(t, "a queued message after FinishTurn", stored(t, s, p1, queued.ID), queued)
	if m := stored(t, s, p1, other.ID); m.State != troupe.MsgInTurn {
		t.Errorf("another key's message in a turn with the same id: state %q, want in_turn", m.State)
	}

	from = now()
	mustFinishTurn(t, s, a, "t2", troupe.MsgFailed, "engine crashed: exit 2")
	got3 := stored(t, s, p1, m3.ID)
	checkRecent(t, "DoneAt of failed m3", got3.DoneAt, from)
	want := m3
	want.State, want.Turn, want.Reason, want.DoneAt = troupe.MsgFailed, "t2", "engine crashed: exit 2", got3.DoneAt
	checkMsg(t, "after FinishTurn(t2, failed)", got3, want)

	// Finishing an ended turn again changes nothing.
	before := mustConversation(t, s, p1)
	mustFinishTurn(t, s, a, "t1", troupe.MsgFailed, "late")
	checkMsgs(t, "Conversation after finishing t1 again", mustConversation(t, s, p1), before)
}

func testExpire(t *testing.T, s inbox.Store) {
	a, b := key(p1, "dev"), key(p1, "lead")
	got := mustAppend(t, s, msg(a, "lead", "done"), msg(a, "lead", "in turn"), msg(a, "lead", "queued"),
		msg(b, "dev", "other key"))
	done, inTurn, queued, other := got[0], got[1], got[2], got[3]
	mustStart(t, s, a, "t0", done)
	mustFinishTurn(t, s, a, "t0", troupe.MsgDelivered, "")
	done = stored(t, s, p1, done.ID)
	mustStart(t, s, a, "t1", inTurn)
	inTurn.State, inTurn.Turn = troupe.MsgInTurn, "t1"

	from := now()
	n, err := s.Expire(t.Context(), a, "agent removed from the team")
	if err != nil || n != 2 {
		t.Errorf("Expire = %d, %v; want 2 (the queued and the in_turn message)", n, err)
	}
	for _, m := range []troupe.Message{inTurn, queued} {
		got := stored(t, s, p1, m.ID)
		checkRecent(t, "DoneAt of expired "+m.Text, got.DoneAt, from)
		want := m
		want.State, want.Reason, want.DoneAt = troupe.MsgExpired, "agent removed from the team", got.DoneAt
		checkMsg(t, "after Expire", got, want)
	}
	checkMsg(t, "a delivered message after Expire", stored(t, s, p1, done.ID), done)
	checkMsg(t, "another key's message after Expire", stored(t, s, p1, other.ID), other)
	if ms := mustPending(t, s, a); len(ms) != 0 {
		t.Errorf("Pending after Expire = %q, want none", texts(ms))
	}
	if n, err := s.Expire(t.Context(), a, "again"); err != nil || n != 0 {
		t.Errorf("second Expire = %d, %v; want 0", n, err)
	}
	if m := stored(t, s, p1, queued.ID); m.Reason != "agent removed from the team" {
		t.Errorf("reason after a second Expire = %q, want the first one kept", m.Reason)
	}
}

// testRecover plays a daemon that died with turns in flight (C6).
func testRecover(t *testing.T, s inbox.Store) {
	ctx := t.Context()
	a, b, c, d := key(p1, "dev"), key(p1, "lead"), key(p1, "qa"), key(p2, "dev")
	got := mustAppend(t, s,
		msg(a, "lead", "a in turn"), msg(a, "lead", "a queued"),
		msg(b, "dev", "b in turn"),
		msg(c, "dev", "c delivered"),
		msg(d, "lead", "d queued"),
		msg(c, "dev", "c expired"))
	aTurn, aQueued, bTurn, cDone, dQueued, cExpired := got[0], got[1], got[2], got[3], got[4], got[5]
	mustStart(t, s, a, "ta", aTurn)
	mustStart(t, s, b, "tb", bTurn)
	mustStart(t, s, c, "tc", cDone)
	mustFinishTurn(t, s, c, "tc", troupe.MsgDelivered, "")
	if _, err := s.Expire(ctx, c, "gone"); err != nil {
		t.Fatal(err)
	}
	cDone, cExpired = stored(t, s, p1, cDone.ID), stored(t, s, p1, cExpired.ID)

	wantKeys := []troupe.RuntimeKey{a, b, d}
	for round := 1; round <= 2; round++ { // idempotent
		keys, err := s.Recover(ctx)
		if err != nil {
			t.Fatalf("Recover round %d: %v", round, err)
		}
		if !sameKeys(keys, wantKeys) {
			t.Errorf("Recover round %d = %v, want the keys with queued mail %v (any order, each once)", round, keys, wantKeys)
		}
		pa := mustPending(t, s, a)
		if len(pa) != 2 || pa[0].ID != aTurn.ID || pa[1].ID != aQueued.ID {
			t.Fatalf("round %d: Pending(dev) = %v, want [%d %d] in ID order", round, msgIDs(pa), aTurn.ID, aQueued.ID)
		}
		if !pa[0].Redelivered || pa[0].State != troupe.MsgQueued {
			t.Errorf("round %d: a message left in a turn: state %q redelivered %v, want queued and redelivered",
				round, pa[0].State, pa[0].Redelivered)
		}
		checkMsg(t, fmt.Sprintf("round %d: a message that was queued", round), pa[1], aQueued)
		pb := mustPending(t, s, b)
		if len(pb) != 1 || pb[0].ID != bTurn.ID || !pb[0].Redelivered {
			t.Errorf("round %d: Pending(lead) = %+v, want message %d redelivered", round, pb, bTurn.ID)
		}
		checkMsgs(t, fmt.Sprintf("round %d: Pending(p-two/dev)", round), mustPending(t, s, d), []troupe.Message{dQueued})
		checkMsg(t, fmt.Sprintf("round %d: a delivered message", round), stored(t, s, p1, cDone.ID), cDone)
		checkMsg(t, fmt.Sprintf("round %d: an expired message", round), stored(t, s, p1, cExpired.ID), cExpired)
	}

	// A recovered message goes through a turn again and keeps its mark.
	pa := mustPending(t, s, a)
	mustStart(t, s, a, "ta2", pa...)
	mustFinishTurn(t, s, a, "ta2", troupe.MsgDelivered, "")
	if m := stored(t, s, p1, aTurn.ID); m.State != troupe.MsgDelivered || !m.Redelivered || m.Turn != "ta2" {
		t.Errorf("recovered message after its new turn: state %q redelivered %v turn %q, want delivered, redelivered, ta2",
			m.State, m.Redelivered, m.Turn)
	}
}

func testRecoverEmpty(t *testing.T, s inbox.Store) {
	keys, err := s.Recover(t.Context())
	if err != nil || len(keys) != 0 {
		t.Errorf("Recover on an empty store = %v, %v; want none", keys, err)
	}
}

func sameKeys(got, want []troupe.RuntimeKey) bool {
	cmp := func(a, b troupe.RuntimeKey) int { return strings.Compare(a.String(), b.String()) }
	g, w := slices.Clone(got), slices.Clone(want)
	slices.SortFunc(g, cmp)
	slices.SortFunc(w, cmp)
	return slices.Equal(g, w)
}

func testConversation(t *testing.T, s inbox.Store) {
	ctx := t.Context()
	dev, lead, qa := key(p1, "dev"), key(p1, "lead"), key(p1, "qa")
	person := key(p1, troupe.Person)
	// The comments give each p-one message's index in one.
	all := mustAppend(t, s,
		msg(dev, "lead", "lead to dev"), // 0
		msg(key(p2, "dev"), "lead", "p-two lead to dev"),
		msg(lead, "dev", "dev to lead"),        // 1
		msg(qa, troupe.Person, "person to qa"), // 2
		msg(key(p2, "qa"), "dev", "p-two dev to qa"),
		msg(dev, "qa", "qa to dev"),       // 3
		msg(person, "qa", "qa to person"), // 4
		msg(qa, "lead", "lead to qa"),     // 5
	)
	one := []troupe.Message{all[0], all[2], all[3], all[5], all[6], all[7]}
	// Every state is part of the conversation.
	mustStart(t, s, dev, "t", all[0])
	mustFinishTurn(t, s, dev, "t", troupe.MsgDelivered, "")
	if _, err := s.Expire(ctx, lead, "gone"); err != nil {
		t.Fatal(err)
	}
	for i, m := range one {
		one[i] = stored(t, s, p1, m.ID)
	}

	for _, tc := range []struct {
		name  string
		agent troupe.AgentID
		after int64
		limit int
		want  []troupe.Message
	}{
		{"whole project", "", 0, 0, one},
		{"from or to dev", "dev", 0, 0, []troupe.Message{one[0], one[1], one[3]}},
		{"from or to the person", troupe.Person, 0, 0, []troupe.Message{one[2], one[4]}},
		{"from or to an agent with no messages", "nobody", 0, 0, nil},
		{"after the second", "", one[1].ID, 0, one[2:]},
		{"after an id of the other project", "", all[4].ID, 0, one[3:]},
		{"after the last", "", one[5].ID, 0, nil},
		{"limit", "", 0, 2, one[:2]},
		{"limit larger than the rest", "", one[3].ID, 10, one[4:]},
		{"negative limit is none", "", 0, -1, one},
		{"agent, after and limit", "qa", one[2].ID, 2, []troupe.Message{one[3], one[4]}},
	} {
		got, err := s.Conversation(ctx, p1, tc.agent, tc.after, tc.limit)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		checkMsgs(t, fmt.Sprintf("Conversation %s (agent %q after %d limit %d)", tc.name, tc.agent, tc.after, tc.limit), got, tc.want)
	}
	if got, err := s.Conversation(ctx, "p-unknown", "", 0, 0); err != nil || len(got) != 0 {
		t.Errorf("Conversation of an unknown project = %q, %v; want none", texts(got), err)
	}
}

// --- requests ---

func testAsk(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	earlier := mustAppend(t, s, msg(k, "qa", "earlier"))
	r, m := ask("r1", k, "lead", "what is 6×7?")
	from := now()
	got := mustAsk(t, s, r, m)
	checkRecent(t, "CreatedAt of Ask's message", got.CreatedAt, from)

	want := m
	want.ID, want.State = got.ID, troupe.MsgQueued
	want.CreatedAt = got.CreatedAt
	checkMsg(t, "Ask's message", got, want)
	if got.ID <= earlier[0].ID {
		t.Errorf("Ask's message id %d is not after the earlier message %d", got.ID, earlier[0].ID)
	}
	checkMsgs(t, "Pending(dev) after Ask", mustPending(t, s, k), []troupe.Message{earlier[0], got})
	checkReq(t, "Request after Ask", mustRequest(t, s, p1, "r1"), r)

	// The store sets the state to pending and CreatedAt when zero.
	r2, m2 := ask("r2", k, "lead", "again?")
	r2.State, r2.CreatedAt = "", time.Time{}
	from = now()
	mustAsk(t, s, r2, m2)
	got2 := mustRequest(t, s, p1, "r2")
	if got2.State != troupe.ReqPending {
		t.Errorf("request asked with no state: state %q, want pending", got2.State)
	}
	checkRecent(t, "CreatedAt of a request asked with none", got2.CreatedAt, from)

	if _, err := s.Request(t.Context(), p1, "r-unknown"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Request of an unknown id: err = %v, want troupe.ErrNotFound", err)
	}
}

func testAskDuplicate(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	r, m := ask("r1", k, "lead", "first question")
	first := mustAsk(t, s, r, m)

	r2, m2 := ask("r1", key(p1, "qa"), "dev", "second question")
	if got, err := s.Ask(t.Context(), r2, m2); !errors.Is(err, troupe.ErrAlreadyExists) {
		t.Errorf("Ask with a known request id = %+v, %v; want troupe.ErrAlreadyExists", got, err)
	}
	// Nothing of the refused ask was kept: not its message, not its request.
	checkMsgs(t, "Conversation after the refused Ask", mustConversation(t, s, p1), []troupe.Message{first})
	if ms := mustPending(t, s, key(p1, "qa")); len(ms) != 0 {
		t.Errorf("Pending(qa) after the refused Ask = %q, want none", texts(ms))
	}
	checkReq(t, "Request after the refused Ask", mustRequest(t, s, p1, "r1"), r)
}

func testFinishAttachedAsk(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	r, m := ask("r1", k, "lead", "q")
	am := mustAsk(t, s, r, m)
	mustStart(t, s, k, "t1", am)

	from := now()
	f := mustFinishRequest(t, s, "r1", troupe.ReqAnswered, "42", "")
	if !f.done || f.queued != nil {
		t.Fatalf("FinishRequest of an attached ask: done %v queued %+v, want done and nothing queued", f.done, f.queued)
	}
	want := r
	want.State, want.Answer, want.DoneAt = troupe.ReqAnswered, "42", f.r.DoneAt
	checkRecent(t, "request DoneAt", f.r.DoneAt, from)
	checkReq(t, "FinishRequest result", f.r, want)
	checkReq(t, "Request after FinishRequest", mustRequest(t, s, p1, "r1"), want)

	// The outcome is in the conversation, delivered: the asker got it from
	// its call.
	conv := mustConversation(t, s, p1)
	if len(conv) != 2 {
		t.Fatalf("Conversation after the answer has %d messages %q, want the ask and its outcome", len(conv), texts(conv))
	}
	out := conv[1]
	checkRecent(t, "outcome CreatedAt", out.CreatedAt, from)
	checkRecent(t, "outcome DoneAt", out.DoneAt, from)
	wantOut := f.r.Outcome()
	wantOut.ID, wantOut.State, wantOut.CreatedAt, wantOut.DoneAt = out.ID, troupe.MsgDelivered, out.CreatedAt, out.DoneAt
	checkMsg(t, "outcome of an attached ask", out, wantOut)
	if out.Kind != troupe.KindReply || out.Text != "42" || out.To != "lead" || out.From != "dev" {
		t.Errorf("outcome = %+v, want a reply from dev to lead saying 42", out)
	}
	if out.ID <= am.ID {
		t.Errorf("outcome id %d is not after the ask's %d", out.ID, am.ID)
	}
	if ms := mustPending(t, s, key(p1, "lead")); len(ms) != 0 {
		t.Errorf("Pending(lead) after an attached answer = %q, want none", texts(ms))
	}
	// The ask message is the turn's, not the request's, to end.
	if got := stored(t, s, p1, am.ID); got.State != troupe.MsgInTurn {
		t.Errorf("ask message after its answer: state %q, want still in_turn", got.State)
	}
}

func testFinishDetachedAsk(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	r, m := ask("r1", k, "lead", "q")
	mustAsk(t, s, r, m)
	d, err := s.Detach(t.Context(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Detached || d.State != troupe.ReqPending {
		t.Fatalf("Detach = %+v, want pending and detached", d)
	}

	from := now()
	f := mustFinishRequest(t, s, "r1", troupe.ReqAnswered, "42", "")
	if !f.done || f.queued == nil {
		t.Fatalf("FinishRequest of a detached ask: done %v queued %v, want done and a queued reply", f.done, f.queued)
	}
	want := r
	want.State, want.Answer, want.Detached, want.DoneAt = troupe.ReqAnswered, "42", true, f.r.DoneAt
	checkReq(t, "FinishRequest result", f.r, want)
	q := *f.queued
	checkRecent(t, "queued reply CreatedAt", q.CreatedAt, from)
	wantQ := f.r.Outcome()
	wantQ.ID, wantQ.State, wantQ.CreatedAt = q.ID, troupe.MsgQueued, q.CreatedAt
	checkMsg(t, "queued reply", q, wantQ)
	if q.Kind != troupe.KindReply || q.To != "lead" || q.Text != "42" {
		t.Errorf("queued reply = %+v, want a reply to lead saying 42", q)
	}
	checkMsgs(t, "Pending(lead): the asker's inbox", mustPending(t, s, key(p1, "lead")), []troupe.Message{q})
}

func testFinishDetachedAskFromPerson(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	r, m := ask("r1", k, troupe.Person, "q")
	mustAsk(t, s, r, m)
	if _, err := s.Detach(t.Context(), "r1"); err != nil {
		t.Fatal(err)
	}
	f := mustFinishRequest(t, s, "r1", troupe.ReqAnswered, "42", "")
	if !f.done || f.queued != nil {
		t.Fatalf("FinishRequest of a person's detached ask: done %v queued %+v, want done and nothing queued (the person has no inbox)", f.done, f.queued)
	}
	conv := mustConversation(t, s, p1)
	if len(conv) != 2 || conv[1].State != troupe.MsgDelivered || conv[1].To != troupe.Person ||
		conv[1].Text != "42" || conv[1].DoneAt.IsZero() {
		t.Errorf("Conversation = %+v, want the ask and a delivered reply to the person with DoneAt", conv)
	}
	if ms := mustPending(t, s, key(p1, troupe.Person)); len(ms) != 0 {
		t.Errorf("Pending(person) = %q, want none", texts(ms))
	}
	keys, err := s.Recover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(keys, key(p1, troupe.Person)) {
		t.Errorf("Recover = %v, names the person: its reply was left queued", keys)
	}
}

func testFinishDelegation(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	for _, tc := range []struct {
		id      troupe.RequestID
		state   troupe.RequestState
		answer  string
		errText string
		text    string
	}{
		{"r-ok", troupe.ReqAnswered, "all done", "", "all done"},
		{"r-bad", troupe.ReqFailed, "", "dev could not answer: crashed", "failed (request r-bad): dev could not answer: crashed"},
	} {
		r, m := delegation(tc.id, k, "lead", "do it")
		dm := mustAsk(t, s, r, m)
		if got := mustRequest(t, s, p1, tc.id); !got.Detached || got.Kind != troupe.KindDelegate {
			t.Errorf("delegation %s as stored: kind %q detached %v, want delegate, detached", tc.id, got.Kind, got.Detached)
		}
		mustStart(t, s, k, troupe.TurnID("t-"+tc.id), dm)
		f := mustFinishRequest(t, s, tc.id, tc.state, tc.answer, tc.errText)
		if !f.done || f.queued == nil {
			t.Fatalf("FinishRequest(%s): done %v queued %v, want done and a queued result", tc.id, f.done, f.queued)
		}
		q := *f.queued
		if q.Kind != troupe.KindResult || q.To != "lead" || q.From != "dev" || q.Text != tc.text ||
			q.Request != tc.id || q.State != troupe.MsgQueued || q.Project != p1 {
			t.Errorf("result of %s = %+v, want a queued result from dev to lead saying %q", tc.id, q, tc.text)
		}
		if f.r.State != tc.state || f.r.Answer != tc.answer || f.r.Error != tc.errText {
			t.Errorf("request %s = %+v, want state %s answer %q error %q", tc.id, f.r, tc.state, tc.answer, tc.errText)
		}
	}
	if p := mustPending(t, s, key(p1, "lead")); len(p) != 2 || p[0].Request != "r-ok" || p[1].Request != "r-bad" {
		t.Errorf("Pending(lead) = %+v, want the two results in order", p)
	}
}

func testFinishRequestTwice(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	r, m := ask("r1", k, "lead", "q")
	mustAsk(t, s, r, m)
	if _, err := s.Detach(t.Context(), "r1"); err != nil {
		t.Fatal(err)
	}
	first := mustFinishRequest(t, s, "r1", troupe.ReqAnswered, "42", "")
	before := mustConversation(t, s, p1)

	for _, state := range []troupe.RequestState{troupe.ReqAnswered, troupe.ReqFailed, troupe.ReqNoReply} {
		again := mustFinishRequest(t, s, "r1", state, "other", "late")
		if again.done || again.queued != nil {
			t.Errorf("second FinishRequest(%s): done %v queued %+v, want not done and nothing queued", state, again.done, again.queued)
		}
		checkReq(t, "second FinishRequest("+string(state)+") result", again.r, first.r)
	}
	checkReq(t, "Request after the second FinishRequest", mustRequest(t, s, p1, "r1"), first.r)
	checkMsgs(t, "Conversation after the second FinishRequest", mustConversation(t, s, p1), before)
}

func testFinishRequestUnknown(t *testing.T, s inbox.Store) {
	_, q, done, err := s.FinishRequest(t.Context(), "r-unknown", troupe.ReqAnswered, "x", "")
	if !errors.Is(err, troupe.ErrNotFound) || done || q != nil {
		t.Errorf("FinishRequest of an unknown id: done %v queued %v err %v, want troupe.ErrNotFound", done, q, err)
	}
	if ms := mustConversation(t, s, p1); len(ms) != 0 {
		t.Errorf("Conversation after it = %q, want none", texts(ms))
	}
}

func testFinishRequestExpiresQueuedAsk(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	for i, tc := range []struct {
		state   troupe.RequestState
		errText string
		expire  bool
	}{
		{troupe.ReqNoReply, "no reply from dev: no activity for 10m0s", true},
		{troupe.ReqFailed, "dev could not answer: engine gone", true},
		{troupe.ReqAnswered, "", false},
	} {
		id := troupe.RequestID(fmt.Sprintf("r%d", i))
		r, m := ask(id, k, "lead", "q")
		am := mustAsk(t, s, r, m)
		from := now()
		f := mustFinishRequest(t, s, id, tc.state, "", tc.errText)
		if !f.done {
			t.Fatalf("FinishRequest(%s) not done", tc.state)
		}
		got := stored(t, s, p1, am.ID)
		if !tc.expire {
			checkMsg(t, "queued ask after an answered outcome", got, am)
			continue
		}
		checkRecent(t, "expired ask DoneAt", got.DoneAt, from)
		want := am
		want.State, want.Reason, want.DoneAt = troupe.MsgExpired, tc.errText, got.DoneAt
		checkMsg(t, fmt.Sprintf("queued ask after a %s outcome", tc.state), got, want)
		if slices.ContainsFunc(mustPending(t, s, k), func(m troupe.Message) bool { return m.ID == am.ID }) {
			t.Errorf("ask of a %s request is still pending in its recipient's inbox", tc.state)
		}
	}
}

func testFinishRequestLeavesAskInTurn(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	for i, state := range []troupe.RequestState{troupe.ReqNoReply, troupe.ReqFailed} {
		id := troupe.RequestID(fmt.Sprintf("r%d", i))
		turn := troupe.TurnID(fmt.Sprintf("t%d", i))
		r, m := ask(id, k, "lead", "q")
		am := mustAsk(t, s, r, m)
		mustStart(t, s, k, turn, am)
		mustFinishRequest(t, s, id, state, "", "given up")
		want := am
		want.State, want.Turn = troupe.MsgInTurn, turn
		checkMsg(t, fmt.Sprintf("ask in a turn after a %s outcome", state), stored(t, s, p1, am.ID), want)
		// Its turn still ends it.
		mustFinishTurn(t, s, k, turn, troupe.MsgDelivered, "")
		if got := stored(t, s, p1, am.ID); got.State != troupe.MsgDelivered {
			t.Errorf("ask after its turn ended: state %q, want delivered", got.State)
		}
	}
}

func testDetach(t *testing.T, s inbox.Store) {
	r, m := ask("r1", key(p1, "dev"), "lead", "q")
	mustAsk(t, s, r, m)
	got, err := s.Detach(t.Context(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	want := r
	want.Detached = true
	checkReq(t, "Detach of a pending request", got, want)
	checkReq(t, "Request after Detach", mustRequest(t, s, p1, "r1"), want)
	// Detaching twice is harmless.
	got, err = s.Detach(t.Context(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	checkReq(t, "second Detach", got, want)
}

func testDetachFinished(t *testing.T, s inbox.Store) {
	r, m := ask("r1", key(p1, "dev"), "lead", "q")
	mustAsk(t, s, r, m)
	f := mustFinishRequest(t, s, "r1", troupe.ReqAnswered, "42", "")
	before := mustConversation(t, s, p1)
	got, err := s.Detach(t.Context(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	// The outcome is final: the caller returns it, as it is.
	checkReq(t, "Detach of an answered request", got, f.r)
	checkReq(t, "Request after Detach of an answered request", mustRequest(t, s, p1, "r1"), f.r)
	checkMsgs(t, "Conversation after Detach of an answered request", mustConversation(t, s, p1), before)
	if ms := mustPending(t, s, key(p1, "lead")); len(ms) != 0 {
		t.Errorf("Pending(lead) after Detach of an answered request = %q, want none", texts(ms))
	}
}

func testDetachUnknown(t *testing.T, s inbox.Store) {
	if got, err := s.Detach(t.Context(), "r-unknown"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Detach of an unknown id = %+v, %v; want troupe.ErrNotFound", got, err)
	}
}

func testRequestScopedByProject(t *testing.T, s inbox.Store) {
	r, m := ask("r1", key(p1, "dev"), "lead", "q")
	mustAsk(t, s, r, m)
	checkReq(t, "Request(p-one, r1)", mustRequest(t, s, p1, "r1"), r)
	for _, p := range []troupe.ProjectID{p2, ""} {
		if got, err := s.Request(t.Context(), p, "r1"); !errors.Is(err, troupe.ErrNotFound) {
			t.Errorf("Request(%q, p-one's r1) = %+v, %v; want troupe.ErrNotFound", p, got, err)
		}
	}
}

func testPendingRequests(t *testing.T, s inbox.Store) {
	ctx := t.Context()
	if rs, err := s.PendingRequests(ctx); err != nil || len(rs) != 0 {
		t.Errorf("PendingRequests on an empty store = %v, %v; want none", rs, err)
	}
	var want []troupe.Request
	for i, tc := range []struct {
		p    troupe.ProjectID
		kind troupe.MessageKind
	}{{p1, troupe.KindAsk}, {p2, troupe.KindAsk}, {p1, troupe.KindDelegate}, {p2, troupe.KindDelegate}} {
		id := troupe.RequestID(fmt.Sprintf("r%d", i))
		r, m := ask(id, key(tc.p, "dev"), "lead", "q")
		if tc.kind == troupe.KindDelegate {
			r, m = delegation(id, key(tc.p, "dev"), "lead", "q")
		}
		r.CreatedAt = base.Add(time.Duration(3-i) * time.Minute)
		mustAsk(t, s, r, m)
		want = append(want, r)
	}
	mustFinishRequest(t, s, "r1", troupe.ReqAnswered, "a", "")
	mustFinishRequest(t, s, "r2", troupe.ReqNoReply, "", "silence")
	if _, err := s.Detach(ctx, "r3"); err != nil {
		t.Fatal(err)
	}
	want[3].Detached = true
	checkReqSet(t, "PendingRequests", must(s.PendingRequests(ctx))(t), []troupe.Request{want[0], want[3]})
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

// checkReqSet compares requests in any order.
func checkReqSet(t *testing.T, what string, got, want []troupe.Request) {
	t.Helper()
	byID := func(a, b troupe.Request) int { return strings.Compare(string(a.ID), string(b.ID)) }
	got, want = slices.Clone(got), slices.Clone(want)
	slices.SortFunc(got, byID)
	slices.SortFunc(want, byID)
	if len(got) != len(want) {
		t.Errorf("%s: got %d requests %+v, want %d %+v", what, len(got), got, len(want), want)
		return
	}
	for i := range got {
		checkReq(t, what, got[i], want[i])
	}
}

func testExpireProject(t *testing.T, s inbox.Store) {
	ctx := t.Context()
	d1, l1, d2 := key(p1, "dev"), key(p1, "lead"), key(p2, "dev")
	ms := mustAppend(t, s, msg(d1, "lead", "queued"), msg(d1, "lead", "in turn"), msg(l1, "dev", "delivered"),
		msg(d2, "lead", "p-two queued"))
	queued, inTurn, done, other := ms[0], ms[1], ms[2], ms[3]
	mustStart(t, s, d1, "t1", inTurn)
	mustStart(t, s, l1, "t2", done)
	mustFinishTurn(t, s, l1, "t2", troupe.MsgDelivered, "")
	done = stored(t, s, p1, done.ID)

	rp, mp := ask("r-pending", l1, "dev", "q")
	askMsg := mustAsk(t, s, rp, mp)
	ra, ma := ask("r-answered", l1, "dev", "q")
	mustAsk(t, s, ra, ma)
	answered := mustFinishRequest(t, s, "r-answered", troupe.ReqAnswered, "a", "").r
	ro, mo := ask("r-other", d2, "lead", "q")
	mustAsk(t, s, ro, mo)
	otherConv := mustConversation(t, s, p2)

	from := now()
	if err := s.ExpireProject(ctx, p1, "project removed"); err != nil {
		t.Fatal(err)
	}
	for _, m := range []troupe.Message{queued, inTurn, askMsg} {
		got := stored(t, s, p1, m.ID)
		if got.State != troupe.MsgExpired || got.Reason != "project removed" {
			t.Errorf("%q after ExpireProject: state %q reason %q, want expired, \"project removed\"", m.Text, got.State, got.Reason)
		}
		checkRecent(t, "DoneAt of expired "+m.Text, got.DoneAt, from)
	}
	checkMsg(t, "a delivered message after ExpireProject", stored(t, s, p1, done.ID), done)
	for _, k := range []troupe.RuntimeKey{d1, l1} {
		if p := mustPending(t, s, k); len(p) != 0 {
			t.Errorf("Pending(%s) after ExpireProject = %q, want none", k, texts(p))
		}
	}
	rg := mustRequest(t, s, p1, "r-pending")
	checkRecent(t, "DoneAt of the failed request", rg.DoneAt, from)
	want := rp
	want.State, want.Error, want.DoneAt = troupe.ReqFailed, "project removed", rg.DoneAt
	checkReq(t, "a pending request after ExpireProject", rg, want)
	checkReq(t, "an answered request after ExpireProject", mustRequest(t, s, p1, "r-answered"), answered)

	// The other project is untouched.
	checkMsgs(t, "Conversation(p-two) after ExpireProject(p-one)", mustConversation(t, s, p2), otherConv)
	if p := mustPending(t, s, d2); len(p) != 2 || p[0].ID != other.ID {
		t.Errorf("Pending(p-two/dev) after ExpireProject(p-one) = %v, want its two messages", msgIDs(p))
	}
	checkReq(t, "p-two's request after ExpireProject(p-one)", mustRequest(t, s, p2, "r-other"), ro)
	checkReqSet(t, "PendingRequests after ExpireProject(p-one)", must(s.PendingRequests(ctx))(t), []troupe.Request{ro})
	keys := must(s.Recover(ctx))(t)
	if !sameKeys(keys, []troupe.RuntimeKey{d2}) {
		t.Errorf("Recover after ExpireProject(p-one) = %v, want only %v", keys, d2)
	}
}

// --- concurrency ---

// testConcurrentAppends appends from many goroutines to four keys in two
// projects: no message is lost, ids are unique, and each key's inbox keeps
// every goroutine's messages in the order it appended them.
func testConcurrentAppends(t *testing.T, s inbox.Store) {
	keys := []troupe.RuntimeKey{key(p1, "dev"), key(p1, "lead"), key(p2, "dev"), key(p2, "lead")}
	const goroutines, each = 16, 24
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				k := keys[(g+i)%len(keys)]
				m := msg(k, troupe.AgentID(fmt.Sprintf("g%02d", g)), fmt.Sprintf("%d", i))
				if _, err := s.Append(t.Context(), m); err != nil {
					errs <- fmt.Errorf("goroutine %d append %d: %w", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	seen := map[int64]bool{}
	total := 0
	for _, k := range keys {
		last := map[troupe.RuntimeKey]int{} // the sender's last number in k's inbox
		var prev int64
		for _, m := range mustPending(t, s, k) {
			total++
			if seen[m.ID] {
				t.Errorf("id %d given to two messages", m.ID)
			}
			seen[m.ID] = true
			if m.ID <= prev {
				t.Errorf("Pending(%s): id %d after %d, want ID order", k, m.ID, prev)
			}
			prev = m.ID
			var i int
			if _, err := fmt.Sscan(m.Text, &i); err != nil {
				t.Fatalf("message text %q: %v", m.Text, err)
			}
			from := troupe.RuntimeKey{Project: m.Project, Agent: m.From}
			if l, ok := last[from]; ok && i <= l {
				t.Errorf("Pending(%s): %s's message %d after its %d, want the order it appended them", k, m.From, i, l)
			}
			last[from] = i
		}
	}
	if total != goroutines*each {
		t.Errorf("%d messages pending in all, want %d", total, goroutines*each)
	}
	n := len(mustConversation(t, s, p1)) + len(mustConversation(t, s, p2))
	if n != goroutines*each {
		t.Errorf("the two conversations hold %d messages, want %d", n, goroutines*each)
	}
}

// testConcurrentFinishRequest races the end of one request from several
// goroutines (the turn's end, the watchdog, ExpireProject's neighbour):
// exactly one ends it and exactly one outcome is recorded.
func testConcurrentFinishRequest(t *testing.T, s inbox.Store) {
	r, m := ask("r1", key(p1, "dev"), "lead", "q")
	mustAsk(t, s, r, m)
	if _, err := s.Detach(t.Context(), "r1"); err != nil {
		t.Fatal(err)
	}
	const goroutines = 8
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		wins   []troupe.Request
		queued int
	)
	for g := range goroutines {
		wg.Go(func() {
			state := []troupe.RequestState{troupe.ReqAnswered, troupe.ReqFailed, troupe.ReqNoReply}[g%3]
			r, q, done, err := s.FinishRequest(t.Context(), "r1", state, fmt.Sprint("answer ", g), fmt.Sprint("error ", g))
			if err != nil {
				t.Errorf("goroutine %d: FinishRequest: %v", g, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if done {
				wins = append(wins, r)
			}
			if q != nil {
				queued++
			}
		})
	}
	wg.Wait()
	if len(wins) != 1 || queued != 1 {
		t.Fatalf("%d FinishRequest calls ended the request and %d queued an outcome, want exactly one of each", len(wins), queued)
	}
	checkReq(t, "Request after the race", mustRequest(t, s, p1, "r1"), wins[0])
	outcomes := 0
	for _, m := range mustConversation(t, s, p1) {
		if m.Kind == troupe.KindReply {
			outcomes++
		}
	}
	if outcomes != 1 {
		t.Errorf("the conversation holds %d outcomes of r1, want 1", outcomes)
	}
}

// testEndTurnEndsItsRequests: the turn that handled an ask (attached) and a
// delegation (detached) ends them with its messages; the delegation's
// result is queued for the delegator; ending it again ends nothing.
func testEndTurnEndsItsRequests(t *testing.T, s inbox.Store) {
	dev, lead := key(p1, "dev"), key(p1, "lead")
	r1, m1 := ask("r1", dev, "lead", "q")
	m1 = mustAsk(t, s, r1, m1)
	r2, m2 := ask("r2", dev, "lead", "do it")
	r2.Kind, r2.Detached, m2.Kind = troupe.KindDelegate, true, troupe.KindDelegate
	m2 = mustAsk(t, s, r2, m2)
	mustStart(t, s, dev, "t1", m1, m2)
	results := []inbox.RequestResult{
		{ID: "r1", State: troupe.ReqAnswered, Answer: "42"},
		{ID: "r2", State: troupe.ReqAnswered, Answer: "done"},
	}
	fin, err := s.EndTurn(t.Context(), dev, "t1", troupe.MsgDelivered, "", results)
	if err != nil {
		t.Fatal(err)
	}
	if len(fin) != 2 {
		t.Fatalf("EndTurn ended %d requests, want 2", len(fin))
	}
	for _, f := range fin {
		switch f.Request.ID {
		case "r1":
			if f.Request.State != troupe.ReqAnswered || f.Request.Answer != "42" || f.Queued != nil {
				t.Errorf("r1 = %+v queued %+v, want answered 42, nothing queued (the asker waits)", f.Request, f.Queued)
			}
		case "r2":
			if f.Queued == nil || f.Queued.Kind != troupe.KindResult || f.Queued.To != "lead" || f.Queued.Text != "done" {
				t.Errorf("r2 queued %+v, want a result for lead saying done", f.Queued)
			}
		}
	}
	for _, m := range []troupe.Message{m1, m2} {
		if got := stored(t, s, p1, m.ID); got.State != troupe.MsgDelivered {
			t.Errorf("message %d after EndTurn: %s, want delivered", m.ID, got.State)
		}
	}
	if p := mustPending(t, s, lead); len(p) != 1 || p[0].Kind != troupe.KindResult {
		t.Errorf("Pending(lead) = %+v, want the delegation's result", p)
	}
	again, err := s.EndTurn(t.Context(), dev, "t1", troupe.MsgDelivered, "", results)
	if err != nil || len(again) != 0 {
		t.Errorf("EndTurn again = %+v, %v; want nothing ended", again, err)
	}
}

// testEndTurnIsAtomic: an EndTurn naming an unknown request fails and
// changes nothing: the turn's messages stay in_turn, its request pending.
func testEndTurnIsAtomic(t *testing.T, s inbox.Store) {
	dev := key(p1, "dev")
	r1, m1 := ask("r1", dev, "lead", "q")
	m1 = mustAsk(t, s, r1, m1)
	mustStart(t, s, dev, "t1", m1)
	_, err := s.EndTurn(t.Context(), dev, "t1", troupe.MsgDelivered, "", []inbox.RequestResult{
		{ID: "r1", State: troupe.ReqAnswered, Answer: "42"},
		{ID: "nope", State: troupe.ReqAnswered, Answer: "x"},
	})
	if !errors.Is(err, troupe.ErrNotFound) {
		t.Fatalf("EndTurn with an unknown request: %v, want ErrNotFound", err)
	}
	if got := stored(t, s, p1, m1.ID); got.State != troupe.MsgInTurn {
		t.Errorf("message after a failed EndTurn: %s, want in_turn", got.State)
	}
	if r, err := s.Request(t.Context(), p1, "r1"); err != nil || r.State != troupe.ReqPending {
		t.Errorf("request after a failed EndTurn: %+v %v, want pending", r, err)
	}
}
