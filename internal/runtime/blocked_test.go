package runtime

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestBlockedAgent: an engine's EventBlocked (a terminal agent's unknown
// dialog) makes the agent blocked with the reason, never idle, and counts
// as activity: a block longer than the agent's turn_timeout does not cut
// the turn. Unblocked, it is busy again and its answer arrives.
func TestBlockedAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(time.Minute), 0)
		r := key(p1, "researcher")
		ask := askAsync(t.Context(), h, r, "blocked 10m then answered after the dialog")
		time.Sleep(5 * time.Minute) // five turn_timeouts
		synctest.Wait()
		if st, why := h.rt.AgentState(r); st != troupe.StateBlocked || !strings.Contains(why, "dialog") {
			t.Fatalf("state = %s (%s), want blocked with the dialog", st, why)
		}
		req := ask.wait(t)
		if req.State != troupe.ReqAnswered || req.Answer != "answered after the dialog" {
			t.Fatalf("ask = %+v, want answered after the block", req)
		}
		synctest.Wait() // the answer is stored before the actor says idle
		if st, _ := h.rt.AgentState(r); st != troupe.StateIdle {
			t.Errorf("state after the turn = %s, want idle", st)
		}
	})
}

// TestBlockEndsWithItsSession: a block is its session's: once the session
// is closed while blocked (here by a reset), the next session's silent
// turn is cut after one turn_timeout as any other, not held for ever as
// if the old dialog still waited on the person.
func TestBlockEndsWithItsSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(time.Minute), 0)
		r := key(p1, "researcher")
		blocked := askAsync(t.Context(), h, r, "blocked 1h then never")
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if st, _ := h.rt.AgentState(r); st != troupe.StateBlocked {
			t.Fatalf("state = %s, want blocked", st)
		}
		if err := h.rt.Reset(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		if req := blocked.wait(t); req.State != troupe.ReqFailed {
			t.Fatalf("the blocked ask after the reset = %+v, want failed", req)
		}
		start := time.Now()
		req := askAsync(t.Context(), h, r, "silent 1h then too late").wait(t)
		if req.State != troupe.ReqNoReply || time.Since(start) > 2*time.Minute {
			t.Fatalf("silent ask after %v = %+v, want no reply after one turn_timeout", time.Since(start), req)
		}
		synctest.Wait()
		if st, why := h.rt.AgentState(r); st != troupe.StateFailed {
			t.Errorf("state = %s (%s), want failed: the turn was cut", st, why)
		}
	})
}
