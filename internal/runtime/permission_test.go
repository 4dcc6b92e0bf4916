package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// asking runs an ask of the person in the background (nobody can wait on
// the person, so teammates may ask each other meanwhile); wait returns
// its outcome.
type asking struct {
	req  troupe.Request
	err  error
	done chan struct{}
}

func askAsync(ctx context.Context, h *harness, to troupe.RuntimeKey, text string) *asking {
	a := &asking{done: make(chan struct{})}
	go func() {
		a.req, a.err = h.rt.Ask(ctx, to, troupe.Person, text, 0)
		close(a.done)
	}()
	return a
}

func (a *asking) wait(t *testing.T) troupe.Request {
	t.Helper()
	<-a.done
	if a.err != nil {
		t.Fatalf("ask: %v", a.err)
	}
	return a.req
}

func states(evs []events.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type == events.TypeAgentState {
			var s events.AgentState
			json.Unmarshal(ev.Data, &s)
			out = append(out, string(s.State))
		}
	}
	return out
}

func permEvents(evs []events.Event) []events.AgentPermission {
	var out []events.AgentPermission
	for _, ev := range evs {
		if ev.Type == events.TypeAgentPermission {
			var p events.AgentPermission
			json.Unmarshal(ev.Data, &p)
			out = append(out, p)
		}
	}
	return out
}

// TestPermissionWaitsOnThePerson: a request the definition does not settle
// is pending; the agent is waiting (for longer than its turn_timeout: it is
// blocked on the person, not silent); allowed, it is busy again and the
// turn ends with the decision.
func TestPermissionWaitsOnThePerson(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		r := key(p1, "researcher")
		_, sub, _ := h.rt.hub.Subscribe(h.rt.hub.Last())
		defer sub.Close()
		ask := askAsync(t.Context(), h, r, "perm Bash")
		synctest.Wait()
		if st, why := h.rt.AgentState(r); st != troupe.StateWaiting || why != "asks to use Bash" {
			t.Fatalf("state = %s (%s), want waiting (asks to use Bash)", st, why)
		}
		ps := h.rt.Permissions("")
		if len(ps) != 1 || ps[0].Key() != r || ps[0].Tool != "Bash" || ps[0].Title != "use Bash" ||
			ps[0].Input != `{"command":"ls"}` || ps[0].State != troupe.PermPending || ps[0].Turn == "" {
			t.Fatalf("pending = %+v, want researcher's Bash request", ps)
		}
		time.Sleep(3 * time.Hour) // fake time: three hours at lunch, past every inactivity window
		synctest.Wait()
		if st, _ := h.rt.AgentState(r); st != troupe.StateWaiting {
			t.Fatalf("after 3 h the state is %s, want still waiting: neither watchdog cuts a wait on the person", st)
		}
		got, err := h.rt.Decide(t.Context(), ps[0].ID, true, "")
		if err != nil || got.State != troupe.PermAllowed {
			t.Fatalf("Decide = %+v, %v", got, err)
		}
		if req := ask.wait(t); req.Answer != "Bash:true" {
			t.Fatalf("ask = %+v, want the turn to end with the decision Bash:true", req)
		}
		synctest.Wait()
		evs := drain(sub, "researcher")
		if got, want := strings.Join(states(evs), " "), "starting busy waiting busy idle"; got != want {
			t.Errorf("states = %s, want %s", got, want)
		}
		pe := permEvents(evs)
		if len(pe) != 2 || pe[0].State != troupe.PermPending || pe[1].State != troupe.PermAllowed || !pe[1].Allow ||
			pe[0].ID != string(ps[0].ID) || pe[1].ID != pe[0].ID {
			t.Errorf("permission events = %+v, want one pending and one allowed, with troupe's id", pe)
		}
		if n := len(h.rt.Permissions("")); n != 0 {
			t.Errorf("%d permissions still pending after the decision", n)
		}
		if _, err := h.rt.Decide(t.Context(), ps[0].ID, false, ""); !errors.Is(err, troupe.ErrConflict) ||
			!strings.Contains(err.Error(), "already allowed") {
			t.Errorf("second decision = %v, want a conflict saying it was already allowed", err)
		}
		if _, err := h.rt.Decide(t.Context(), "perm-nope", true, ""); !errors.Is(err, troupe.ErrNotFound) ||
			!strings.Contains(err.Error(), "troupe permissions") {
			t.Errorf("unknown id = %v, want not found pointing at `troupe permissions`", err)
		}
	})
}

func TestPermissionDeniedWithReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		ask := askAsync(t.Context(), h, key(p1, "researcher"), "perm Bash Edit")
		synctest.Wait()
		ps := h.rt.Permissions(p1)
		if len(ps) != 1 || ps[0].Tool != "Bash" {
			t.Fatalf("pending = %+v, want Bash", ps)
		}
		h.rt.Decide(t.Context(), ps[0].ID, false, "  use Read instead ")
		synctest.Wait()
		ps = h.rt.Permissions(p1)
		if len(ps) != 1 || ps[0].Tool != "Edit" {
			t.Fatalf("pending = %+v, want Edit next", ps)
		}
		h.rt.Decide(t.Context(), ps[0].ID, true, "")
		if req := ask.wait(t); req.Answer != "Bash:false(the person denied it: use Read instead) Edit:true" {
			t.Fatalf("answer = %q", req.Answer)
		}
	})
}

