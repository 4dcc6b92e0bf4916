package acp

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/jsonrpc"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// transcript reads testdata/acp_transcript.jsonl (a real `opencode acp`
// run: initialize, session/new, two prompts, the second running bash) and
// returns the agent's lines.
func transcript(t *testing.T) [][]byte {
	t.Helper()
	f, err := os.Open("testdata/acp_transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, maxLine)
	for sc.Scan() {
		var rec struct {
			Dir string          `json:"dir"`
			Msg json.RawMessage `json:"msg"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Dir == "agent->client" {
			lines = append(lines, rec.Msg)
		}
	}
	return lines
}

func TestTranscriptMapping(t *testing.T) {
	lines := transcript(t)
	var m mapper
	var init initializeResult
	var turns [][]engine.Event
	var cur []engine.Event
	for _, l := range lines {
		msg, err := jsonrpc.Parse(l)
		if err != nil {
			t.Fatalf("parse %s: %v", l, err)
		}
		switch {
		case msg.IsResponse():
			id, ok := msg.IntID()
			if !ok {
				t.Fatalf("id %s", msg.ID)
			}
			switch id {
			case 1:
				if err := json.Unmarshal(msg.Result, &init); err != nil {
					t.Fatal(err)
				}
			case 3, 4:
				var res promptResult
				if err := json.Unmarshal(msg.Result, &res); err != nil {
					t.Fatal(err)
				}
				usage, end := m.turnEnd(&res, nil, false)
				m.reset()
				cur = append(cur, *usage, end)
				turns = append(turns, cur)
				cur = nil
			}
		case msg.IsNotification():
			var u updateParams
			if err := json.Unmarshal(msg.Params, &u); err != nil {
				t.Fatal(err)
			}
			cur = append(cur, m.events(u.Update)...)
		}
	}
	if !init.AgentCapabilities.LoadSession || !init.AgentCapabilities.MCPCapabilities.HTTP || init.ProtocolVersion != 1 {
		t.Errorf("initialize %+v", init)
	}
	if len(turns) != 2 {
		t.Fatalf("%d turns", len(turns))
	}
	end := turns[0][len(turns[0])-1]
	if end.Kind != engine.EventTurnEnd || end.Error != "" || end.Text != "Hello from fake model (turn 28)." {
		t.Errorf("turn 1 end %+v", end)
	}
	usage := turns[0][len(turns[0])-2]
	if usage.Usage == nil || usage.Usage.InputTokens != 128 || usage.Usage.OutputTokens != 10 {
		t.Errorf("turn 1 usage %+v", usage)
	}
	var calls, results []engine.Event
	for _, ev := range turns[1] {
		switch ev.Kind {
		case engine.EventToolCall:
			calls = append(calls, ev)
		case engine.EventToolResult:
			results = append(results, ev)
		}
	}
	if len(calls) != 1 || calls[0].Tool.Name != "bash" || calls[0].Tool.ID != "call_728ecfa09c66" {
		t.Errorf("calls %+v", calls)
	}
	if len(results) != 1 || results[0].Tool.IsError || !strings.HasPrefix(results[0].Tool.Output, "hi-from-shell\n") {
		t.Errorf("results %+v", results)
	}
	if end := turns[1][len(turns[1])-1]; !strings.HasPrefix(end.Text, "Tool said: hi-from-shell") {
		t.Errorf("turn 2 end %+v", end)
	}
}

func TestUpdateMapping(t *testing.T) {
	var m mapper
	raw := func(s string) update {
		var u update
		if err := json.Unmarshal([]byte(s), &u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	evs := m.events(raw(`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"}}`))
	if len(evs) != 1 || evs[0].Kind != engine.EventThinking || evs[0].Text != "hmm" {
		t.Errorf("thought %+v", evs)
	}
	evs = m.events(raw(`{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"x"}}`))
	if len(evs) != 0 {
		t.Errorf("image chunk %+v", evs)
	}
	// A call that shows up completed at once: its call and its result.
	evs = m.events(raw(`{"sessionUpdate":"tool_call","toolCallId":"c1","title":"troupe_list_agents","status":"failed","rawInput":{"a":1},"content":[{"type":"content","content":{"type":"text","text":"boom"}},{"type":"diff","path":"/p/x.go"}]}`))
	if len(evs) != 2 || evs[0].Tool.Name != "troupe_list_agents" || string(evs[0].Tool.Input) != `{"a":1}` ||
		!evs[1].Tool.IsError || evs[1].Tool.Output != "boom\nedited /p/x.go" {
		t.Errorf("failed call %+v", evs)
	}
	if evs := m.events(raw(`{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"failed"}`)); len(evs) != 0 {
		t.Errorf("second result %+v", evs)
	}
	m.events(raw(`{"sessionUpdate":"usage_update","used":1,"size":2,"cost":{"amount":0.5,"currency":"USD"}}`))
	usage, end := m.turnEnd(&promptResult{StopReason: "cancelled"}, nil, false)
	if usage == nil || usage.Usage.CostUSD != 0.5 || end.Error != "interrupted" {
		t.Errorf("cancelled: %+v %+v", usage, end)
	}
	_, end = m.turnEnd(nil, errors.New("model failed"), false)
	if end.Error != "model failed" {
		t.Errorf("error end %+v", end)
	}
	_, end = m.turnEnd(&promptResult{StopReason: "refusal"}, nil, false)
	if end.Error != "the agent stopped: refusal" {
		t.Errorf("refusal end %+v", end)
	}
	_, end = m.turnEnd(nil, errors.New("x"), true)
	if end.Error != "interrupted" {
		t.Errorf("interrupted end %+v", end)
	}
}

func TestPermissionOutcome(t *testing.T) {
	opts := []permissionOption{{OptionID: "always", Kind: "allow_always"}, {OptionID: "once", Kind: "allow_once"}, {OptionID: "reject", Kind: "reject_once"}}
	get := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if got := get(permissionOutcome(opts, engine.Decision{Allow: true}, false)); got != `{"outcome":{"optionId":"once","outcome":"selected"}}` {
		t.Errorf("allow: %s", got)
	}
	if got := get(permissionOutcome(opts, engine.Decision{}, false)); got != `{"outcome":{"optionId":"reject","outcome":"selected"}}` {
		t.Errorf("deny: %s", got)
	}
	if got := get(permissionOutcome(opts[:2], engine.Decision{}, false)); got != `{"outcome":{"outcome":"cancelled"}}` {
		t.Errorf("deny without a reject option: %s", got)
	}
	if got := get(permissionOutcome(opts, engine.Decision{Allow: true}, true)); got != `{"outcome":{"outcome":"cancelled"}}` {
		t.Errorf("cancelled: %s", got)
	}
}

// FuzzHandle feeds lines to a mapper and the message decoder: nothing
// panics, and a turn end always comes with a kind.
func FuzzHandle(f *testing.F) {
	for _, l := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"tool_call_update","toolCallId":"c","status":"completed","content":[{"type":"content","content":{"type":"text","text":"x"}}]}}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","usage":{"inputTokens":1}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"session/request_permission","params":{"toolCall":{"toolCallId":"c"},"options":[{"optionId":"a","kind":"allow_once"}]}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"x","data":{"a":1}}}`,
	} {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, err := jsonrpc.Parse(b)
		if err != nil {
			return
		}
		var m mapper
		var u updateParams
		if json.Unmarshal(msg.Params, &u) == nil {
			m.events(u.Update)
		}
		var p permissionParams
		if json.Unmarshal(msg.Params, &p) == nil {
			permissionOutcome(p.Options, engine.Decision{Allow: true}, false)
		}
		var res promptResult
		rerr := error(nil)
		if msg.Error != nil {
			rerr = msg.Error
			_ = rerr.Error()
		}
		if json.Unmarshal(msg.Result, &res) == nil || rerr != nil {
			_, end := m.turnEnd(&res, rerr, false)
			if end.Kind != engine.EventTurnEnd {
				t.Fatalf("end %+v", end)
			}
		}
	})
}

