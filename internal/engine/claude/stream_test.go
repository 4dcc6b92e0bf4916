package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
)

// readFixture returns the lines of a stream-json fixture (copied from
// /work/shared/fixtures/claude-code/stream-json; 19 is the CLI's side of
// its transcript).
func readFixture(t testing.TB, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "stream-json", name))
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, maxLine)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	return lines
}

// mapLines maps lines as the session does, without the turn bookkeeping:
// a result gives usage and a turn end (interrupted as the session would
// know it), anything else the mapper's events.
func mapLines(t testing.TB, lines [][]byte, interrupted bool) []engine.Event {
	t.Helper()
	m := mapper{now: func() time.Time { return fixtureNow }}
	var evs []engine.Event
	for i, b := range lines {
		l, err := parseLine(b)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if l.Type == "result" {
			u, end := m.turnEnd(l, interrupted)
			evs = append(evs, u, end)
			continue
		}
		evs = append(evs, m.events(l)...)
	}
	return evs
}

// fixtureNow is the clock of mapLines: when fixtures 20 and 21 were
// captured (the limit's reset is 2 h after it in 21).
var fixtureNow = time.Unix(1796154000, 0)

// summary writes events as short strings for comparison.
func summary(evs []engine.Event) []string {
	var out []string
	for _, ev := range evs {
		switch ev.Kind {
		case engine.EventToolCall:
			out = append(out, fmt.Sprintf("tool_call %s %s %s", ev.Tool.Name, ev.Tool.ID, ev.Tool.Input))
		case engine.EventToolResult:
			out = append(out, fmt.Sprintf("tool_result %s error=%v %s", ev.Tool.ID, ev.Tool.IsError, ev.Tool.Output))
		case engine.EventUsage:
			out = append(out, fmt.Sprintf("usage in=%d out=%d cost=%.6f", ev.Usage.InputTokens, ev.Usage.OutputTokens, math.Round(ev.Usage.CostUSD*1e6)/1e6))
		case engine.EventTurnEnd:
			s := fmt.Sprintf("turn_end text=%q error=%q", ev.Text, ev.Error)
			if ev.Limit != nil {
				s += fmt.Sprintf(" limit_until=%d", unixOrZero(ev.Limit.Until))
			}
			out = append(out, s)
		default:
			out = append(out, fmt.Sprintf("%s %s", ev.Kind, ev.Text))
		}
	}
	return out
}

