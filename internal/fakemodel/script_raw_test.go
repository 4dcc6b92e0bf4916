package fakemodel

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRawCallsGoAsGiven: a Raw call keeps its name and its arguments, even
// a tool nobody offered and arguments that are not JSON; other calls are
// still resolved and checked.
func TestRawCallsGoAsGiven(t *testing.T) {
	req := Request{Tools: []string{"mcp__troupe__ask_agent"}}
	r := resolve(req, Reply{Calls: []ToolCall{
		{Name: "rm_rf", Args: json.RawMessage(`{"path": "a`), Raw: true},
		{Name: "*ask_agent", Args: json.RawMessage(` {"to": "b"} `)},
	}})
	if len(r.Calls) != 2 || r.Calls[0].Name != "rm_rf" || string(r.Calls[0].Args) != `{"path": "a` ||
		r.Calls[1].Name != "mcp__troupe__ask_agent" || string(r.Calls[1].Args) != `{"to":"b"}` {
		t.Fatalf("calls %+v", r.Calls)
	}
	req.Reply = r
	evs := chatEvents(req, []string{""})
	found := false
	for _, e := range evs {
		b, _ := json.Marshal(e.data)
		if json.Valid(b) && strings.Contains(string(b), `"arguments":"{\"path\": \"a"`) {
			found = true
		}
	}
	if !found {
		t.Errorf("the raw arguments are not in the stream")
	}
	if r := resolve(req, Reply{Calls: []ToolCall{{Name: "rm_rf"}}}); len(r.Calls) != 0 {
		t.Errorf("an unoffered call without Raw went out: %+v", r.Calls)
	}
}
