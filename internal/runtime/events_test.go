package runtime

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// drain returns the events sub holds now about agent ("" for any).
func drain(sub *events.Subscription, agent troupe.AgentID) []events.Event {
	var out []events.Event
	for {
		select {
		case ev := <-sub.C():
			if agent == "" || ev.Agent == agent {
				out = append(out, ev)
			}
		default:
			return out
		}
	}
}

// TestEngineEventsReachTheFeedTypedAndClipped: every kind of engine event
// is published as its typed payload, long texts cut at events.MaxText and
// marked; a permission request the agent's allowed_tools settle is
// published once, decided; one the person decides twice, pending then
// decided, and the engine's echo of either is not published again.
func TestEngineEventsReachTheFeedTypedAndClipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		teams := twoAgents(10 * time.Minute)
		teams[p1][1].AllowedTools = []string{"Read"}
		h := newHarness(t, teams, 0)
		_, sub, _ := h.rt.hub.Subscribe(h.rt.hub.Last())
		defer sub.Close()
		var req troupe.Request
		var err error
		done := make(chan struct{})
		go func() {
			req, err = h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "rich sess-1", 0)
			close(done)
		}()
		synctest.Wait()
		ps := h.rt.Permissions(p1)
		if len(ps) != 1 || ps[0].Tool != "Bash" {
			t.Fatalf("pending permissions = %+v, want Bash only (Read is in allowed_tools)", ps)
		}
		if _, err := h.rt.Decide(t.Context(), ps[0].ID, false, ""); err != nil {
			t.Fatal(err)
		}
		<-done
		if err != nil || req.Answer != "Read:true Bash:false" {
			t.Fatalf("ask = %+v, %v; want Read allowed (allowed_tools) and Bash denied (the person)", req, err)
		}
		synctest.Wait() // the actor publishes turn.ended after the answer is out
		got := map[events.Type]json.RawMessage{}
		var perms []events.AgentPermission
		for _, ev := range drain(sub, "researcher") {
			got[ev.Type] = ev.Data
			if ev.Type == events.TypeAgentPermission {
				var p events.AgentPermission
				json.Unmarshal(ev.Data, &p)
				perms = append(perms, p)
			}
		}
		var call events.AgentActivity
		if err := json.Unmarshal(got[events.TypeAgentToolCall], &call); err != nil || call.Tool == nil || call.Tool.Name != "Bash" || !call.Cut ||
			len(call.Tool.Input) > events.MaxText+len("…") || !strings.HasSuffix(call.Tool.Input, "…") {
			t.Errorf("tool call event = %s (%v), want Bash with its input cut at %d bytes", got[events.TypeAgentToolCall], err, events.MaxText)
		}
		for typ, want := range map[events.Type]string{
			events.TypeAgentThinking:   `"text":"let me see\nwhat to do"`,
			events.TypeAgentToolResult: `"is_error":true`,
			events.TypeAgentUsage:      `"cost_usd":0.25`,
			events.TypeAgentSession:    `"session_id":"sess-1"`,
			events.TypeTurnEnded:       `"error":""`,
		} {
			if !strings.Contains(string(got[typ]), want) {
				t.Errorf("%s = %s, want it to hold %s", typ, got[typ], want)
			}
		}
		var seq []string
		for _, p := range perms {
			seq = append(seq, p.Tool+":"+string(p.State))
		}
		if strings.Join(seq, " ") != "Read:allowed Bash:pending Bash:denied" {
			t.Fatalf("permission events = %v, want Read:allowed Bash:pending Bash:denied (no echo twice)", seq)
		}
		if perms[1].ID != string(ps[0].ID) || perms[2].ID != perms[1].ID || perms[2].Allow ||
			perms[2].Reason != "the person denied it" {
			t.Errorf("Bash events = %+v, want troupe's id %s, denied by the person", perms[1:], ps[0].ID)
		}
	})
}

// TestSessionIDIsResumedByTheNextSession: the engine's conversation id an
// earlier session reported is given back to the next start (StartSpec.Resume);
// removing the agent from its team forgets it.
func TestSessionIDIsResumedByTheNextSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		r := key(p1, "researcher")
		if _, err := h.rt.Ask(t.Context(), r, "lead", "session sess-42", 0); err != nil {
			t.Fatal(err)
		}
		if req, _ := h.rt.Ask(t.Context(), r, "lead", "die", 0); req.State != troupe.ReqFailed {
			t.Fatalf("ask die = %+v, want failed", req)
		}
		if _, err := h.rt.Ask(t.Context(), r, "lead", "answer back", 0); err != nil {
			t.Fatal(err)
		}
		specs := h.eng.Specs()
		if len(specs) != 2 || specs[0].Resume != "" || specs[1].Resume != "sess-42" {
			t.Fatalf("starts resumed %v, want a new conversation then sess-42", resumes(specs))
		}
		h.rt.TeamChanged(troupe.TeamChange{Project: p1, Removed: []troupe.AgentID{"researcher"}})
		if _, id, _ := h.rt.o.Sessions.SessionID(t.Context(), r); id != "" {
			t.Errorf("after removal the runtime still keeps conversation %q", id)
		}
	})
}

func resumes(specs []engine.StartSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Resume)
	}
	return out
}

// TestFailedTurnLeavesTheAgentFailedUntilItsNextTurn: an engine that fails
// a turn (its model answered 500) leaves the agent failed with the engine's
// own text, the asker gets that text, and the next message works.
func TestFailedTurnLeavesTheAgentFailedUntilItsNextTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		r := key(p1, "researcher")
		req, err := h.rt.Ask(t.Context(), r, "lead", "fail API Error: 500 overloaded", 0)
		if err != nil || req.State != troupe.ReqFailed || !strings.Contains(req.Error, "API Error: 500 overloaded") {
			t.Fatalf("ask = %+v, %v; want failed with the engine's text", req, err)
		}
		synctest.Wait()
		if st, why := h.rt.AgentState(r); st != troupe.StateFailed || why != "API Error: 500 overloaded" {
			t.Errorf("state = %s (%s), want failed with the engine's text", st, why)
		}
		if req, err := h.rt.Ask(t.Context(), r, "lead", "answer back", 0); err != nil || req.Answer != "back" {
			t.Fatalf("next ask = %+v, %v", req, err)
		}
		synctest.Wait()
		if st, _ := h.rt.AgentState(r); st != troupe.StateIdle {
			t.Errorf("state after a good turn = %s, want idle", st)
		}
	})
}

// TestC4_AStartingSessionIsNotSilent: a CLI that takes longer to start
// than the target's window is not given no reply for it; a start that
// never ends is cut at StartTimeout and the ask fails saying so.
func TestC4_AStartingSessionIsNotSilent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		teams := twoAgents(30 * time.Second)
		teams[p1][1].Options = map[string]any{"start_delay": 90 * time.Second} // three windows
		h := newHarness(t, teams, 0)
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "answer ready", 0)
		if err != nil || req.State != troupe.ReqAnswered || req.Answer != "ready" {
			t.Fatalf("ask of a slow starter = %+v, %v; want answered", req, err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		teams := twoAgents(2 * time.Minute)
		teams[p1][1].Options = map[string]any{"start_delay": 100 * time.Hour}
		h := newHarness(t, teams, 0)
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "answer ready", 0)
		if err != nil || req.State != troupe.ReqFailed || !strings.Contains(req.Error, "did not start within 2m0s") {
			t.Fatalf("ask of a start that hangs = %+v, %v; want failed at StartTimeout", req, err)
		}
	})
}
