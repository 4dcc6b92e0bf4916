package inboxtest

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// verified is delegation for a verified one: check test, two tries.
func verified(id troupe.RequestID, k troupe.RuntimeKey, from troupe.AgentID, task string) (troupe.Request, troupe.Message) {
	r, m := delegation(id, k, from, task)
	r.Verify, r.Tries = "test", 2
	return r, m
}

// endChecked ends turn of k answering request id with answer for troupe
// to check, and returns what EndTurn returned.
func endChecked(t *testing.T, s inbox.Store, k troupe.RuntimeKey, turn troupe.TurnID, id troupe.RequestID, answer string) []inbox.Finished {
	t.Helper()
	fs, err := s.EndTurn(t.Context(), k, turn, troupe.MsgDelivered, "", []inbox.RequestResult{{ID: id, Answer: answer, Check: true}})
	if err != nil {
		t.Fatalf("EndTurn(%s) with a check: %v", turn, err)
	}
	return fs
}

func mustJudge(t *testing.T, s inbox.Store, id troupe.RequestID, tried int, v troupe.Verdict, errText string, retry *troupe.Message) inbox.Judged {
	t.Helper()
	j, err := s.Judge(t.Context(), id, tried, v, errText, retry)
	if err != nil {
		t.Fatalf("Judge(%s, try %d): %v", id, tried, err)
	}
	return j
}

// testVerifiedDelegation: a verified delegation's first answer is kept
// for the check, its failure goes back to the worker in the same
// transaction, the second answer passes and ends the request answered
// with the verdict in its result; every step happens once only.
func testVerifiedDelegation(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	r, m := verified("r-v", k, "lead", "make the tests pass")
	dm := mustAsk(t, s, r, m)
	if got := mustRequest(t, s, p1, "r-v"); got.Verify != "test" || got.Tries != 2 || got.Tried != 0 || got.Checking || got.Verdict != nil {
		t.Fatalf("verified delegation as stored = %+v, want verify test, 2 tries, none used", got)
	}
	mustStart(t, s, k, "t1", dm)
	fs := endChecked(t, s, k, "t1", "r-v", "all tests pass")
	if len(fs) != 1 || !fs[0].Request.Checking || fs[0].Request.Tried != 1 || fs[0].Request.State != troupe.ReqPending || fs[0].Queued != nil {
		t.Fatalf("EndTurn with a check = %+v, want the request pending, checking, try 1, nothing queued", fs)
	}
	got := mustRequest(t, s, p1, "r-v")
	if !got.Checking || got.Answer != "all tests pass" || got.Tried != 1 || got.State != troupe.ReqPending {
		t.Fatalf("request being checked = %+v, want pending, checking, its answer kept", got)
	}
	if again := endChecked(t, s, k, "t1", "r-v", "other"); len(again) != 0 {
		t.Errorf("a second EndTurn with a check of a request being checked = %+v, want nothing", again)
	}
	if rs := must(s.PendingRequests(t.Context()))(t); len(rs) != 1 || !rs[0].Checking {
		t.Errorf("PendingRequests = %+v, want the request, checking (a restart checks it again)", rs)
	}

	failed := troupe.Verdict{Check: "test", State: troupe.CheckFailed, ExitCode: 1, DurationMS: 1234, Result: 7, Turn: "t1", Try: 1,
		Output: "--- FAIL: TestAdd\n", Reason: ""}
	retry := troupe.Message{Project: p1, To: "dev", From: "lead", Kind: troupe.KindDelegate, Text: "the check failed", Request: "r-v"}
	if j := mustJudge(t, s, "r-v", 2, failed, "", &retry); j.Finished != nil || j.Retry != nil {
		t.Errorf("Judge of another try = %+v, want nothing done", j)
	}
	j := mustJudge(t, s, "r-v", 1, failed, "", &retry)
	if j.Finished != nil || j.Retry == nil {
		t.Fatalf("Judge with a retry = %+v, want the retry queued, nothing finished", j)
	}
	if q := *j.Retry; q.ID == 0 || q.State != troupe.MsgQueued || q.To != "dev" || q.Request != "r-v" || q.Text != "the check failed" || q.Kind != troupe.KindDelegate {
		t.Errorf("retry message = %+v, want it queued for dev on request r-v", q)
	}
	if j := mustJudge(t, s, "r-v", 1, failed, "", &retry); j.Finished != nil || j.Retry != nil {
		t.Errorf("a second Judge of the same try = %+v, want nothing done (exactly once)", j)
	}
	got = mustRequest(t, s, p1, "r-v")
	if got.State != troupe.ReqPending || got.Checking || got.Verdict == nil || !cmp.Equal(*got.Verdict, failed) {
		t.Fatalf("request after a failed try = %+v, want pending, not checking, with the verdict %+v", got, failed)
	}
	if p := mustPending(t, s, k); len(p) != 1 || p[0].ID != j.Retry.ID {
		t.Fatalf("Pending(dev) = %+v, want the retry alone", p)
	}
	if p := mustPending(t, s, key(p1, "lead")); len(p) != 0 {
		t.Fatalf("Pending(lead) = %+v, want nothing before the verdict", p)
	}

	mustStart(t, s, k, "t2", *j.Retry)
	if fs := endChecked(t, s, k, "t2", "r-v", "fixed"); len(fs) != 1 || fs[0].Request.Tried != 2 {
		t.Fatalf("EndTurn of the second try = %+v, want try 2", fs)
	}
	passed := troupe.Verdict{Check: "test", State: troupe.CheckPassed, ExitCode: 0, DurationMS: 800, Turn: "t2", Try: 2, Output: "ok\n"}
	j = mustJudge(t, s, "r-v", 2, passed, "ignored", nil)
	if j.Retry != nil || j.Finished == nil || j.Finished.Queued == nil {
		t.Fatalf("Judge that passed = %+v, want the request finished, its result queued", j)
	}
	f := j.Finished
	if f.Request.State != troupe.ReqAnswered || f.Request.Answer != "fixed" || f.Request.Error != "" || f.Request.Checking ||
		f.Request.Verdict == nil || !cmp.Equal(*f.Request.Verdict, passed) {
		t.Errorf("request that passed = %+v, want answered with the second answer and the passing verdict", f.Request)
	}
	q := *f.Queued
	if q.To != "lead" || q.Kind != troupe.KindResult || !strings.HasPrefix(q.Text, "[check test: passed, exit 0, 0.8 s, try 2 of 2, by troupe]") ||
		!strings.HasSuffix(q.Text, "fixed") {
		t.Errorf("result = %+v, want troupe's verdict, then the answer", q)
	}
	checkReq(t, "Request after it passed", mustRequest(t, s, p1, "r-v"), f.Request)
	if j := mustJudge(t, s, "r-v", 2, failed, "late", nil); j.Finished != nil || j.Retry != nil {
		t.Errorf("Judge of an ended request = %+v, want nothing", j)
	}
	if p := mustPending(t, s, key(p1, "lead")); len(p) != 1 {
		t.Errorf("Pending(lead) = %+v, want exactly one result", p)
	}
}

