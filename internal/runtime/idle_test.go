package runtime

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// idleTeam is one agent, lead, whose session stops after idle.
func idleTeam(idle time.Duration) staticTeams {
	s := spec("lead", 10*time.Minute)
	s.IdleTimeout = idle
	return staticTeams{p1: {s}}
}

// memGrants mints numbered tokens and remembers the live ones.
type memGrants struct {
	mu   sync.Mutex // guards n and live
	n    int
	live map[string]bool
}

func (g *memGrants) Mint(troupe.RuntimeKey, time.Duration) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	tok := fmt.Sprint("tok", g.n)
	if g.live == nil {
		g.live = map[string]bool{}
	}
	g.live[tok] = true
	return tok
}

func (g *memGrants) Revoke(tok string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.live, tok)
}

func (g *memGrants) Live() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.live)
}

// sessionLive reports whether the agent k has a session up.
func sessionLive(t *testing.T, h *harness, k troupe.RuntimeKey) bool {
	t.Helper()
	a := h.rt.actor(k)
	return a != nil && a.session() != nil
}

// wantIdleFor checks that the agent stays idle with its session for d,
// then is stopped at exactly d with the idle reason.
func wantIdleFor(t *testing.T, h *harness, k troupe.RuntimeKey, d time.Duration, reason string) {
	t.Helper()
	time.Sleep(d - time.Nanosecond)
	synctest.Wait()
	if st, _ := h.rt.AgentState(k); st != troupe.StateIdle || !sessionLive(t, h, k) {
		t.Fatalf("%v after the turn: state %s, session live %v; want idle with its session", d-time.Nanosecond, st, sessionLive(t, h, k))
	}
	time.Sleep(time.Nanosecond)
	synctest.Wait()
	if st, why := h.rt.AgentState(k); st != troupe.StateStopped || why != reason || sessionLive(t, h, k) {
		t.Fatalf("%v after the turn: state %s (%s), session live %v; want stopped (%s), no session", d, st, why, sessionLive(t, h, k), reason)
	}
}

// TestIdleSessionStopsAfterIdleTimeout: an agent left without a turn for
// exactly its idle_timeout is stopped (its session closed, its MCP token
// revoked); the next message starts a session that resumes the
// conversation.
func TestIdleSessionStopsAfterIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &memGrants{}
		h := newHarnessOn(t, idleTeam(30*time.Minute), Options{Grants: g, MCPURL: "http://mcp"})
		k := key(p1, "lead")
		if req, err := h.rt.Ask(t.Context(), k, troupe.Person, "session conv-1", 0); err != nil || req.Answer != "ok" {
			t.Fatalf("ask = %+v, %v", req, err)
		}
		synctest.Wait()
		if g.Live() != 1 {
			t.Fatalf("%d live tokens, want the session's one", g.Live())
		}
		wantIdleFor(t, h, k, 30*time.Minute, "idle for 30m: stopped; the next message starts it again")
		if g.Live() != 0 {
			t.Errorf("%d live tokens after the idle stop, want 0: tokens die with their session", g.Live())
		}
		req, err := h.rt.Ask(t.Context(), k, troupe.Person, "answer back", 0)
		if err != nil || req.Answer != "back" {
			t.Fatalf("ask after the idle stop = %+v, %v; want it answered", req, err)
		}
		specs := h.eng.Specs()
		if len(specs) != 2 || specs[0].Resume != "" || specs[1].Resume != "conv-1" {
			t.Fatalf("%d starts, resume %q; want 2, the second resuming conv-1", len(specs), resumes(specs))
		}
		synctest.Wait()
		if st, _ := h.rt.AgentState(k); st != troupe.StateIdle || !sessionLive(t, h, k) {
			t.Fatalf("after the next ask: state %s, want idle with a session", st)
		}
		// Idle again: stopped again, a whole timeout after that turn.
		wantIdleFor(t, h, k, 30*time.Minute, "idle for 30m: stopped; the next message starts it again")
	})
}