func TestCheck(t *testing.T) {
	gen, oc := New(Options{}), NewOpenCode(Options{})
	field := func(err error) string {
		var fe *troupe.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("error %v is not a FieldError", err)
		}
		return fe.Field
	}
	if f := field(gen.Check(troupe.AgentSpec{})); f != "command" {
		t.Errorf("acp without command: field %s", f)
	}
	if err := gen.Check(troupe.AgentSpec{Command: "x"}); err != nil {
		t.Errorf("acp with command: %v", err)
	}
	if err := oc.Check(troupe.AgentSpec{Model: "fake/m", Options: map[string]any{"tool_timeout": "10m"}}); err != nil {
		t.Errorf("opencode: %v", err)
	}
	for _, c := range []struct {
		e     *Engine
		a     troupe.AgentSpec
		field string
	}{
		{oc, troupe.AgentSpec{Mode: troupe.ModeTerminal}, "mode"},
		{oc, troupe.AgentSpec{PermissionMode: "plan"}, "permission_mode"},
		{gen, troupe.AgentSpec{Command: "x", Model: "m"}, "model"},
		{oc, troupe.AgentSpec{Options: map[string]any{"nope": 1}}, "opencode.nope"},
		{oc, troupe.AgentSpec{Options: map[string]any{"tool_timeout": "1ms"}}, "opencode.tool_timeout"},
		{gen, troupe.AgentSpec{Command: "x", Options: map[string]any{"tool_timeout": 5}}, "acp.tool_timeout"},
	} {
		if f := field(c.e.Check(c.a)); f != c.field {
			t.Errorf("%+v: field %s, want %s", c.a, f, c.field)
		}
	}
	if d := oc.ToolCallLimit(troupe.AgentSpec{}); d != DefaultToolTimeout {
		t.Errorf("default limit %v", d)
	}
	if d := oc.ToolCallLimit(troupe.AgentSpec{Options: map[string]any{"tool_timeout": "10m"}}); d.Minutes() != 10 {
		t.Errorf("limit %v", d)
	}
	if _, b := oc.InputLimit(troupe.AgentSpec{}); b != InputBytes {
		t.Errorf("input limit %d", b)
	}
}

