package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestSessionIDSurvivesARuntimeRestart: a runtime started again on the
// same stores (a daemon restart, or a crash) resumes each agent's
// conversation; an agent whose engine changed meanwhile starts a new one.
func TestSessionIDSurvivesARuntimeRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, sessions := inbox.NewMemStore(), NewMemSessions()
		teams := twoAgents(10 * time.Minute)
		h := newHarnessOn(t, teams, Options{Store: store, Sessions: sessions})
		for _, a := range []string{"lead", "researcher"} {
			if _, err := h.rt.Ask(t.Context(), key(p1, a), troupe.Person, "session conv-"+a, 0); err != nil {
				t.Fatal(err)
			}
		}
		h.stop()

		teams[p1][1].Engine = engineOther // a team edit while the daemon was down
		h = newHarnessOn(t, teams, Options{Store: store, Sessions: sessions})
		if id, err := h.rt.ResumeID(t.Context(), key(p1, "lead")); err != nil || id != "conv-lead" {
			t.Fatalf("ResumeID(lead) = %q, %v; want conv-lead", id, err)
		}
		for _, a := range []string{"lead", "researcher"} {
			if _, err := h.rt.Ask(t.Context(), key(p1, a), troupe.Person, "hello", 0); err != nil {
				t.Fatal(err)
			}
		}
		got := map[troupe.RuntimeKey]string{}
		for _, s := range h.eng.Specs() {
			got[s.Key] = s.Resume
		}
		if got[key(p1, "lead")] != "conv-lead" || got[key(p1, "researcher")] != "" {
			t.Fatalf("after restart the starts resumed %v; want lead's conversation, and a new one for researcher (engine changed)", got)
		}
	})
}

// TestResetClearsAndCloses: reset closes the live session at once (the turn
// in flight and its ask fail with the reason), forgets the conversation,
// and the next message starts a new one.
func TestResetClearsAndCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		r := key(p1, "researcher")
		if _, err := h.rt.Ask(t.Context(), r, "lead", "session conv-1", 0); err != nil {
			t.Fatal(err)
		}
		ask := askAsync(t.Context(), h, r, "silent 5m then late")
		synctest.Wait()
		if err := h.rt.Reset(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		req := ask.wait(t)
		if req.State != troupe.ReqFailed || !strings.Contains(req.Error, ResetReason) {
			t.Fatalf("the ask in flight = %+v, want failed: %s", req, ResetReason)
		}
		if st, why := h.rt.AgentState(r); st != troupe.StateStopped || why != ResetReason {
			t.Errorf("state = %s (%s), want stopped (%s)", st, why, ResetReason)
		}
		if id, _ := h.rt.ResumeID(t.Context(), r); id != "" {
			t.Errorf("after reset the conversation %q is still kept", id)
		}
		if _, err := h.rt.Ask(t.Context(), r, "lead", "hello", 0); err != nil {
			t.Fatal(err)
		}
		if rs := resumes(h.eng.Specs()); len(rs) != 2 || rs[1] != "" {
			t.Fatalf("starts resumed %v, want a new conversation after the reset", rs)
		}
		// No actor at all: reset still forgets the stored conversation.
		h.rt.o.Sessions.SetSessionID(t.Context(), key(p1, "lead"), troupe.EngineFake, "old")
		if err := h.rt.Reset(t.Context(), key(p1, "lead")); err != nil {
			t.Fatal(err)
		}
		if _, id, _ := h.rt.o.Sessions.SessionID(t.Context(), key(p1, "lead")); id != "" {
			t.Errorf("reset of an agent without a session kept %q", id)
		}
		if err := h.rt.Reset(t.Context(), key(p1, "ghost")); !errors.Is(err, troupe.ErrNotFound) {
			t.Errorf("reset of an unknown agent = %v, want not found", err)
		}
	})
}

// TestResetDeniesAWaitingPermission: a reset while a permission request
// waits ends it too; the engine's Approve returns.
func TestResetDeniesAWaitingPermission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		r := key(p1, "researcher")
		ask := askAsync(t.Context(), h, r, "perm Bash")
		synctest.Wait()
		if err := h.rt.Reset(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		if req := ask.wait(t); req.State != troupe.ReqFailed {
			t.Fatalf("ask = %+v, want failed", req)
		}
		if n := len(h.rt.Permissions("")); n != 0 {
			t.Errorf("%d permissions pending after the reset", n)
		}
		if ds := h.eng.Decisions(); len(ds) != 1 || ds[0].Allow {
			t.Errorf("Approve returned %+v, want one denial", ds)
		}
	})
}

