package fakemodel

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func userMsg(content any) map[string]any { return map[string]any{"role": "user", "content": content} }

func claudeBody(stream bool, tools []string, msgs ...any) map[string]any {
	var ts []any
	for _, n := range tools {
		ts = append(ts, map[string]any{"name": n, "input_schema": map[string]any{"type": "object"}})
	}
	b := map[string]any{"model": "claude-opus-5-5", "stream": stream, "messages": msgs, "max_tokens": 1000}
	if tools != nil {
		b["tools"] = ts
	}
	return b
}

// messagesAnswer folds a Messages SSE stream into its text, tool calls and
// stop reason, checking the event order on the way.
type messagesAnswer struct {
	text   string
	calls  []ToolCall
	stop   string
	events string
}

func foldMessages(t *testing.T, evs []sseEvent) messagesAnswer {
	t.Helper()
	var a messagesAnswer
	a.events = names(evs)
	if len(evs) < 3 || evs[0].name != "message_start" || evs[len(evs)-1].name != "message_stop" ||
		evs[len(evs)-2].name != "message_delta" {
		t.Fatalf("event order: %s", a.events)
	}
	open := -1
	for _, e := range evs {
		if e.name != str(e.data["type"]) {
			t.Errorf("event %s carries type %v", e.name, e.data["type"])
		}
		idx, _ := e.data["index"].(float64)
		switch e.name {
		case "content_block_start":
			if open != -1 {
				t.Fatalf("block %v starts while %d is open", idx, open)
			}
			open = int(idx)
			if cb := obj(e.data["content_block"]); str(cb["type"]) == "tool_use" {
				if str(cb["id"]) == "" {
					t.Error("tool_use without id")
				}
				a.calls = append(a.calls, ToolCall{Name: str(cb["name"])})
			}
		case "content_block_delta":
			if int(idx) != open {
				t.Fatalf("delta for block %v while %d is open", idx, open)
			}
			d := obj(e.data["delta"])
			switch str(d["type"]) {
			case "text_delta":
				a.text += str(d["text"])
			case "input_json_delta":
				a.calls[len(a.calls)-1].Args = append(a.calls[len(a.calls)-1].Args, str(d["partial_json"])...)
			}
		case "content_block_stop":
			open = -1
		case "message_delta":
			a.stop = str(obj(e.data["delta"])["stop_reason"])
			if obj(e.data["usage"])["output_tokens"] == nil {
				t.Error("message_delta without usage")
			}
		}
	}
	for _, c := range a.calls {
		if !json.Valid(c.Args) {
			t.Errorf("tool %s: arguments %q are not JSON", c.Name, c.Args)
		}
	}
	return a
}

func TestMessagesText(t *testing.T) {
	s, url := start(t, Options{})
	resp := post(t, url+"/v1/messages?beta=true", claudeBody(true, []string{"Bash"},
		userMsg([]any{
			map[string]any{"type": "text", "text": "<system-reminder>\n[[text:WRONG]]</system-reminder>"},
			map[string]any{"type": "text", "text": "hi [[text:pong]]"},
		}),
		map[string]any{"role": "system", "content": "# Environment [[text:ALSO WRONG]]"}),
		"x-claude-code-session-id", "sess-1")
	a := foldMessages(t, mustSSE(t, resp))
	want := "message_start content_block_start content_block_delta content_block_stop message_delta message_stop"
	if a.text != "pong" || a.stop != "end_turn" || a.events != want {
		t.Errorf("got %+v", a)
	}
	r := s.Requests()[0]
	if r.API != Messages || r.Query != "beta=true" || r.SessionID != "sess-1" || r.Prompt != "hi [[text:pong]]" ||
		r.Reply.Text != "pong" || r.Model != "claude-opus-5-5" || !r.Stream || r.Body["max_tokens"] != 1000.0 {
		t.Errorf("recorded %+v", r)
	}
}

func TestMessagesEcho(t *testing.T) {
	_, url := start(t, Options{})
	a := foldMessages(t, mustSSE(t, post(t, url+"/v1/messages", claudeBody(true, nil, userMsg("  hello  ")))))
	if a.text != "Echo: hello" {
		t.Errorf("text %q", a.text)
	}
}

func TestMessagesToolCall(t *testing.T) {
	tools := []string{"Bash", "mcp__troupe__ask_agent", "mcp__troupe__reply"}
	for _, tc := range []struct {
		marker, name string
	}{
		{`[[tool:mcp__troupe__ask_agent {"agent":"bob","question":"6*7? ]] here"}]]`, "mcp__troupe__ask_agent"},
		{`[[tool:mcp__troupe__* {"agent":"bob"}]]`, "mcp__troupe__ask_agent"},
		{`[[tool:*reply]]`, "mcp__troupe__reply"},
	} {
		_, url := start(t, Options{})
		a := foldMessages(t, mustSSE(t, post(t, url+"/v1/messages", claudeBody(true, tools, userMsg("ask "+tc.marker)))))
		if a.stop != "tool_use" || len(a.calls) != 1 || a.calls[0].Name != tc.name || !strings.HasPrefix(a.text, "Calling tool") {
			t.Errorf("%s: got %+v", tc.marker, a)
		}
	}
}

