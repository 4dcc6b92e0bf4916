package fakemodel

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func codexBody(input ...any) map[string]any {
	return map[string]any{"model": "fake-model", "stream": true, "input": input, "tool_choice": "auto",
		"tools": []any{
			map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"type": "object"}},
			map[string]any{"type": "namespace", "name": "mcp__troupe", "tools": []any{
				map[string]any{"type": "function", "name": "ask_agent"}, map[string]any{"type": "function", "name": "reply"}}},
			map[string]any{"type": "custom", "name": "apply_patch"},
			map[string]any{"type": "web_search"},
		}}
}

func codexUser(text string) map[string]any {
	return map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}}
}

type responsesAnswer struct {
	text  string
	items []map[string]any // output_item.done items
	final map[string]any   // response.completed's response
}

func foldResponses(t *testing.T, evs []sseEvent) responsesAnswer {
	t.Helper()
	var a responsesAnswer
	if len(evs) < 3 || evs[0].name != "response.created" || evs[len(evs)-1].name != "response.completed" {
		t.Fatalf("event order: %s", names(evs))
	}
	added := 0
	for i, e := range evs {
		if e.name != str(e.data["type"]) || e.data["sequence_number"] != float64(i) {
			t.Errorf("event %d %s: type %v, sequence_number %v", i, e.name, e.data["type"], e.data["sequence_number"])
		}
		switch e.name {
		case "response.output_item.added":
			added++
		case "response.output_text.delta":
			a.text += str(e.data["delta"])
		case "response.output_item.done":
			it := obj(e.data["item"])
			if it["type"] == "function_call" && !json.Valid([]byte(str(it["arguments"]))) {
				t.Errorf("arguments %q are not JSON", it["arguments"])
			}
			a.items = append(a.items, it)
		case "response.completed":
			a.final = obj(e.data["response"])
		}
	}
	if added != len(a.items) || len(arr(a.final["output"])) != len(a.items) || obj(a.final["usage"])["total_tokens"] == nil {
		t.Errorf("%d added, %d done, final %v", added, len(a.items), a.final)
	}
	return a
}

func TestResponsesText(t *testing.T) {
	s, url := start(t, Options{})
	body := codexBody(
		map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "[[text:NO]]"}}},
		codexUser("<environment_context>…</environment_context>"),
		codexUser("hello [[text:Hello from fake]] [[slow:0s]]"))
	a := foldResponses(t, mustSSE(t, post(t, url+"/v1/responses", body, "session-id", "thread-1")))
	c := arr(a.items[0]["content"])
	if a.text != "Hello from fake" || len(a.items) != 1 || str(obj(c[0])["text"]) != "Hello from fake" || a.final["status"] != "completed" {
		t.Errorf("got %+v", a)
	}
	r := s.Requests()[0]
	if r.API != Responses || r.SessionID != "thread-1" ||
		strings.Join(r.Tools, ",") != "exec_command,mcp__troupe__ask_agent,mcp__troupe__reply,apply_patch" {
		t.Errorf("recorded %+v", r)
	}
}

func TestResponsesToolCalls(t *testing.T) {
	_, url := start(t, Options{})
	for _, tc := range []struct {
		marker string
		want   map[string]any
	}{
		{`[[tool:mcp__troupe__ask* {"agent":"bob","question":"q"}]]`,
			map[string]any{"type": "function_call", "namespace": "mcp__troupe", "name": "ask_agent", "arguments": `{"agent":"bob","question":"q"}`}},
		{`[[tool:exec_command {"cmd":"echo hi"}]]`,
			map[string]any{"type": "function_call", "name": "exec_command", "arguments": `{"cmd":"echo hi"}`}},
		{`[[tool:apply_patch {"input":"*** Begin Patch\n*** End Patch\n"}]]`,
			map[string]any{"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch\n"}},
	} {
		a := foldResponses(t, mustSSE(t, post(t, url+"/v1/responses", codexBody(codexUser(tc.marker)))))
		call := a.items[len(a.items)-1]
		for k, v := range tc.want {
			if call[k] != v {
				t.Errorf("%s: %s = %q, want %q", tc.marker, k, call[k], v)
			}
		}
		if str(call["call_id"]) == "" {
			t.Errorf("%s: no call_id", tc.marker)
		}
	}
}

func TestResponsesToolResult(t *testing.T) {
	_, url := start(t, Options{})
	body := codexBody(codexUser("[[tool:mcp__troupe__ask_agent]]"),
		map[string]any{"type": "function_call", "call_id": "c1", "name": "ask_agent", "namespace": "mcp__troupe", "arguments": "{}"},
		map[string]any{"type": "function_call_output", "call_id": "c1", "output": []any{
			map[string]any{"type": "input_text", "text": "Wall time: 0.1s\nOutput:"}, map[string]any{"type": "input_text", "text": "42"}}})
	a := foldResponses(t, mustSSE(t, post(t, url+"/v1/responses", body)))
	if a.text != "TOOL_RESULT_SEEN: Wall time: 0.1s\nOutput:\n42" {
		t.Errorf("text %q", a.text)
	}
}

func TestResponsesNotStreaming(t *testing.T) {
	_, url := start(t, Options{})
	body := codexBody("x")
	body["input"], body["stream"] = "plain [[text:ok]]", false
	m := decode(t, post(t, url+"/v1/responses", body))
	out := arr(m["output"])
	if m["status"] != "completed" || len(out) != 1 || str(obj(arr(obj(out[0])["content"])[0])["text"]) != "ok" {
		t.Errorf("got %v", m)
	}
}

