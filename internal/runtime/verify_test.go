package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// fakeVerifier is a Verifier whose verdicts are scripted: the n-th run
// gets states[n] (the last one again past the end). run, when set, runs
// inside each Verify first (to block, or to take time in the bubble).
type fakeVerifier struct {
	states []troupe.CheckState
	run    func(ctx context.Context)

	mu    sync.Mutex // guards calls
	calls []verifyCall
}

type verifyCall struct {
	key  troupe.RuntimeKey
	name troupe.CheckName
	turn troupe.TurnID
}

func (f *fakeVerifier) Checks(troupe.ProjectID) []troupe.Check {
	return []troupe.Check{{Name: "build", Command: "make"}, {Name: "test", Command: "go test ./..."}}
}

func (f *fakeVerifier) Verify(ctx context.Context, k troupe.RuntimeKey, name troupe.CheckName, turn troupe.TurnID) (troupe.Verdict, error) {
	if f.run != nil {
		f.run(ctx)
	}
	if err := ctx.Err(); err != nil {
		return troupe.Verdict{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.states[min(len(f.calls), len(f.states)-1)]
	f.calls = append(f.calls, verifyCall{k, name, turn})
	code := 0
	if st != troupe.CheckPassed {
		code = 1
	}
	return troupe.Verdict{State: st, ExitCode: code, DurationMS: 1500, Turn: turn, Output: "--- FAIL: TestAdd (run " + string(rune('0'+len(f.calls))) + ")\n"}, nil
}

func (f *fakeVerifier) Calls() []verifyCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]verifyCall(nil), f.calls...)
}

// workerTurns counts the turns of the researcher.
func workerTurns(h *harness) int {
	n := 0
	for _, in := range h.eng.Inputs() {
		if in.Messages[0].To == "researcher" {
			n++
		}
	}
	return n
}

// results are the result messages of request id in lead's inbox.
func results(t *testing.T, s inbox.Store, id troupe.RequestID) []troupe.Message {
	t.Helper()
	ms, err := s.Conversation(t.Context(), p1, inbox.Page{})
	if err != nil {
		t.Fatal(err)
	}
	var out []troupe.Message
	for _, m := range ms {
		if m.Kind == troupe.KindResult && m.Request == id {
			out = append(out, m)
		}
	}
	return out
}

// TestVerifiedDelegationRetriesUntilTheCheckPasses: the worker's first
// answer fails the check; the failure goes back to it, with the check's
// output, as a message of the same request; its second answer passes,
// and the delegator gets one result: troupe's verdict, then the answer.
func TestVerifiedDelegationRetriesUntilTheCheckPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fv := &fakeVerifier{states: []troupe.CheckState{troupe.CheckFailed, troupe.CheckPassed}}
		h := newHarnessOn(t, twoAgents(10*time.Minute), Options{Verifier: fv})
		r := key(p1, "researcher")
		req, err := h.rt.Delegate(t.Context(), r, "lead", "answer all tests pass", "test", 0)
		if err != nil || req.Verify != "test" || req.Tries != troupe.DefaultVerifyTries {
			t.Fatalf("Delegate = %+v, %v; want a verified delegation with the default tries", req, err)
		}
		synctest.Wait()

		var worker []troupe.Message
		for _, in := range h.eng.Inputs() { // the worker's turns
			if in.Messages[0].To == "researcher" {
				worker = append(worker, in.Messages[0])
			}
		}
		if len(worker) != 2 {
			t.Fatalf("the worker had %d turns, want 2 (the task, then the check's failure)", len(worker))
		}
		retry := worker[1]
		if retry.From != troupe.CheckSender || retry.Kind != troupe.KindDelegate || retry.Request != req.ID ||
			!strings.Contains(retry.Text, "[check test: failed, exit 1, 1.5 s, try 1 of 2, by troupe]") ||
			!strings.Contains(retry.Text, "--- FAIL: TestAdd (run 1)") || !strings.Contains(retry.Text, "1 of 2 tries left") {
			t.Errorf("the worker's second turn got %+v; want troupe's failing verdict with the check's output, on the same request", retry)
		}
		calls := fv.Calls()
		if len(calls) != 2 || calls[0].key != r || calls[0].name != "test" || calls[0].turn == "" || calls[1].turn == calls[0].turn {
			t.Errorf("checks run = %+v; want two on the worker, each on its own turn", calls)
		}

		got, err := h.store.Request(t.Context(), p1, req.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != troupe.ReqAnswered || got.Tried != 2 || got.Checking || got.Verdict == nil || !got.Verdict.Passed() ||
			got.Verdict.Try != 2 || got.Verdict.Turn != calls[1].turn || !strings.HasPrefix(got.Answer, "echo: [check test: failed") {
			t.Errorf("request = %+v; want answered by the second turn, its passing verdict kept", got)
		}
		rs := results(t, h.store, req.ID)
		if len(rs) != 1 || rs[0].To != "lead" || !strings.HasPrefix(rs[0].Text, "[check test: passed, exit 0, 1.5 s, try 2 of 2, by troupe]\n\n"+got.Answer) {
			t.Fatalf("results for lead = %+v; want exactly one, troupe's verdict before the answer", rs)
		}
	})
}

