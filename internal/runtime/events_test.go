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

// TestEngineEventsReachTheFeedTypedAndClipped: every kind of engine event
// is published as its typed payload, long texts cut at events.MaxText and
// marked; permission requests are decided by the agent's allowed_tools.
func TestEngineEventsReachTheFeedTypedAndClipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		teams := twoAgents(10 * time.Minute)
		teams[p1][1].AllowedTools = []string{"Read"}
		h := newHarness(t, teams, 0)
		_, sub, _ := h.rt.hub.Subscribe(h.rt.hub.Last())
		defer sub.Close()
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "rich sess-1", 0)
		if err != nil || req.Answer != "Read:true Bash:false" {
			t.Fatalf("ask = %+v, %v; want the approver to allow Read (allowed_tools) and deny Bash", req, err)
		}
		synctest.Wait() // the actor publishes turn.ended after the answer is out
		got := map[events.Type]json.RawMessage{}
	drain:
		for {
			select {
			case ev := <-sub.C():
				if ev.Agent == "researcher" {
					got[ev.Type] = ev.Data
				}
			default:
				break drain
			}
		}
		var call events.AgentToolCall
		if err := json.Unmarshal(got[events.TypeAgentToolCall], &call); err != nil || call.Name != "Bash" || !call.Cut ||
			len(call.Input) > events.MaxText+len("…") || !strings.HasSuffix(call.Input, "…") {
			t.Errorf("tool call event = %s (%v), want Bash with its input cut at %d bytes", got[events.TypeAgentToolCall], err, events.MaxText)
		}
		for typ, want := range map[events.Type]string{
			events.TypeAgentThinking:   `"text":"let me see\nwhat to do"`,
			events.TypeAgentToolResult: `"is_error":true`,
			events.TypeAgentUsage:      `"cost_usd":0.25`,
			events.TypeAgentSession:    `{"session_id":"sess-1"}`,
			events.TypeAgentPermission: `"tool":"Bash"`,
			events.TypeTurnEnded:       `"error":""`,
		} {
			if !strings.Contains(string(got[typ]), want) {
				t.Errorf("%s = %s, want it to hold %s", typ, got[typ], want)
			}
		}
		var perm events.AgentPermission
		json.Unmarshal(got[events.TypeAgentPermission], &perm)
		if perm.Allow || !strings.Contains(perm.Reason, "allowed_tools") {
			t.Errorf("permission for Bash = %+v, want denied naming allowed_tools", perm)
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
		if _, err := h.rt.Ask(t.Context(), r, "lead", "rich sess-42", 0); err != nil {
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
		if id := h.rt.resumeID(r); id != "" {
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
