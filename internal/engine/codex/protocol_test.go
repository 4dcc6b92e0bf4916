package codex

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/jsonrpc"
)

// transcript reads the server's messages of a captured app-server run
// (shared/fixtures/codex/app_server_transcript.jsonl: initialize,
// thread/start and two turns, text then a shell command).
func transcript(t testing.TB) [][]byte {
	t.Helper()
	f, err := os.Open("testdata/app_server_transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Dir string          `json:"dir"`
			Msg json.RawMessage `json:"msg"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Dir == "server->client" {
			out = append(out, l.Msg)
		}
	}
	return out
}

func TestTranscriptMapping(t *testing.T) {
	var (
		m     mapper
		turns [][]engine.Event
		cur   []engine.Event
	)
	for _, b := range transcript(t) {
		msg, err := jsonrpc.Parse(b)
		if err != nil {
			t.Fatalf("parse %s: %v", b, err)
		}
		if msg.Method == "" {
			if msg.ID == nil {
				t.Fatalf("response without id: %s", b)
			}
			continue
		}
		if msg.Method == "turn/completed" {
			cur = append(cur, m.turnEnd(msg.Params, false))
			turns, cur, m = append(turns, cur), nil, mapper{}
			continue
		}
		cur = append(cur, m.events(msg.Method, msg.Params)...)
	}
	if len(turns) != 2 {
		t.Fatalf("%d turns, want 2", len(turns))
	}
	// Turn 1: streamed text, usage, the end with the whole text.
	var out strings.Builder
	var usage *engine.Usage
	for _, ev := range turns[0] {
		switch ev.Kind {
		case engine.EventOutput:
			out.WriteString(ev.Text)
		case engine.EventUsage:
			usage = ev.Usage
		}
	}
	end := turns[0][len(turns[0])-1]
	if out.String() != "Hello from fake model (turn 13)." || end.Kind != engine.EventTurnEnd || end.Text != out.String() || end.Error != "" {
		t.Fatalf("turn 1: output %q, end %+v", out.String(), end)
	}
	if usage == nil || usage.InputTokens != 113 || usage.OutputTokens != 10 {
		t.Fatalf("turn 1 usage %+v", usage)
	}
	// Turn 2: a shell call and its result, then the answer; usage summed
	// over the turn's two model requests.
	var call, result *engine.ToolUse
	for _, ev := range turns[1] {
		switch ev.Kind {
		case engine.EventToolCall:
			call = ev.Tool
		case engine.EventToolResult:
			result = ev.Tool
		case engine.EventUsage:
			usage = ev.Usage
		}
	}
	if call == nil || call.Name != toolShell || !strings.Contains(string(call.Input), "echo hi-from-shell") {
		t.Fatalf("turn 2 call %+v", call)
	}
	if result == nil || result.ID != call.ID || result.IsError || !strings.Contains(result.Output, "hi-from-shell") {
		t.Fatalf("turn 2 result %+v", result)
	}
	if usage.InputTokens != 114+115 || usage.OutputTokens != 20 {
		t.Fatalf("turn 2 usage %+v", usage)
	}
	if end := turns[1][len(turns[1])-1]; !strings.HasPrefix(end.Text, "Tool said:") || end.Error != "" {
		t.Fatalf("turn 2 end %+v", end)
	}
}

func TestItemMapping(t *testing.T) {
	cases := []struct {
		name, method, params string
		want                 engine.Event
	}{
		{"mcp call", "item/started", `{"item":{"type":"mcpToolCall","id":"c1","server":"troupe","tool":"ask_agent","arguments":{"to":"b"},"status":"inProgress"}}`,
			engine.Event{Kind: engine.EventToolCall, Tool: &engine.ToolUse{ID: "c1", Name: "mcp__troupe__ask_agent", Input: json.RawMessage(`{"to":"b"}`)}}},
		{"mcp result", "item/completed", `{"item":{"type":"mcpToolCall","id":"c1","server":"troupe","tool":"ask_agent","result":{"content":[{"type":"text","text":"4"}]},"status":"completed"}}`,
			engine.Event{Kind: engine.EventToolResult, Tool: &engine.ToolUse{ID: "c1", Output: "4"}}},
		{"mcp error", "item/completed", `{"item":{"type":"mcpToolCall","id":"c1","error":{"message":"timed out"},"status":"failed"}}`,
			engine.Event{Kind: engine.EventToolResult, Tool: &engine.ToolUse{ID: "c1", Output: "timed out", IsError: true}}},
		{"file change", "item/started", `{"item":{"type":"fileChange","id":"f1","changes":[{"path":"/p/x","kind":{"type":"add"},"diff":"+hi"}],"status":"inProgress"}}`,
			engine.Event{Kind: engine.EventToolCall, Tool: &engine.ToolUse{ID: "f1", Name: toolPatch, Input: json.RawMessage(`{"changes":[{"path":"/p/x","kind":"add","diff":"+hi"}]}`)}}},
		{"file change declined", "item/completed", `{"item":{"type":"fileChange","id":"f1","changes":[{"path":"/p/x","kind":"add","diff":""}],"status":"declined"}}`,
			engine.Event{Kind: engine.EventToolResult, Tool: &engine.ToolUse{ID: "f1", Output: "add /p/x", IsError: true}}},
		{"failed command", "item/completed", `{"item":{"type":"commandExecution","id":"x","command":"false","aggregatedOutput":"","exitCode":1,"status":"failed"}}`,
			engine.Event{Kind: engine.EventToolResult, Tool: &engine.ToolUse{ID: "x", Output: "failed", IsError: true}}},
		{"reasoning", "item/completed", `{"item":{"type":"reasoning","id":"r","summary":["**Thinking**"],"content":[]}}`,
			engine.Event{Kind: engine.EventThinking, Text: "**Thinking**"}},
		{"unstreamed message", "item/completed", `{"item":{"type":"agentMessage","id":"m","text":"whole"}}`,
			engine.Event{Kind: engine.EventOutput, Text: "whole"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m mapper
			evs := m.events(c.method, json.RawMessage(c.params))
			if len(evs) != 1 {
				t.Fatalf("events %+v", evs)
			}
			got, _ := json.Marshal(evs[0])
			want, _ := json.Marshal(c.want)
			if string(got) != string(want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func TestTurnEnd(t *testing.T) {
	cases := []struct {
		name, params, lastError string
		asked                   bool
		want                    string
	}{
		{"completed", `{"turn":{"id":"a","status":"completed"}}`, "", false, ""},
		{"failed with its error", `{"turn":{"id":"a","status":"failed","error":{"message":"boom"}}}`, "earlier", false, "boom"},
		{"failed, last error", `{"turn":{"id":"a","status":"failed","error":null}}`, "stream disconnected", false, "stream disconnected"},
		{"failed, nothing said", `{"turn":{"id":"a","status":"failed"}}`, "", false, "codex turn failed"},
		{"interrupted", `{"turn":{"id":"a","status":"interrupted"}}`, "", false, interrupted},
		{"failed after an interrupt", `{"turn":{"id":"a","status":"failed"}}`, "x", true, interrupted},
		{"unreadable", `[`, "", false, "codex ended the turn with an unreadable turn/completed: unexpected end of JSON input"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := mapper{lastError: c.lastError}
			if ev := m.turnEnd(json.RawMessage(c.params), c.asked); ev.Error != c.want || ev.Kind != engine.EventTurnEnd {
				t.Fatalf("turn end %+v, want error %q", ev, c.want)
			}
		})
	}
}

func TestErrorNotificationIsRemembered(t *testing.T) {
	var m mapper
	m.events("error", json.RawMessage(`{"error":{"message":"We’re currently experiencing high demand"},"willRetry":false,"threadId":"t","turnId":"u"}`))
	if ev := m.turnEnd(json.RawMessage(`{"turn":{"status":"failed"}}`), false); ev.Error != "We’re currently experiencing high demand" {
		t.Fatalf("turn end %+v", ev)
	}
}

// FuzzMessage feeds any line through the decoding and the mapping, as the
// reader does: no panic, and every event has a kind.
func FuzzMessage(f *testing.F) {
	for _, b := range transcript(f) {
		f.Add(b)
	}
	f.Add([]byte(`{"method":"item/completed","params":{"item":{"type":"fileChange","changes":[{"kind":7}]}}}`))
	f.Add([]byte(`{"method":"turn/completed","params":{"turn":{"status":"failed","error":{"message":"x"}}}}`))
	f.Add([]byte(`{"method":"error","params":{"error":{"message":"m"},"willRetry":true}}`))
	f.Add([]byte(`{"id":"a","method":"item/fileChange/requestApproval","params":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, err := jsonrpc.Parse(b)
		if err != nil {
			return
		}
		var m mapper
		for _, ev := range m.events(msg.Method, msg.Params) {
			if ev.Kind == "" {
				t.Fatalf("event without a kind from %s", b)
			}
		}
		if ev := m.turnEnd(msg.Params, false); ev.Kind != engine.EventTurnEnd {
			t.Fatalf("turn end %+v", ev)
		}
	})
}

// limitLines reads testdata/limit_429.jsonl, captured from codex
// app-server 0.171.0 on the fake model's [[limit:…]]: a reconnect Codex
// will retry, the error it gave up on, and the failed turn/completed.
func limitLines(t *testing.T) (retrying, gaveUp, failed json.RawMessage) {
	t.Helper()
	b, err := os.ReadFile("testdata/limit_429.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var params []json.RawMessage
	for l := range strings.Lines(string(b)) {
		var n struct {
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal([]byte(l), &n); err != nil {
			t.Fatal(err)
		}
		params = append(params, n.Params)
	}
	if len(params) != 3 {
		t.Fatalf("%d lines in limit_429.jsonl, want 3", len(params))
	}
	return params[0], params[1], params[2]
}

// A turn Codex failed on HTTP 429 ends with Limit set and Until zero
// (Codex passes on no reset time); a reconnect Codex retries is no limit
// of a turn that then completes; an error of another kind is no limit,
// whatever its codexErrorInfo's shape.
func TestTurnEndLimit(t *testing.T) {
	retrying, gaveUp, failed := limitLines(t)
	failedWith := func(info string) json.RawMessage {
		return json.RawMessage(`{"turn":{"id":"x","status":"failed","error":{"message":"boom","codexErrorInfo":` + info + `}}}`)
	}
	completed := json.RawMessage(`{"turn":{"id":"x","status":"completed","items":[{"type":"agentMessage","id":"m","text":"done"}]}}`)
	tests := []struct {
		name      string
		errors    []json.RawMessage // error notifications before the end
		end       json.RawMessage
		wantLimit bool
	}{
		{"gave up on 429", []json.RawMessage{retrying, gaveUp}, failed, true},
		{"retried then answered", []json.RawMessage{retrying}, completed, false},
		{"usage limit by name", nil, failedWith(`"usageLimitExceeded"`), true},
		{"rate limit object", nil, failedWith(`{"rateLimitExceeded":{}}`), true},
		{"server error", nil, failedWith(`{"responseTooManyFailedAttempts":{"httpStatusCode":500}}`), false},
		{"other name", nil, failedWith(`"internalServerError"`), false},
		{"a number", nil, failedWith(`429`), false},
		{"wrong detail type", nil, failedWith(`{"responseTooManyFailedAttempts":{"httpStatusCode":"429"}}`), false},
		{"null", nil, failedWith(`null`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m mapper
			for _, p := range tt.errors {
				m.events("error", p)
			}
			end := m.turnEnd(tt.end, false)
			if (end.Limit != nil) != tt.wantLimit {
				t.Fatalf("turn end %+v, want a limit: %v", end, tt.wantLimit)
			}
			if end.Limit != nil && !end.Limit.Until.IsZero() {
				t.Errorf("limit until %v, want zero", end.Limit.Until)
			}
		})
	}
	var m mapper
	m.events("error", gaveUp)
	if end := m.turnEnd(failed, false); end.Error != "exceeded retry limit, last status: 429 Too Many Requests" {
		t.Errorf("error %q, want Codex's words", end.Error)
	}
}