// testVerifiedDelegationFails: the last try fails: the request ends
// failed, the worker's answer kept beside the failing verdict, never a
// bare answer.
func testVerifiedDelegationFails(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	r, m := verified("r-f", k, "lead", "make the tests pass")
	r.Tries = 1
	dm := mustAsk(t, s, r, m)
	mustStart(t, s, k, "t1", dm)
	endChecked(t, s, k, "t1", "r-f", "all tests pass")
	v := troupe.Verdict{Check: "test", State: troupe.CheckTimedOut, ExitCode: -1, DurationMS: 5000, Try: 1, Reason: "it ran past its timeout", Output: "still running\n", OutputCut: true}
	j := mustJudge(t, s, "r-f", 1, v, "its work did not pass check test", nil)
	if j.Finished == nil || j.Finished.Queued == nil {
		t.Fatalf("Judge that failed the last try = %+v, want the request finished", j)
	}
	got := j.Finished.Request
	if got.State != troupe.ReqFailed || got.Answer != "all tests pass" || got.Error != "its work did not pass check test" || got.Verdict == nil || got.Verdict.State != troupe.CheckTimedOut {
		t.Errorf("request = %+v, want failed, the answer and the verdict kept", got)
	}
	text := j.Finished.Queued.Text
	for _, want := range []string{"failed (request r-f): its work did not pass check test", "[check test: timed out, no exit code, 5.0 s, try 1 of 1, by troupe]",
		"why: it ran past its timeout", "still running", "all tests pass"} {
		if !strings.Contains(text, want) {
			t.Errorf("result text %q lacks %q", text, want)
		}
	}
	if strings.Index(text, "all tests pass") < strings.Index(text, "[check test") {
		t.Errorf("result text %q: the worker's claim comes before troupe's verdict", text)
	}
}

// testJudgeUnknown: Judge of an unknown id fails with ErrNotFound and
// stores nothing; a retry to a key that is not valid is refused.
func testJudgeUnknown(t *testing.T, s inbox.Store) {
	if _, err := s.Judge(t.Context(), "r-unknown", 1, troupe.Verdict{State: troupe.CheckPassed}, "", nil); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Judge of an unknown id: %v, want troupe.ErrNotFound", err)
	}
	if _, err := s.Judge(t.Context(), "r-unknown", 1, troupe.Verdict{}, "", &troupe.Message{To: "dev"}); !errors.Is(err, troupe.ErrInvalid) {
		t.Errorf("Judge with a retry to no project: %v, want troupe.ErrInvalid", err)
	}
	if ms := mustConversation(t, s, p1); len(ms) != 0 {
		t.Errorf("Conversation after them = %q, want none", texts(ms))
	}
}

// testCheckOfAnUnverifiedRequest: Check on a request that names no check
// ends it as without Check.
func testCheckOfAnUnverifiedRequest(t *testing.T, s inbox.Store) {
	k := key(p1, "dev")
	r, m := delegation("r-plain", k, "lead", "do it")
	dm := mustAsk(t, s, r, m)
	mustStart(t, s, k, "t1", dm)
	fs, err := s.EndTurn(t.Context(), k, "t1", troupe.MsgDelivered, "", []inbox.RequestResult{{ID: "r-plain", State: troupe.ReqAnswered, Answer: "done", Check: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Request.State != troupe.ReqAnswered || fs[0].Request.Checking || fs[0].Queued == nil || fs[0].Queued.Text != "done" {
		t.Errorf("EndTurn with Check of an unverified delegation = %+v, want it answered at once", fs)
	}
}
