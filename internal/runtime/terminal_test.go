package runtime

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestTerminalAttach: Terminal starts a stopped terminal-mode agent's
// session (idle, no message needed) and refuses a structured one; while a
// person is attached, idle_timeout does not stop the session; once they
// detach, it does.
func TestTerminalAttach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		teams := idleTeam(30 * time.Minute)
		teams[p1][0].Mode = troupe.ModeTerminal
		teams[p1] = append(teams[p1], spec("other", 10*time.Minute))
		h := newHarnessOn(t, teams, Options{})
		k := key(p1, "lead")

		if _, err := h.rt.Terminal(t.Context(), key(p1, "other")); !errors.Is(err, troupe.ErrConflict) {
			t.Errorf("Terminal of a structured agent = %v, want a conflict", err)
		}
		if _, err := h.rt.Terminal(t.Context(), key(p1, "ghost")); !errors.Is(err, troupe.ErrNotFound) {
			t.Errorf("Terminal of an unknown agent = %v, want not found", err)
		}
		tm, err := h.rt.Terminal(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if st, _ := h.rt.AgentState(k); st != troupe.StateIdle || len(h.eng.Specs()) != 1 {
			t.Fatalf("after attach: state %s, %d starts; want idle, one start", st, len(h.eng.Specs()))
		}
		again, err := h.rt.Terminal(t.Context(), k)
		if err != nil || again != tm || len(h.eng.Specs()) != 1 {
			t.Fatalf("a second attach: %v, same terminal %v, %d starts; want the running session's", err, again == tm, len(h.eng.Specs()))
		}

		tm.(*memTerminal).set(true)
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if st, _ := h.rt.AgentState(k); st != troupe.StateIdle || !sessionLive(t, h, k) {
			t.Fatalf("attached for 2h with idle_timeout 30m: state %s, want idle with its session", st)
		}
		tm.(*memTerminal).set(false)
		time.Sleep(31 * time.Minute)
		synctest.Wait()
		if st, _ := h.rt.AgentState(k); st != troupe.StateStopped {
			t.Fatalf("detached for 31m: state %s, want stopped", st)
		}
	})
}