// unixOrZero is t's Unix seconds, 0 for the zero time.
func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func TestMapFixtures(t *testing.T) {
	const askDenied = "Claude requested permissions to use mcp__agents__ask_agent, but you haven't granted it yet."
	const err529 = "API Error: 529 fake error 529. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:8765)."
	const limited429 = "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later."
	const limited5h = "You've hit your 5-hour limit · resets 9:46pm (UTC)"
	const refused = "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)"
	tests := []struct {
		file string
		want []string
	}{
		{"01_print_hello.jsonl", []string{
			"output Echo: hello",
			"usage in=12222 out=9 cost=0.049068",
			`turn_end text="Echo: hello" error=""`,
		}},
		{"05_mcp_tool_denied_default_mode.jsonl", []string{
			"output Calling tool mcp__agents__ask_agent",
			`tool_call mcp__agents__ask_agent toolu_d4464544031946f38039724e {"agent": "bob", "question": "what is 6*7?"}`,
			"tool_result toolu_d4464544031946f38039724e error=true " + askDenied,
			"output TOOL_RESULT_SEEN: " + askDenied,
			"usage in=25219 out=86 cost=0.102596",
			`turn_end text="TOOL_RESULT_SEEN: ` + askDenied + `" error=""`,
		}},
		{"06_mcp_tool_roundtrip_allowed.jsonl", []string{
			"output Calling tool mcp__agents__ask_agent",
			`tool_call mcp__agents__ask_agent toolu_a1511d69a7794c2a86d69d02 {"agent": "bob", "question": "what is 6*7?"}`,
			"tool_result toolu_a1511d69a7794c2a86d69d02 error=false agent bob answers: 42 (question was: what is 6*7?)",
			"output TOOL_RESULT_SEEN: agent bob answers: 42 (question was: what is 6*7?)",
			"usage in=25211 out=76 cost=0.102364",
			`turn_end text="TOOL_RESULT_SEEN: agent bob answers: 42 (question was: what is 6*7?)" error=""`,
		}},
		{"09_include_partial_messages.jsonl", []string{ // the deltas, not the whole block again
			"output Hello partial world,",
			"output  this text arrives i",
			"output n several deltas.",
			"usage in=12543 out=21 cost=0.050592",
			`turn_end text="Hello partial world, this text arrives in several deltas." error=""`,
		}},
		{"12_api_error_529_one_retry.jsonl", []string{
			"output " + err529,
			"usage in=0 out=0 cost=0.000000",
			`turn_end text="" error="` + err529 + `"`,
		}},
		// A 429 with an API key: the CLI passes on no reset time.
		{"20_limit_api_key.jsonl", []string{
			"output " + limited429,
			"usage in=0 out=0 cost=0.000000",
			`turn_end text="" error="` + limited429 + `" limit_until=0`,
		}},
		// A usage limit with a claude.ai login: rate_limit_event says when.
		{"21_limit_claude_ai.jsonl", []string{
			"output " + limited5h,
			"usage in=0 out=0 cost=0.000000",
			`turn_end text="" error="` + limited5h + `" limit_until=1796161598`,
		}},
		{"13_api_error_400.jsonl", []string{
			"output API Error: 400 fake error 400",
			"usage in=0 out=0 cost=0.000000",
			`turn_end text="" error="API Error: 400 fake error 400"`,
		}},
		{"14_connection_refused.jsonl", []string{
			"output " + refused,
			"usage in=0 out=0 cost=0.000000",
			`turn_end text="" error="` + refused + `"`,
		}},
		{"15_resume_unknown_id.jsonl", []string{
			"usage in=0 out=0 cost=0.000000",
			`turn_end text="" error="No conversation found with session ID: 99999999-2222-4333-8444-555555555555"`,
		}},
		{"18_stdin_stream_json_session.jsonl", []string{ // four turns; the third interrupted; costs per turn
			"output Echo: long turn [[sleep:3]]",
			"usage in=12530 out=13 cost=0.050380",
			`turn_end text="Echo: long turn [[sleep:3]]" error=""`,
			"output QUEUED-REPLY",
			"usage in=12571 out=10 cost=0.050484",
			`turn_end text="QUEUED-REPLY" error=""`,
			"usage in=0 out=0 cost=0.000000",
			`turn_end text="" error="interrupted"`,
			"output AFTER",
			"usage in=12637 out=8 cost=0.050708",
			`turn_end text="AFTER" error=""`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got := summary(mapLines(t, readFixture(t, tt.file), false))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// A failed result of a turn troupe interrupted is "interrupted", whatever
// the CLI's reason; a successful one (the turn ended first) stays a
// success.
func TestTurnEndInterrupted(t *testing.T) {
	var m mapper
	_, end := m.turnEnd(line{Type: "result", IsError: true, Result: "API Error: 500 x"}, true)
	if end.Error != "interrupted" {
		t.Errorf("interrupted failed turn: error %q", end.Error)
	}
	_, end = m.turnEnd(line{Type: "result", Result: "done"}, true)
	if end.Error != "" || end.Text != "done" {
		t.Errorf("interrupt after the end: %+v", end)
	}
	_, end = m.turnEnd(line{Type: "result", IsError: true, TerminalReason: "max_turns"}, false)
	if end.Error != "turn failed: max_turns" {
		t.Errorf("failed turn without text: error %q", end.Error)
	}
}

func TestLostResume(t *testing.T) {
	for _, tt := range []struct {
		file string
		want bool
	}{
		{"15_resume_unknown_id.jsonl", true},
		{"13_api_error_400.jsonl", false},
		{"18_stdin_stream_json_session.jsonl", false},
	} {
		lost := false
		for _, b := range readFixture(t, tt.file) {
			l, err := parseLine(b)
			if err != nil {
				t.Fatal(err)
			}
			lost = lost || l.lostResume()
		}
		if lost != tt.want {
			t.Errorf("%s: lostResume %v, want %v", tt.file, lost, tt.want)
		}
	}
}

// The can_use_tool request of fixture 19 decodes, and troupe's answer has
// the exact shape the CLI took there.
func TestPermissionRequestAndAnswer(t *testing.T) {
	var req line
	for _, b := range readFixture(t, "19_permission_prompt_tool_stdio.jsonl") {
		l, err := parseLine(b)
		if err != nil {
			t.Fatal(err)
		}
		if l.Type == "control_request" {
			req = l
		}
	}
	if req.Request == nil || req.Request.Subtype != "can_use_tool" || req.Request.ToolName != "mcp__agents__ask_agent" ||
		req.RequestID != "4e987a8d-d4a2-4d19-940b-0bf780767e63" || req.Request.ToolUseID != "toolu_89b9f85222374b1c819cad2b" || req.Request.DisplayName != "Ask Agent" {
		t.Fatalf("control request %+v / %+v", req, req.Request)
	}
	got, err := permissionResponse(req.RequestID, req.Request.Input, engine.Decision{Allow: true})
	if err != nil {
		t.Fatal(err)
	}
	sent := readFixture(t, "19_permission_prompt_tool_stdio.input.jsonl")[1] // what the host answered
	if !jsonEqual(t, got, sent) {
		t.Errorf("allow answer\n%s\nwant\n%s", got, sent)
	}
	got, err = permissionResponse(req.RequestID, req.Request.Input, engine.Decision{Reason: "no, thanks"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"control_response","response":{"subtype":"success","request_id":"4e987a8d-d4a2-4d19-940b-0bf780767e63","response":{"behavior":"deny","message":"no, thanks"}}}`
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("deny answer\n%s\nwant\n%s", got, want)
	}
	if got[len(got)-1] != '\n' {
		t.Error("answer is not one line")
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// The lines troupe writes have the shapes of docs/engines/claude-code.md
// ("Stream-json input") and fixture 18.
func TestInputLines(t *testing.T) {
	b, err := userInput("hello \"there\"\nsecond line")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"user","message":{"role":"user","content":"hello \"there\"\nsecond line"}}` + "\n"; string(b) != want {
		t.Errorf("user line %s, want %s", b, want)
	}
	b, err = interruptRequest("troupe-interrupt-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"control_request","request_id":"troupe-interrupt-1","request":{"subtype":"interrupt"}}` + "\n"; string(b) != want {
		t.Errorf("interrupt line %s, want %s", b, want)
	}
}

func TestParseLineBad(t *testing.T) {
	for _, in := range []string{"{", "not json", `[1,2]`, `"x"`} {
		if _, err := parseLine([]byte(in)); err == nil {
			t.Errorf("parseLine(%q): no error", in)
		}
	}
	if l, err := parseLine([]byte("  \n")); err != nil || l.Type != "" {
		t.Errorf("blank line: %+v, %v", l, err)
	}
	// A field of another type is left zero, the rest decoded.
	if l, err := parseLine([]byte(`{"type":"system","subtype":"permission_denied","message":"no"}`)); err != nil || l.Subtype != "permission_denied" || (l.Message != nil && len(l.Message.Content) != 0) {
		t.Errorf("string message: %+v, %v", l, err)
	}
	// Content as a plain string, a subagent's message, an unknown type.
	var m mapper
	l, _ := parseLine([]byte(`{"type":"assistant","message":{"id":"m","content":"plain"}}`))
	if got := summary(m.events(l)); !reflect.DeepEqual(got, []string{"output plain"}) {
		t.Errorf("string content: %q", got)
	}
	l, _ = parseLine([]byte(`{"type":"assistant","parent_tool_use_id":"toolu_1","message":{"id":"m2","content":[{"type":"text","text":"sub"}]}}`))
	if evs := m.events(l); len(evs) != 0 {
		t.Errorf("subagent message: %+v", evs)
	}
	l, _ = parseLine([]byte(`{"type":"assistant","message":{"id":"m3","content":[{"type":"thinking","thinking":"hmm"},{"type":"tool_use","id":"t","name":"Read"}]}}`))
	if got := summary(m.events(l)); !reflect.DeepEqual(got, []string{"thinking hmm", "tool_call Read t {}"}) {
		t.Errorf("thinking and tool call: %q", got)
	}
}

// FuzzParseLine feeds the line parser and the mapper arbitrary lines (seeds:
// every fixture line, in testdata/fuzz too): no panic, and a line that
// parses maps without one.
func FuzzParseLine(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "stream-json", "*.jsonl"))
	for _, file := range files {
		for _, b := range readFixture(f, filepath.Base(file)) {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := parseLine(b)
		if err != nil {
			return
		}
		var m mapper
		m.events(l)
		m.turnEnd(l, false)
		l.lostResume()
		l.errorText()
	})
}

// TestBashLimit: a Bash call's own timeout (milliseconds) is its limit;
// other tools, and a Bash call without one, state none.
func TestBashLimit(t *testing.T) {
	for _, c := range []struct {
		name, input string
		want        time.Duration
	}{
		{"Bash", `{"command":"go test ./...","timeout":600000}`, 10 * time.Minute},
		{"Bash", `{"command":"ls","timeout":1500.5}`, 1500500 * time.Microsecond},
		{"Bash", `{"command":"ls"}`, 0},
		{"Bash", `{"command":"ls","timeout":-1}`, 0},
		{"Read", `{"file_path":"x","timeout":5000}`, 0},
	} {
		if got := bashLimit(c.name, json.RawMessage(c.input)); got != c.want {
			t.Errorf("bashLimit(%s, %s) = %v, want %v", c.name, c.input, got, c.want)
		}
	}
}

// The reset time a rate_limit_event gives is the CLI's word: one years
// away is cut to a day, one in the past is now; a refusal the CLI later
// says is over (a retry went through) makes no limit of a later failure,
// and a turn that failed otherwise has none.
func TestLimitBoundsTheCLIsResetTime(t *testing.T) {
	const result429 = `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"api_error_type":"rate_limit_error","result":"API Error: Request rejected (429)"}`
	const result500 = `{"type":"result","subtype":"success","is_error":true,"api_error_status":500,"result":"API Error: 500"}`
	event := func(status string, resetsAt string) string {
		return `{"type":"rate_limit_event","rate_limit_info":{"status":"` + status + `","resetsAt":` + resetsAt + `}}`
	}
	now := fixtureNow.Unix()
	tests := []struct {
		name  string
		lines []string
		want  string // the turn end's limit_until, "" for no limit
	}{
		{"years away", []string{event("rejected", "99999999999999999999"), result429}, fmt.Sprint(now + int64(engine.MaxLimitWait/time.Second))},
		{"in the past", []string{event("rejected", "1000"), result429}, fmt.Sprint(now)},
		{"negative", []string{event("rejected", "-5"), result429}, "0"},
		{"said by the event only", []string{event("rejected", fmt.Sprint(now+60)), result500}, fmt.Sprint(now + 60)},
		{"over before the failure", []string{event("rejected", fmt.Sprint(now+60)), event("allowed", "0"), result500}, ""},
		{"another failure", []string{result500}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lines [][]byte
			for _, l := range tt.lines {
				lines = append(lines, []byte(l))
			}
			evs := mapLines(t, lines, false)
			end := evs[len(evs)-1]
			got := ""
			if end.Limit != nil {
				got = fmt.Sprint(unixOrZero(end.Limit.Until))
			}
			if got != tt.want {
				t.Errorf("limit_until %q, want %q (%+v)", got, tt.want, end)
			}
		})
	}
}
