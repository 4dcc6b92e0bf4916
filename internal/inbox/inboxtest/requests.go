package inboxtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

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
		want.State, want.Reason = troupe.MsgExpired, tc.errText
		checkMsg(t, fmt.Sprintf("queued ask after a %s outcome", tc.state), got, want, ignoreDoneAt)
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