func TestInterrupt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		r := key(p1, "researcher")
		if err := h.rt.Interrupt(t.Context(), r); !errors.Is(err, troupe.ErrConflict) || err.Error() != "researcher has no turn in flight: conflict" {
			t.Fatalf("interrupt without a turn = %v, want a conflict: researcher has no turn in flight", err)
		}
		for _, script := range []string{"silent 5m then late", "perm Bash"} {
			ask := askAsync(t.Context(), h, r, script)
			synctest.Wait()
			if err := h.rt.Interrupt(t.Context(), r); err != nil {
				t.Fatal(err)
			}
			req := ask.wait(t)
			if req.State != troupe.ReqFailed || !strings.Contains(req.Error, "interrupted") {
				t.Fatalf("%s: interrupted ask = %+v, want failed: interrupted", script, req)
			}
			synctest.Wait()
			if st, _ := h.rt.AgentState(r); st != troupe.StateIdle {
				t.Errorf("%s: state after interrupt = %s, want idle", script, st)
			}
		}
		if n := len(h.rt.Permissions("")); n != 0 {
			t.Errorf("%d permissions pending after the interrupt", n)
		}
		if h.eng.starts != 1 {
			t.Errorf("%d sessions started, want 1: an interrupt keeps the session", h.eng.starts)
		}
	})
}

// TestRestartClosesAndKeepsTheConversation: restart closes the live
// session at once (the turn in flight and its ask fail with the reason),
// keeps the conversation, and the next message starts a session resuming
// it; an agent without a session, or unknown, is handled like Reset.
func TestRestartClosesAndKeepsTheConversation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		r := key(p1, "researcher")
		if _, err := h.rt.Ask(t.Context(), r, "lead", "session conv-1", 0); err != nil {
			t.Fatal(err)
		}
		ask := askAsync(t.Context(), h, r, "silent 5m then late")
		synctest.Wait()
		if err := h.rt.Restart(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		req := ask.wait(t)
		if req.State != troupe.ReqFailed || !strings.Contains(req.Error, RestartReason) {
			t.Fatalf("the ask in flight = %+v, want failed: %s", req, RestartReason)
		}
		if st, why := h.rt.AgentState(r); st != troupe.StateStopped || why != RestartReason {
			t.Errorf("state = %s (%s), want stopped (%s)", st, why, RestartReason)
		}
		if id, _ := h.rt.ResumeID(t.Context(), r); id != "conv-1" {
			t.Errorf("after restart the conversation is %q, want conv-1 kept", id)
		}
		if _, err := h.rt.Ask(t.Context(), r, "lead", "hello", 0); err != nil {
			t.Fatal(err)
		}
		if rs := resumes(h.eng.Specs()); len(rs) != 2 || rs[1] != "conv-1" {
			t.Fatalf("starts resumed %v, want the kept conversation after the restart", rs)
		}
		if err := h.rt.Restart(t.Context(), key(p1, "lead")); err != nil {
			t.Errorf("restart of an agent without a session: %v", err)
		}
		if err := h.rt.Restart(t.Context(), key(p1, "ghost")); !errors.Is(err, troupe.ErrNotFound) {
			t.Errorf("restart of an unknown agent = %v, want not found", err)
		}
	})
}

// TestWhileIdleHoldsTurns: WhileIdle runs its function only when the
// agent has no turn in flight (else a conflict naming troupe interrupt,
// the function not run), and no turn starts while it runs: mail that
// arrives meanwhile waits for it, then runs. An agent with no actor yet
// is held the same way; one not in the team, with no actor, runs fn at once.
func TestWhileIdleHoldsTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		r := key(p1, "researcher")
		var during []int
		var ask *asking
		held := func(ctx context.Context) error {
			ask = askAsync(t.Context(), h, r, "hello")
			synctest.Wait()
			during = append(during, len(h.eng.Specs()))
			if st, _ := h.rt.AgentState(r); st == troupe.StateBusy {
				t.Errorf("state while WhileIdle runs = %s: a turn started", st)
			}
			return nil
		}
		// No actor yet: one is made and held.
		if err := h.rt.WhileIdle(t.Context(), r, held); err != nil {
			t.Fatal(err)
		}
		if req := ask.wait(t); req.State != troupe.ReqAnswered {
			t.Fatalf("the ask sent while held = %+v, want answered after", req)
		}
		if len(during) != 1 || during[0] != 0 {
			t.Fatalf("sessions started while held = %v, want none", during)
		}
		// An idle actor: held again.
		if err := h.rt.WhileIdle(t.Context(), r, held); err != nil {
			t.Fatal(err)
		}
		if req := ask.wait(t); req.State != troupe.ReqAnswered {
			t.Fatalf("the second ask = %+v, want answered", req)
		}
		if len(during) != 2 || during[1] != 1 {
			t.Fatalf("sessions while held the second time = %v, want the first one alone", during)
		}
		// A turn in flight: refused, fn not run.
		slow := askAsync(t.Context(), h, r, "silent 5m then late")
		synctest.Wait()
		ran := false
		err := h.rt.WhileIdle(t.Context(), r, func(context.Context) error { ran = true; return nil })
		if !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), "troupe interrupt researcher") || ran {
			t.Fatalf("WhileIdle in a turn = %v (ran %v), want a conflict naming troupe interrupt, not run", err, ran)
		}
		if err := h.rt.Interrupt(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		slow.wait(t)
		if err := h.rt.WhileIdle(t.Context(), key(p1, "ghost"), func(context.Context) error { ran = true; return nil }); err != nil || !ran {
			// Not in the team and no actor: nothing can start a turn, fn runs.
			t.Fatalf("WhileIdle of an agent not in the team = %v (ran %v), want run", err, ran)
		}
	})
}