// TestVerifiedDelegationThatNeverPassesIsReportedFailed: a worker that
// claims success while the check fails every time: after its tries the
// delegator gets one result saying failed, the check's output and the
// claim, and the request is failed, never answered.
func TestVerifiedDelegationThatNeverPassesIsReportedFailed(t *testing.T) {
	for _, tries := range []int{1, 3} {
		synctest.Test(t, func(t *testing.T) {
			fv := &fakeVerifier{states: []troupe.CheckState{troupe.CheckFailed}}
			h := newHarnessOn(t, twoAgents(10*time.Minute), Options{Verifier: fv})
			req, err := h.rt.Delegate(t.Context(), key(p1, "researcher"), "lead", "answer all tests pass", "test", tries)
			if err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if n := len(fv.Calls()); n != tries {
				t.Errorf("tries %d: the check ran %d times, want %d", tries, n, tries)
			}
			got, _ := h.store.Request(t.Context(), p1, req.ID)
			if got.State != troupe.ReqFailed || got.Answer == "" || got.Verdict == nil || got.Verdict.State != troupe.CheckFailed ||
				!strings.Contains(got.Error, "did not pass check test") {
				t.Errorf("tries %d: request = %+v; want failed, the last answer and the failing verdict kept", tries, got)
			}
			rs := results(t, h.store, req.ID)
			if len(rs) != 1 {
				t.Fatalf("tries %d: %d results, want exactly one", tries, len(rs))
			}
			text := rs[0].Text
			for _, want := range []string{"failed (request " + string(req.ID) + ")", "[check test: failed, exit 1", "--- FAIL: TestAdd", got.Answer} {
				if !strings.Contains(text, want) {
					t.Errorf("tries %d: result %q lacks %q", tries, text, want)
				}
			}
			if tries == 1 && got.Answer != "all tests pass" {
				t.Errorf("tries 1: answer %q, want the worker's claim (no retry)", got.Answer)
			}
		})
	}
}

// TestVerifiedDelegationWhoseTurnFailsIsNotChecked: a worker turn that
// errors fails the request as any delegation's; no check runs.
func TestVerifiedDelegationWhoseTurnFailsIsNotChecked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fv := &fakeVerifier{states: []troupe.CheckState{troupe.CheckPassed}}
		h := newHarnessOn(t, twoAgents(10*time.Minute), Options{Verifier: fv})
		req, err := h.rt.Delegate(t.Context(), key(p1, "researcher"), "lead", "fail the compiler crashed", "test", 0)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got, _ := h.store.Request(t.Context(), p1, req.ID)
		if got.State != troupe.ReqFailed || !strings.Contains(got.Error, "the compiler crashed") || got.Verdict != nil || got.Tried != 0 {
			t.Errorf("request = %+v; want failed with the turn's error, unchecked", got)
		}
		if n := len(fv.Calls()); n != 0 {
			t.Errorf("the check ran %d times on a failed turn, want 0", n)
		}
		if rs := results(t, h.store, req.ID); len(rs) != 1 {
			t.Errorf("results = %+v, want one", rs)
		}
	})
}

