package fakemodel

import (
	"encoding/json"
	"testing"
)

// FuzzParse feeds request bodies through everything a handler does before
// it writes (parse, choose, resolve, build the answer of each API), without
// the waits. The seed corpus in testdata/fuzz/FuzzParse holds requests
// captured from Claude Code, Codex and OpenCode (shared/fixtures, long
// strings cut).
func FuzzParse(f *testing.F) {
	f.Add("/v1/messages", []byte(`{"stream":true,"tools":[{"name":"mcp__troupe__ask_agent"}],"messages":[{"role":"user","content":"[[tool:mcp__troupe__* {\"a\":1}]]"}]}`))
	f.Add("/v1/responses", []byte(`{"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}]}`))
	f.Add("/v1/chat/completions", []byte(`{"messages":[{"role":"tool","content":"42"}],"tools":[{"type":"function","function":{"name":"bash"}}]}`))
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		req := Request{Method: "POST", Path: path, API: apiOf("POST", path), Seq: 1}
		if req.API == "" || parseBody(&req, body) != nil {
			return
		}
		r, ok := sideReply(req)
		if !ok {
			r = DefaultScript(req)
		}
		req.Reply = resolve(req, r)
		for _, c := range req.Reply.Calls {
			if !json.Valid(c.Args) {
				t.Fatalf("call %s: arguments %q", c.Name, c.Args)
			}
		}
		chunks := req.Reply.Slow.chunks(req.Reply.Text)
		if len(chunks) > maxChunks {
			t.Fatalf("%d chunks", len(chunks))
		}
		for _, evs := range [][]event{messagesEvents(req, chunks), responsesEvents(req, chunks), chatEvents(req, chunks)} {
			for _, ev := range evs {
				if _, ok := ev.data.(string); !ok {
					if _, err := json.Marshal(ev.data); err != nil {
						t.Fatalf("event %s: %v", ev.name, err)
					}
				}
			}
		}
		for _, api := range []API{Messages, Responses, ChatCompletions} {
			req.API = api
			if _, err := json.Marshal(whole(req)); err != nil {
				t.Fatalf("%s: %v", api, err)
			}
		}
	})
}

// FuzzMarkers checks that any prompt parses without a panic, and that a
// parsed slow pace stays bounded.
func FuzzMarkers(f *testing.F) {
	for _, s := range []string{"hi [[text:pong]]", `[[tool:mcp__troupe__ask_agent {"q":"]]"}]] x`, "[[slow:3s every 500ms]][[text:a]]",
		"[[sleep:1.5]] [[silent:2s]] [[error:529]] [[drop]]", "[[tool:*]]", "[[text:unclosed", "[[unknown:x]] [[", "[[tool: {}]]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, prompt string) {
		r, _, err := ParseMarkers(prompt)
		if err != nil {
			return
		}
		if n := len(r.Slow.chunks(r.Text)); n > maxChunks {
			t.Fatalf("%d chunks", n)
		}
		if r.Status != 0 && (r.Status < 400 || r.Status > 599) {
			t.Fatalf("status %d", r.Status)
		}
	})
}