// TestPermissionDroppedWhenTheSessionEnds: a session that ends while a
// request waits (here: the agent is removed from its team) denies it with
// the reason; Approve returns, the entry is gone.
func TestPermissionDroppedWhenTheSessionEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		ask := askAsync(t.Context(), h, key(p1, "researcher"), "perm Bash")
		synctest.Wait()
		id := h.rt.Permissions(p1)[0].ID
		h.rt.TeamChanged(troupe.TeamChange{Project: p1, Removed: []troupe.AgentID{"researcher"}})
		<-ask.done
		synctest.Wait()
		if n := len(h.rt.Permissions("")); n != 0 {
			t.Errorf("%d permissions pending after the session ended", n)
		}
		ds := h.eng.Decisions()
		if len(ds) != 1 || ds[0].Allow || ds[0].Reason == "" {
			t.Errorf("Approve returned %+v, want one denial with a reason", ds)
		}
		if _, err := h.rt.Decide(t.Context(), id, true, ""); !errors.Is(err, troupe.ErrConflict) {
			t.Errorf("deciding a dropped request = %v, want a conflict (already denied)", err)
		}
	})
}

// TestC1_PermissionsOfCopiedProjectsStayApart: two projects with the same
// agent names each have a pending request; each project sees and decides
// its own; the rest of a team keeps working while one agent waits; a
// project's removal drops its requests only.
func TestC1_PermissionsOfCopiedProjectsStayApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const p2 troupe.ProjectID = "p2"
		teams := twoAgents(10 * time.Minute)
		teams[p2] = []troupe.AgentSpec{spec("lead", 10*time.Minute), spec("researcher", 10*time.Minute)}
		h := newHarness(t, teams, 0)
		a1 := askAsync(t.Context(), h, key(p1, "researcher"), "perm Bash")
		a2 := askAsync(t.Context(), h, key(p2, "researcher"), "perm Bash")
		synctest.Wait()
		ps1, ps2 := h.rt.Permissions(p1), h.rt.Permissions(p2)
		if len(ps1) != 1 || len(ps2) != 1 || ps1[0].Project != p1 || ps2[0].Project != p2 || ps1[0].ID == ps2[0].ID {
			t.Fatalf("pending p1 = %+v, p2 = %+v; want one each, apart", ps1, ps2)
		}
		if req, err := h.rt.Ask(t.Context(), key(p1, "lead"), "researcher", "answer still here", 0); err != nil || req.Answer != "still here" {
			t.Fatalf("a teammate's ask while researcher waits = %+v, %v", req, err)
		}
		h.rt.Decide(t.Context(), ps1[0].ID, true, "")
		if req := a1.wait(t); req.Answer != "Bash:true" {
			t.Fatalf("p1 answer = %q", req.Answer)
		}
		synctest.Wait()
		if st, _ := h.rt.AgentState(key(p2, "researcher")); st != troupe.StateWaiting {
			t.Fatalf("p2's researcher is %s after p1's decision, want still waiting", st)
		}
		h.rt.ProjectRemoved(p1)
		if ps := h.rt.Permissions(""); len(ps) != 1 || ps[0].Project != p2 {
			t.Fatalf("after p1's removal pending = %+v, want p2's only", ps)
		}
		h.rt.Decide(t.Context(), ps2[0].ID, false, "no")
		if req := a2.wait(t); !strings.HasPrefix(req.Answer, "Bash:false") {
			t.Fatalf("p2 answer = %q", req.Answer)
		}
	})
}

// TestPermissionsAreBoundedPerProject: beyond MaxPendingPermissions in a
// project a request is denied at once, saying why.
func TestPermissionsAreBoundedPerProject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		h.rt.perms.mu.Lock()
		h.rt.perms.perProject[p1] = MaxPendingPermissions // as if that many waited
		h.rt.perms.mu.Unlock()
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "perm Bash", 0)
		if err != nil || !strings.Contains(req.Answer, "Bash:false(256 permission requests already wait") {
			t.Fatalf("ask = %+v, %v; want Bash denied at once over the bound", req, err)
		}
		synctest.Wait()
		if st, _ := h.rt.AgentState(key(p1, "researcher")); st != troupe.StateIdle {
			t.Errorf("state = %s, want idle", st)
		}
	})
}

// TestAskCeilingNamesThePersonsWait: a wait on the person is activity, but
// an ask's ceiling still ends the ask, saying what the agent waits for.
func TestAskCeilingNamesThePersonsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), time.Hour)
		start := time.Now()
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "perm Bash", 0)
		if err != nil {
			t.Fatal(err)
		}
		if req.State != troupe.ReqNoReply || time.Since(start) != time.Hour ||
			!strings.Contains(req.Error, "waits on the person (asks to use Bash)") {
			t.Fatalf("ask = %+v after %v; want no_reply at the 1 h ceiling, naming the wait on the person", req, time.Since(start))
		}
		if ps := h.rt.Permissions(p1); len(ps) != 1 {
			t.Fatalf("pending = %+v; the request still waits for the person", ps)
		}
		h.rt.Decide(t.Context(), h.rt.Permissions(p1)[0].ID, true, "")
		synctest.Wait()
	})
}
