package api_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestAPIAgentLog: GET .../agents/{agent}/log gives the agent's turns
// newest first with a cursor for older ones, one turn with ?turn=, and
// says what to do about an unknown turn, agent or a bad limit.
func TestAPIAgentLog(t *testing.T) {
	st := journal.NewMemStore()
	f := newFixtureWith(t, api.Options{Journal: st})
	cl := client.New(f.ts.URL, token)
	ctx := context.Background()
	p, err := cl.AddProject(ctx, teamDir(t))
	if err != nil {
		t.Fatal(err)
	}
	k := troupe.RuntimeKey{Project: p.ID, Agent: "a"}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 3 {
		id := troupe.TurnID(fmt.Sprintf("t%d", i))
		if err := st.Record(ctx,
			journal.Entry{Key: k, Turn: id, Start: &journal.Start{At: at, Messages: []journal.Message{{ID: 1, From: troupe.Person, Kind: troupe.KindAsk, Text: "q"}}}},
			journal.Entry{Key: k, Turn: id, Event: &journal.Event{At: at, Kind: journal.KindToolCall, Tool: &journal.Tool{ID: "1", Name: "Bash", Input: `{"command":"ls"}`}}},
			journal.Entry{Key: k, Turn: id, End: &journal.End{At: at.Add(time.Second), Text: "done"}}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := cl.AgentLog(ctx, p.ID, "a", "", 0, 2)
	if err != nil || len(l.Turns) != 2 || l.Turns[0].ID != "t2" || l.Before != l.Turns[1].Seq || l.Turns[0].Events[0].Tool.Name != "Bash" {
		t.Fatalf("log(limit 2) = %+v, %v; want t2, t1 with a cursor", l, err)
	}
	older, err := cl.AgentLog(ctx, p.ID, "a", "", l.Before, 2)
	if err != nil || len(older.Turns) != 1 || older.Turns[0].ID != "t0" || older.Before != 0 {
		t.Fatalf("log(before) = %+v, %v; want t0 and no cursor", older, err)
	}
	one, err := cl.AgentLog(ctx, p.ID, "a", "t1", 0, 0)
	if err != nil || len(one.Turns) != 1 || one.Turns[0].ID != "t1" || one.Turns[0].DurationMS != 1000 || one.Turns[0].Text != "done" {
		t.Fatalf("log(turn t1) = %+v, %v", one, err)
	}
	raw := f.getBody(t, "/api/projects/"+string(p.ID)+"/agents/a/log?turn=t1")
	for _, field := range []string{`"turn":"t1"`, `"kind":"tool_call"`, `"name":"Bash"`, `"duration_ms":1000`, `"messages":[{"id":1,"from":"@person","kind":"ask","text":"q"}]`} {
		if !strings.Contains(raw, field) {
			t.Errorf("log JSON lacks %s: %s", field, raw)
		}
	}
	if _, err := cl.AgentLog(ctx, p.ID, "a", "nope", 0, 0); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("unknown turn: %v, want not found", err)
	}
	if _, err := cl.AgentLog(ctx, p.ID, "zed", "", 0, 0); !errors.Is(err, troupe.ErrNotFound) || !strings.Contains(err.Error(), "the agents are a") {
		t.Errorf("unknown agent: %v, want not found naming the agents", err)
	}
	if _, err := cl.AgentLog(ctx, p.ID, "a", "", 0, 500); !errors.Is(err, troupe.ErrInvalid) {
		t.Errorf("limit 500: %v, want invalid", err)
	}
	if empty := f.getBody(t, "/api/projects/"+string(p.ID)+"/agents/a/log?before=1"); !strings.Contains(empty, `"turns":[]`) {
		t.Errorf("no older turns: %s, want an empty list", empty)
	}
}