func chatBody(stream bool, tools []string, msgs ...any) map[string]any {
	var ts []any
	for _, n := range tools {
		ts = append(ts, map[string]any{"type": "function", "function": map[string]any{"name": n, "parameters": map[string]any{}}})
	}
	return map[string]any{"model": "fake-model", "stream": stream, "messages": msgs, "tools": ts,
		"stream_options": map[string]any{"include_usage": true}}
}

type chatAnswer struct {
	text, finish string
	calls        map[float64]*ToolCall
	usage        bool
	done         bool
}

func foldChat(t *testing.T, evs []sseEvent) chatAnswer {
	t.Helper()
	a := chatAnswer{calls: map[float64]*ToolCall{}}
	for _, e := range evs {
		if e.raw == "[DONE]" {
			a.done = true
			continue
		}
		if e.name != "" || e.data["object"] != "chat.completion.chunk" {
			t.Errorf("chunk %q", e.raw)
		}
		if e.data["usage"] != nil {
			a.usage = true
		}
		for _, c := range arr(e.data["choices"]) {
			d := obj(obj(c)["delta"])
			a.text += str(d["content"])
			if f := str(obj(c)["finish_reason"]); f != "" {
				a.finish = f
			}
			for _, tc := range arr(d["tool_calls"]) {
				tc := obj(tc)
				i := tc["index"].(float64)
				if a.calls[i] == nil {
					if tc["id"] == nil || tc["type"] != "function" {
						t.Errorf("first tool call chunk %v", tc)
					}
					a.calls[i] = &ToolCall{}
				}
				f := obj(tc["function"])
				a.calls[i].Name += str(f["name"])
				a.calls[i].Args = append(a.calls[i].Args, str(f["arguments"])...)
			}
		}
	}
	if !a.done || !a.usage || evs[len(evs)-1].raw != "[DONE]" {
		t.Errorf("stream end: done %v usage %v", a.done, a.usage)
	}
	for _, c := range a.calls {
		if !json.Valid(c.Args) {
			t.Errorf("arguments %q are not JSON", c.Args)
		}
	}
	return a
}

func TestChatText(t *testing.T) {
	_, url := start(t, Options{})
	a := foldChat(t, mustSSE(t, post(t, url+"/v1/chat/completions", chatBody(true, []string{"bash"},
		map[string]any{"role": "system", "content": "you are opencode"},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "hi [[text:Hello]]"}}}))))
	if a.text != "Hello" || a.finish != "stop" || len(a.calls) != 0 {
		t.Errorf("got %+v", a)
	}
}

func TestChatToolCallAndResult(t *testing.T) {
	_, url := start(t, Options{})
	tools := []string{"bash", "troupe_ask_agent"}
	a := foldChat(t, mustSSE(t, post(t, url+"/v1/chat/completions", chatBody(true, tools,
		map[string]any{"role": "user", "content": `[[tool:*ask_agent {"agent":"bob"}]]`}))))
	if a.finish != "tool_calls" || len(a.calls) != 1 || a.calls[0].Name != "troupe_ask_agent" || string(a.calls[0].Args) != `{"agent":"bob"}` {
		t.Errorf("call: %+v %+v", a, a.calls[0])
	}
	a = foldChat(t, mustSSE(t, post(t, url+"/v1/chat/completions", chatBody(true, tools,
		map[string]any{"role": "user", "content": `[[tool:*ask_agent {"agent":"bob"}]]`},
		map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "call_1"}}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "42"}))))
	if a.text != "TOOL_RESULT_SEEN: 42" || a.finish != "stop" {
		t.Errorf("result: %+v", a)
	}
}

func TestChatTitleAndNotStreaming(t *testing.T) {
	s, url := start(t, Options{})
	s.Push(Reply{Text: "turn"})
	m := decode(t, post(t, url+"/v1/chat/completions", chatBody(false, nil,
		map[string]any{"role": "system", "content": "You are a title generator. You output ONLY a thread title."},
		map[string]any{"role": "user", "content": "hello [[error:500]]"})))
	msg := obj(obj(arr(m["choices"])[0])["message"])
	if msg["content"] != "Fake title" || m["object"] != "chat.completion" {
		t.Errorf("title: %v", m)
	}
	m = decode(t, post(t, url+"/v1/chat/completions", chatBody(false, []string{"bash"},
		map[string]any{"role": "user", "content": "go"})))
	if c := obj(arr(m["choices"])[0]); obj(c["message"])["content"] != "turn" || c["finish_reason"] != "stop" {
		t.Errorf("turn: %v", m)
	}
}

func TestOpenAIErrorsAndDrop(t *testing.T) {
	_, url := start(t, Options{})
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		var body map[string]any
		if path == "/v1/responses" {
			body = codexBody(codexUser("x [[error:400]]"))
		} else {
			body = chatBody(true, nil, map[string]any{"role": "user", "content": "x [[error:400]]"})
		}
		resp := post(t, url+path, body)
		m := decode(t, resp)
		if e := obj(m["error"]); resp.StatusCode != 400 || e["message"] != "fake error 400" || e["type"] != "invalid_request_error" {
			t.Errorf("%s: %d %v", path, resp.StatusCode, m)
		}
	}
	resp := post(t, url+"/v1/chat/completions", chatBody(true, nil, map[string]any{"role": "user", "content": "[[drop]]"}))
	if _, err := readSSE(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("chat drop: err = %v, want unexpected EOF", err)
	}
	resp = post(t, url+"/v1/responses", codexBody(codexUser("[[drop]]")))
	if _, err := readSSE(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("responses drop: err = %v, want unexpected EOF", err)
	}
}