// TestVerifiedDelegationReplyWaitsForTheCheck: an answer given with the
// reply tool is not delivered at once: it is the answer troupe checks.
func TestVerifiedDelegationReplyWaitsForTheCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fv := &fakeVerifier{states: []troupe.CheckState{troupe.CheckPassed}}
		h := newHarnessOn(t, twoAgents(10*time.Minute), Options{Verifier: fv})
		req, err := h.rt.Delegate(t.Context(), key(p1, "researcher"), "lead", `tool reply {"text":"done, tests pass"}`, "test", 1)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got, _ := h.store.Request(t.Context(), p1, req.ID)
		if got.State != troupe.ReqAnswered || got.Answer != "done, tests pass" || got.Verdict == nil || len(fv.Calls()) != 1 {
			t.Fatalf("request = %+v after %d checks; want answered with the reply, checked once", got, len(fv.Calls()))
		}
		var last string
		if ms, _ := h.store.Conversation(t.Context(), p1, inbox.Page{}); len(ms) > 0 {
			last = ms[len(ms)-1].Text
		}
		if !strings.Contains(last, "[check test: passed") {
			t.Errorf("result = %q, want troupe's verdict", last)
		}
	})
}

// TestVerifiedDelegationRefusesBadArguments: an unknown check names the
// field and lists the project's checks; tries out of range, tries
// without verify and a daemon without checks are refused; nothing is
// recorded.
func TestVerifiedDelegationRefusesBadArguments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarnessOn(t, twoAgents(10*time.Minute), Options{Verifier: &fakeVerifier{states: []troupe.CheckState{troupe.CheckPassed}}})
		r := key(p1, "researcher")
		for _, tc := range []struct {
			v    verifySpec
			want []string
		}{
			{verifySpec{"tests", 0}, []string{"verify", `no check named "tests"`, "build, test"}},
			{verifySpec{"test", 6}, []string{"tries", "6", "1 to 5"}},
			{verifySpec{"test", -1}, []string{"tries", "1 to 5"}},
			{verifySpec{"", 2}, []string{"tries", "without verify"}},
		} {
			_, err := h.rt.Delegate(t.Context(), r, "lead", "do it", tc.v.Check, tc.v.Tries)
			if !errors.Is(err, troupe.ErrInvalid) {
				t.Errorf("Delegate(%+v) = %v, want troupe.ErrInvalid", tc.v, err)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Delegate(%+v) = %q, want it to say %q", tc.v, err, w)
				}
			}
		}
		if ms, _ := h.store.Conversation(t.Context(), p1, inbox.Page{}); len(ms) != 0 {
			t.Errorf("refused delegations recorded %d messages", len(ms))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		remote := spec("researcher", time.Minute)
		remote.Runner = "gpu-box"
		h := newHarnessOn(t, staticTeams{p1: {spec("lead", time.Minute), remote}}, Options{Verifier: &fakeVerifier{states: []troupe.CheckState{troupe.CheckPassed}}})
		_, err := h.rt.Delegate(t.Context(), key(p1, "researcher"), "lead", "do it", "test", 0)
		if !errors.Is(err, troupe.ErrInvalid) || !strings.Contains(err.Error(), "runs on a runner") {
			t.Errorf("verified delegation to an agent on a runner = %v, want refused saying so", err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		_, err := h.rt.Delegate(t.Context(), key(p1, "researcher"), "lead", "do it", "test", 0)
		if !errors.Is(err, troupe.ErrInvalid) || !strings.Contains(err.Error(), "runs no checks") {
			t.Errorf("Delegate with verify and no Verifier = %v, want refused saying so", err)
		}
	})
}

