package inboxtest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

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
		want.State, want.Turn = troupe.MsgDelivered, "t1"
		checkMsg(t, "after FinishTurn(t1, delivered)", got, want, ignoreDoneAt)
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
	want.State, want.Turn, want.Reason = troupe.MsgFailed, "t2", "engine crashed: exit 2"
	checkMsg(t, "after FinishTurn(t2, failed)", got3, want, ignoreDoneAt)

	// Finishing an ended turn again changes nothing.
	before := mustConversation(t, s, p1)
	mustFinishTurn(t, s, a, "t1", troupe.MsgFailed, "late")
	checkMsgs(t, "Conversation after finishing t1 again", mustConversation(t, s, p1), before)
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

// testEndTurnRequeues: a turn ended with state queued (its engine's usage
// limit) puts its messages back in the inbox, before later mail, marked
// redelivered, with the reason; their requests stay pending; the next
// turn takes them.
func testEndTurnRequeues(t *testing.T, s inbox.Store) {
	dev := key(p1, "dev")
	r1, m1 := ask("r1", dev, "lead", "q")
	m1 = mustAsk(t, s, r1, m1)
	got := mustAppend(t, s, msg(dev, "lead", "m2"))
	m2 := got[0]
	mustStart(t, s, dev, "t1", m1, m2)
	later := mustAppend(t, s, msg(dev, "lead", "later"))[0]
	fin, err := s.EndTurn(t.Context(), dev, "t1", troupe.MsgQueued, "limited until 15:04", nil)
	if err != nil || len(fin) != 0 {
		t.Fatalf("EndTurn(queued) = %+v, %v; want nothing ended", fin, err)
	}
	for _, m := range []troupe.Message{m1, m2} {
		want := m
		want.State, want.Reason, want.Redelivered = troupe.MsgQueued, "limited until 15:04", true
		checkMsg(t, "after EndTurn(queued)", stored(t, s, p1, m.ID), want)
	}
	p := mustPending(t, s, dev)
	if len(p) != 3 || p[0].ID != m1.ID || p[1].ID != m2.ID || p[2].ID != later.ID {
		t.Errorf("Pending after EndTurn(queued) = %+v, want the turn's two messages, then the later one", p)
	}
	if r, err := s.Request(t.Context(), p1, "r1"); err != nil || r.State != troupe.ReqPending {
		t.Errorf("request r1 = %+v, %v; want pending", r, err)
	}
	mustStart(t, s, dev, "t2", m1, m2)
	if m := stored(t, s, p1, m1.ID); m.State != troupe.MsgInTurn || m.Turn != "t2" {
		t.Errorf("m1 after the next StartTurn: %s in %q, want in_turn in t2", m.State, m.Turn)
	}
}