func TestMessagesToolNotOffered(t *testing.T) {
	_, url := start(t, Options{})
	for _, tools := range [][]string{nil, {}, {"Bash"}} {
		a := foldMessages(t, mustSSE(t, post(t, url+"/v1/messages", claudeBody(true, tools, userMsg("[[tool:mcp__troupe__*]]")))))
		if a.stop != "end_turn" || len(a.calls) != 0 || !strings.Contains(a.text, "no offered tool matches") {
			t.Errorf("tools %v: got %+v", tools, a)
		}
	}
}

func TestMessagesToolResult(t *testing.T) {
	_, url := start(t, Options{})
	body := claudeBody(true, []string{"Bash"},
		userMsg("[[tool:Bash {}]]"),
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{}}}},
		userMsg([]any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1",
			"content": []any{map[string]any{"type": "text", "text": "agent bob answers: 42"}}}}),
		map[string]any{"role": "system", "content": "reminder"})
	a := foldMessages(t, mustSSE(t, post(t, url+"/v1/messages", body)))
	if a.text != "TOOL_RESULT_SEEN: agent bob answers: 42" || a.stop != "end_turn" {
		t.Errorf("got %+v", a)
	}
}

func TestMessagesNotStreaming(t *testing.T) {
	_, url := start(t, Options{})
	m := decode(t, post(t, url+"/v1/messages", claudeBody(false, []string{"Bash"}, userMsg(`[[text:ok]][[tool:Bash {"command":"ls"}]]`))))
	content := arr(m["content"])
	if m["stop_reason"] != "tool_use" || len(content) != 2 || str(obj(content[0])["text"]) != "ok" ||
		jsonString(t, obj(content[1])["input"]) != `{"command":"ls"}` || obj(m["usage"])["input_tokens"] == nil {
		t.Errorf("got %v", m)
	}
}

func TestMessagesError(t *testing.T) {
	_, url := start(t, Options{})
	for _, stream := range []bool{true, false} {
		resp := post(t, url+"/v1/messages", claudeBody(stream, nil, userMsg("boom [[error:529]]")))
		m := decode(t, resp)
		e := obj(m["error"])
		if resp.StatusCode != 529 || m["type"] != "error" || e["type"] != "overloaded_error" || e["message"] != "fake error 529" {
			t.Errorf("stream %v: %d %v", stream, resp.StatusCode, m)
		}
	}
}

func TestMessagesDrop(t *testing.T) {
	_, url := start(t, Options{})
	resp := post(t, url+"/v1/messages", claudeBody(true, nil, userMsg("[[text:never finished]] [[drop]]")))
	evs, err := readSSE(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v, want unexpected EOF", err)
	}
	if len(evs) == 0 || evs[len(evs)-1].name != "content_block_delta" {
		t.Errorf("events before the drop: %s", names(evs))
	}
}

func TestMessagesSideQueries(t *testing.T) {
	s, url := start(t, Options{})
	s.Push(Reply{Text: "for the turn"}) // side queries leave the queue alone
	title := claudeBody(true, []string{}, userMsg("[[error:500]] name this"))
	title["output_config"] = map[string]any{"format": map[string]any{"type": "json_schema", "schema": map[string]any{
		"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}, "required": []any{"title"}}}}
	if a := foldMessages(t, mustSSE(t, post(t, url+"/v1/messages", title))); a.text != `{"title":"Fake title"}` {
		t.Errorf("title: %+v", a)
	}
	classifier := claudeBody(true, []string{}, userMsg("may I?"))
	classifier["stop_sequences"] = []any{"</block>"}
	evs := mustSSE(t, post(t, url+"/v1/messages", classifier))
	if a := foldMessages(t, evs); a.text != "<block>no" || a.stop != "stop_sequence" {
		t.Errorf("classifier: %+v", a)
	}
	if a := foldMessages(t, mustSSE(t, post(t, url+"/v1/messages", claudeBody(true, nil, userMsg("hi"))))); a.text != "for the turn" {
		t.Errorf("turn: %+v", a)
	}
}

func TestScriptAndQueue(t *testing.T) {
	var seen []string
	s, url := start(t, Options{Script: func(r Request) Reply {
		seen = append(seen, r.Prompt)
		return Reply{Text: "scripted " + r.Prompt}
	}})
	s.Push(Reply{Text: "first"}, Reply{Calls: []ToolCall{{Name: "Ba*", Args: json.RawMessage(` {"x": 1} `)}}})
	var got []string
	for range 3 {
		a := foldMessages(t, mustSSE(t, post(t, url+"/v1/messages", claudeBody(true, []string{"Bash"}, userMsg("p")))))
		got = append(got, a.text)
		if len(a.calls) > 0 {
			got = append(got, a.calls[0].Name+string(a.calls[0].Args))
		}
	}
	if strings.Join(got, "|") != `first||Bash{"x":1}|scripted p` || len(seen) != 1 {
		t.Errorf("got %q, script saw %q", got, seen)
	}
	if r := s.Requests()[1].Reply; r.Calls[0].Name != "Bash" {
		t.Errorf("recorded reply %+v: want the resolved name", r)
	}
}