// TestVerifiedDelegationHoldsTheWorkerWhileItsCheckRuns: while the
// check runs the worker starts no turn (its workspace stays as checked),
// and a check longer than the worker's turn_timeout is no silence of the
// worker: the request is not cut no_reply.
func TestVerifiedDelegationHoldsTheWorkerWhileItsCheckRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		fv := &fakeVerifier{states: []troupe.CheckState{troupe.CheckPassed}, run: func(ctx context.Context) {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}}
		h := newHarnessOn(t, twoAgents(time.Minute), Options{Verifier: fv})
		r := key(p1, "researcher")
		req, err := h.rt.Delegate(t.Context(), r, "lead", "answer done", "test", 0)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the turn ended; the check blocks
		if _, err := h.rt.Send(t.Context(), r, "lead", troupe.KindMessage, "answer meanwhile"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Minute) // five of the worker's windows
		synctest.Wait()
		if turns := workerTurns(h); turns != 1 {
			t.Fatalf("the worker had %d turns while its check ran, want 1 (held)", turns)
		}
		if got, _ := h.store.Request(t.Context(), p1, req.ID); got.State != troupe.ReqPending || !got.Checking {
			t.Fatalf("request during a long check = %+v; want pending, checking", got)
		}
		close(release)
		synctest.Wait()
		if got, _ := h.store.Request(t.Context(), p1, req.ID); got.State != troupe.ReqAnswered {
			t.Errorf("request after the check = %+v, want answered", got)
		}
		if n := workerTurns(h); n != 2 {
			t.Errorf("the worker had %d turns after its check, want 2 (the message held back runs)", n)
		}
	})
}

// TestVerifiedDelegationCheckedAgainAfterARestart: a daemon that stops
// while the check runs judges nothing (the request stays checking); the
// next one, on the same store, runs the check again and the delegator
// gets exactly one result.
func TestVerifiedDelegationCheckedAgainAfterARestart(t *testing.T) {
	store := inbox.NewMemStore()
	var id troupe.RequestID
	synctest.Test(t, func(t *testing.T) {
		fv := &fakeVerifier{states: []troupe.CheckState{troupe.CheckPassed}, run: func(ctx context.Context) { <-ctx.Done() }}
		h := newHarnessOn(t, twoAgents(10*time.Minute), Options{Store: store, Verifier: fv})
		req, err := h.rt.Delegate(t.Context(), key(p1, "researcher"), "lead", "answer done", "test", 0)
		if err != nil {
			t.Fatal(err)
		}
		id = req.ID
		synctest.Wait()
		h.stop() // the daemon dies while the check runs
	})
	if got, _ := store.Request(t.Context(), p1, id); got.State != troupe.ReqPending || !got.Checking || got.Tried != 1 || got.Answer != "done" {
		t.Fatalf("request after a stop mid-check = %+v; want pending, checking, the answer kept", got)
	}
	if rs := results(t, store, id); len(rs) != 0 {
		t.Fatalf("results after a stop mid-check = %+v, want none", rs)
	}
	synctest.Test(t, func(t *testing.T) {
		fv := &fakeVerifier{states: []troupe.CheckState{troupe.CheckPassed}}
		h := newHarnessOn(t, twoAgents(10*time.Minute), Options{Store: store, Verifier: fv})
		synctest.Wait()
		calls := fv.Calls()
		if len(calls) != 1 || calls[0].key != key(p1, "researcher") || calls[0].name != "test" {
			t.Fatalf("checks after the restart = %+v, want the one left, run again", calls)
		}
		got, _ := h.store.Request(t.Context(), p1, id)
		if got.State != troupe.ReqAnswered || got.Answer != "done" || got.Tried != 1 {
			t.Errorf("request after the restart = %+v, want answered with the kept answer", got)
		}
		if rs := results(t, store, id); len(rs) != 1 || !strings.HasPrefix(rs[0].Text, "[check test: passed") {
			t.Errorf("results = %+v, want exactly one, with the verdict", rs)
		}
		// The worker ran no new turn: its answer was kept.
		if n := workerTurns(h); n != 0 {
			t.Errorf("the worker had %d turns after the restart, want 0", n)
		}
	})
}