func TestEnv(t *testing.T) {
	environ := []string{"HOME=/h", "PATH=/bin", "OPENAI_API_KEY=sk", "ANTHROPIC_API_KEY=a", "OPENCODE_CONFIG=/c.json",
		"XDG_DATA_HOME=/d", "npm_config_registry=http://r", "CLAUDECODE=1", "SECRET=x"}
	a := troupe.AgentSpec{Env: map[string]string{"FOO": "bar", "CLAUDECODE": "1"}}
	env, err := acpEnv.build(environ, a, options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(env, " "); got != "FOO=bar HOME=/h PATH=/bin XDG_DATA_HOME=/d" {
		t.Errorf("acp env %s", got)
	}
	a = troupe.AgentSpec{Model: "fake/m", Env: map[string]string{"OPENAI_API_KEY": "mine"}}
	env, err = openCodeEnv.build(environ, a, options{toolTimeout: 90e9})
	if err != nil {
		t.Fatal(err)
	}
	want := `HOME=/h OPENAI_API_KEY=mine OPENCODE_CONFIG=/c.json OPENCODE_CONFIG_CONTENT={"experimental":{"mcp_timeout":90000},"model":"fake/m"} PATH=/bin XDG_DATA_HOME=/d npm_config_registry=http://r`
	if got := strings.Join(env, " "); got != want {
		t.Errorf("opencode env\n got %s\nwant %s", got, want)
	}
	a.Env["OPENCODE_CONFIG_CONTENT"] = "{}"
	env, _ = openCodeEnv.build(environ, a, options{toolTimeout: 90e9})
	if !strings.Contains(strings.Join(env, " "), "OPENCODE_CONFIG_CONTENT={} ") {
		t.Errorf("the agent's own config content was replaced: %v", env)
	}
}
