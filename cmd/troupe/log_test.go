package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/journal"
)

// TestBinaryLogShowsAFakeAgentsToolCall: a fake agent's turn that thinks,
// calls a troupe tool over MCP and answers is kept by the daemon, and
// `troupe log AGENT --json` shows it with each kind; the text rendering
// names the tool.
func TestBinaryLogShowsAFakeAgentsToolCall(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, twoAgents)
	startDaemon(t, state, "--project", proj)
	out := mustTroupe(t, state, proj, "ask", "lead", "!think plan first\n!tool list_agents {}\n!say done: {result}")
	if !strings.Contains(out, "done:") || !strings.Contains(out, "researcher") {
		t.Fatalf("ask printed %q", out)
	}
	// The journal is written off the turn's path, yet a log read once the
	// ask is answered shows the whole turn.
	var l api.AgentLog
	if err := json.Unmarshal([]byte(mustTroupe(t, state, proj, "log", "lead", "--json")), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Turns) != 1 || !l.Turns[0].Ended() {
		t.Fatalf("log right after the answer: %+v", l)
	}
	tr := l.Turns[0]
	kinds := map[journal.Kind]journal.Event{}
	for _, ev := range tr.Events {
		kinds[ev.Kind] = ev
	}
	if c := kinds[journal.KindToolCall]; c.Tool == nil || c.Tool.Name != "list_agents" || c.Tool.Input != "{}" {
		t.Errorf("tool call = %+v", c)
	}
	if r := kinds[journal.KindToolResult]; r.Tool == nil || r.Tool.IsError || !strings.Contains(r.Tool.Output, "researcher") {
		t.Errorf("tool result = %+v", r)
	}
	if th := kinds[journal.KindThinking]; th.Text != "plan first" {
		t.Errorf("thinking = %+v", th)
	}
	if tr.Usage == nil || tr.Usage.InputTokens == 0 || !strings.HasPrefix(tr.Text, "done: ") || len(tr.Messages) != 1 || tr.Messages[0].From != "@person" {
		t.Errorf("turn = %+v", tr)
	}
	text := mustTroupe(t, state, proj, "log", "lead", "--turn", string(tr.ID))
	if !strings.Contains(text, "tool list_agents {}") || !strings.Contains(text, "thinking: plan first") || !strings.Contains(text, "given: ask from @person") {
		t.Errorf("troupe log printed:\n%s", text)
	}
}
