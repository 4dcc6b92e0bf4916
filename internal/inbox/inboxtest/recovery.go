package inboxtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

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
		want.State, want.Reason = troupe.MsgExpired, "agent removed from the team"
		checkMsg(t, "after Expire", got, want, ignoreDoneAt)
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
