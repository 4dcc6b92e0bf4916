package inboxtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

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
		c, err := s.Conversation(ctx, p1, inbox.Page{Agent: agent})
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

// testAppendToPerson: the person has no inbox; what is sent to it is
// recorded as delivered at once (inbox.Admit), with or without a key, and
// never queued: no Pending, no Recover names it.
func testAppendToPerson(t *testing.T, s inbox.Store) {
	person := key(p1, troupe.Person)
	from := now()
	got := mustAppend(t, s, msg(person, "dev", "to the person"))[0]
	once, added := mustAppendOnce(t, s, "task:a1", troupe.Message{Project: p1, To: troupe.Person, From: "@task", Kind: troupe.KindTask, Text: "task a1 exited 0"})
	if !added {
		t.Error("AppendOnce to the person: added = false, want true")
	}
	for _, m := range []troupe.Message{got, once} {
		checkRecent(t, "DoneAt of a message to the person", m.DoneAt, from)
		if m.State != troupe.MsgDelivered || m.ID <= 0 {
			t.Errorf("message %q to the person: state %q id %d, want delivered with an id", m.Text, m.State, m.ID)
		}
	}
	checkMsgs(t, "Conversation(p-one)", mustConversation(t, s, p1), []troupe.Message{got, once})
	checkMsgs(t, "Pending(person)", mustPending(t, s, person), nil)
	keys, err := s.Recover(t.Context())
	if err != nil || len(keys) != 0 {
		t.Errorf("Recover = %v, %v; want no key (the person's mail is delivered)", keys, err)
	}
}

// testPendingLimit: Pending with a limit returns the oldest queued messages
// of the key, in ID order, at most limit; the rest stay queued for the
// next call, in order; 0 (or less) is no limit.
func testPendingLimit(t *testing.T, s inbox.Store) {
	ctx := t.Context()
	a, b := key(p1, "dev"), key(p1, "lead")
	var ms []troupe.Message
	for i := range 7 {
		ms = append(ms, msg(a, "lead", fmt.Sprint("a", i)))
		if i%2 == 0 {
			ms = append(ms, msg(b, "dev", fmt.Sprint("b", i)))
		}
	}
	got := mustAppend(t, s, ms...)
	var mine []troupe.Message
	for _, m := range got {
		if m.Key() == a {
			mine = append(mine, m)
		}
	}
	pending := func(limit int) []troupe.Message {
		t.Helper()
		p, err := s.Pending(ctx, a, limit)
		if err != nil {
			t.Fatalf("Pending(dev, %d): %v", limit, err)
		}
		return p
	}
	checkMsgs(t, "Pending(dev, 3)", pending(3), mine[:3])
	checkMsgs(t, "Pending(dev, 1)", pending(1), mine[:1])
	checkMsgs(t, "Pending(dev, 100)", pending(100), mine)
	checkMsgs(t, "Pending(dev, 0): no limit", pending(0), mine)
	checkMsgs(t, "Pending(dev, -1): no limit", pending(-1), mine)
	// A turn takes the first three: the next read starts after them.
	mustStart(t, s, a, "t1", mine[:3]...)
	checkMsgs(t, "Pending(dev, 3) after a turn took three", pending(3), mine[3:6])
	// A queued message older than the window (a redelivery) comes first.
	if _, err := s.EndTurn(ctx, a, "t1", troupe.MsgDelivered, "", nil); err != nil {
		t.Fatal(err)
	}
	mustStart(t, s, a, "t2", mine[4])
	checkMsgs(t, "Pending(dev, 2) with a gap", pending(2), []troupe.Message{mine[3], mine[5]})
}