// TestIdleStopNotDuringATurn: a turn longer than idle_timeout keeps its
// session; the idle time counts from its end.
func TestIdleStopNotDuringATurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, idleTeam(30*time.Minute), 0)
		k := key(p1, "lead")
		// Output every 5 min for 2 h: the turn watchdog does not cut it.
		if req, err := h.rt.Ask(t.Context(), k, troupe.Person, "work 2h every 5m line then done", 0); err != nil || req.Answer != "done" {
			t.Fatalf("ask = %+v, %v", req, err)
		}
		if h.eng.starts != 1 {
			t.Fatalf("%d starts during a 2 h turn, want 1", h.eng.starts)
		}
		wantIdleFor(t, h, k, 30*time.Minute, "idle for 30m: stopped; the next message starts it again")
	})
}

// TestIdleStopNotWhileWaitingOnThePerson: a turn waiting on a permission
// decision for hours keeps its session; the idle time counts from the
// turn's end.
func TestIdleStopNotWhileWaitingOnThePerson(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, idleTeam(30*time.Minute), 0)
		k := key(p1, "lead")
		ask := askAsync(t.Context(), h, k, "perm Bash")
		synctest.Wait()
		time.Sleep(3 * time.Hour)
		synctest.Wait()
		if st, _ := h.rt.AgentState(k); st != troupe.StateWaiting || !sessionLive(t, h, k) {
			t.Fatalf("after 3 h waiting on the person: state %s, session live %v; want waiting with its session", st, sessionLive(t, h, k))
		}
		ps := h.rt.Permissions("")
		if len(ps) != 1 {
			t.Fatalf("%d permissions pending, want 1", len(ps))
		}
		if _, err := h.rt.Decide(t.Context(), ps[0].ID, true, ""); err != nil {
			t.Fatal(err)
		}
		if req := ask.wait(t); req.Answer != "Bash:true" {
			t.Fatalf("ask = %+v", req)
		}
		wantIdleFor(t, h, k, 30*time.Minute, "idle for 30m: stopped; the next message starts it again")
	})
}

// TestIdleTimeoutZeroKeepsTheSession: idle_timeout "0" never stops it.
func TestIdleTimeoutZeroKeepsTheSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, idleTeam(0), 0)
		k := key(p1, "lead")
		if _, err := h.rt.Ask(t.Context(), k, troupe.Person, "answer hi", 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(7 * 24 * time.Hour)
		synctest.Wait()
		if st, _ := h.rt.AgentState(k); st != troupe.StateIdle || !sessionLive(t, h, k) {
			t.Fatalf("a week later: state %s, want idle with its session", st)
		}
	})
}

// TestIdleTimeoutEditApplies: a team edit of idle_timeout alone applies to
// the session as it is (no restart), counted from when it became idle.
func TestIdleTimeoutEditApplies(t *testing.T) {
	for _, tc := range []struct {
		name string
		to   time.Duration
		stop time.Duration // after the turn; 0: never
		why  string
	}{
		{"longer", time.Hour, time.Hour, "idle for 1h: stopped; the next message starts it again"},
		{"shorter, already over", 5 * time.Minute, 10 * time.Minute, "idle for 5m: stopped; the next message starts it again"},
		{"never", 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				teams := idleTeam(30 * time.Minute)
				h := newHarness(t, teams, 0)
				k := key(p1, "lead")
				if _, err := h.rt.Ask(t.Context(), k, troupe.Person, "answer hi", 0); err != nil {
					t.Fatal(err)
				}
				time.Sleep(10 * time.Minute)
				synctest.Wait()
				teams[p1][0].IdleTimeout = tc.to // the registry changes the team, then tells the runtime
				h.rt.TeamChanged(troupe.TeamChange{Project: p1, Changed: []troupe.AgentID{"lead"}})
				synctest.Wait()
				if tc.stop == 10*time.Minute {
					if st, why := h.rt.AgentState(k); st != troupe.StateStopped || why != tc.why {
						t.Fatalf("state %s (%s), want stopped (%s) at once", st, why, tc.why)
					}
				} else if tc.stop == 0 {
					time.Sleep(24 * time.Hour)
					synctest.Wait()
					if st, _ := h.rt.AgentState(k); st != troupe.StateIdle || !sessionLive(t, h, k) {
						t.Fatalf("a day later: state %s, want idle with its session", st)
					}
				} else {
					wantIdleFor(t, h, k, tc.stop-10*time.Minute, tc.why)
				}
				if h.eng.starts != 1 {
					t.Errorf("%d starts: an edit of idle_timeout alone must not restart the session", h.eng.starts)
				}
			})
		})
	}
}
