package fake

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/proc"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		line string
		want frame
		err  string
	}{
		{line: `{"type":"start","agent":"a","respond":"!say hi"}`, want: frame{Type: typeStart, Agent: "a", Respond: "!say hi"}},
		{line: `{"type":"input","turn":"t1","messages":[{"from":"@person","kind":"ask","text":"q"}]}`,
			want: frame{Type: typeInput, Turn: "t1", Messages: []wireMessage{{From: "@person", Kind: "ask", Text: "q"}}}},
		{line: `{"type":"tool_call","turn":"t1","id":2,"tool":"reply","args":{ "text" : "x" }}`,
			want: frame{Type: typeToolCall, Turn: "t1", ID: 2, Tool: "reply", Args: json.RawMessage(`{"text":"x"}`)}},
		{line: `{"type":"tool_call","turn":"t1","id":2,"tool":"list_agents"}`,
			want: frame{Type: typeToolCall, Turn: "t1", ID: 2, Tool: "list_agents", Args: json.RawMessage(`{}`)}},
		{line: `{"type":"turn_end","turn":"t1","text":"a\nb","future":true}`, want: frame{Type: typeTurnEnd, Turn: "t1", Text: "a\nb"}},
		{line: `not json`, err: "decode line: invalid character"},
		{line: `{}`, err: `decode line: missing "type"`},
		{line: `{"type":"dance"}`, err: `decode line: unknown frame type "dance"`},
		{line: `{"type":"input","turn":"t1"}`, err: "decode input frame: missing messages"},
		{line: `{"type":"tool_result","id":1}`, err: "decode tool_result frame: missing turn"},
		{line: `{"type":"tool_call","turn":"t","id":1,"tool":"x","args":[1]}`, err: "decode tool_call frame: args must be a JSON object"},
		{line: `{"type":"output","turn":"t","id":"1"}`, err: "decode line: json: cannot unmarshal"},
		{line: `{"type":"permission","turn":"t1","id":2,"tool":"Bash"}`, want: frame{Type: typePermission, Turn: "t1", ID: 2, Tool: "Bash", Args: json.RawMessage(`{}`)}},
		{line: `{"type":"decision","turn":"t1","id":2,"reason":"no"}`, want: frame{Type: typeDecision, Turn: "t1", ID: 2, Reason: "no"}},
		{line: `{"type":"decision","turn":"t1"}`, err: "decode decision frame: missing id"},
		{line: `{"type":"tool_use","turn":"t","id":1,"tool":"x","args":"s"}`, err: "decode tool_use frame: args must be a JSON object"},
	}
	for _, tc := range tests {
		got, err := decode([]byte(tc.line))
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("decode %s: error %v, want %q", tc.line, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("decode %s = %+v, %v; want %+v", tc.line, got, err, tc.want)
		}
	}
}

// FuzzDecode checks that no line makes the protocol decoder panic, and that
// a decoded frame survives an encode/decode round trip unchanged.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"start","agent":"a","respond":"!say hi\n!ask b {text}"}`,
		`{"type":"input","turn":"t1","messages":[{"from":"@person","kind":"message","text":"hello"}]}`,
		`{"type":"tool_result","turn":"t1","id":1,"result":"42","error":""}`,
		`{"type":"interrupt","turn":"t1"}`,
		`{"type":"tool_call","turn":"t1","id":1,"tool":"ask_agent","args":{"to":"b","question":"q"}}`,
		`{"type":"turn_end","turn":"t1","text":"x","error":"interrupted"}`,
		`{"type":"ready"}`,
		`{"type":"thinking","turn":"t1","text":"hmm"}`,
		`{"type":"tool_use","turn":"t1","id":3,"tool":"reply","args":{"text":"x"}}`,
		`{"type":"tool_done","turn":"t1","id":3,"result":"ok","error":""}`,
		`{"type":"permission","turn":"t1","id":4,"tool":"Bash","args":{"command":"ls"}}`,
		`{"type":"decision","turn":"t1","id":4,"allow":false,"reason":"no"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fr, err := decode(line)
		if err != nil {
			return
		}
		b, err := encode(fr)
		if err != nil {
			t.Fatalf("encode %+v: %v", fr, err)
		}
		again, err := decode(bytes.TrimSuffix(b, []byte("\n")))
		if err != nil {
			t.Fatalf("decode of encoded %s: %v", b, err)
		}
		if !reflect.DeepEqual(normal(fr), normal(again)) {
			t.Fatalf("round trip changed the frame:\n%+v\n%+v", fr, again)
		}
	})
}

// normal makes empty and nil slices alike, as omitempty does.
func normal(f frame) frame {
	if len(f.Messages) == 0 {
		f.Messages = nil
	}
	if len(f.Args) == 0 {
		f.Args = nil
	}
	return f
}

func TestParseStep(t *testing.T) {
	tests := []struct {
		line string
		want step
		err  string
	}{
		{line: "just words", want: step{line: "just words"}},
		{line: "  !say   hello  world  ", want: step{name: "say", args: []string{"hello  world"}, line: "  !say   hello  world  "}},
		{line: "!say", want: step{name: "say", args: []string{""}, line: "!say"}},
		{line: "!ask\tresearcher  what now?", want: step{name: "ask", args: []string{"researcher", "what now?"}, line: "!ask\tresearcher  what now?"}},
		{line: `!tool list_agents`, want: step{name: "tool", args: []string{"list_agents", ""}, line: "!tool list_agents"}},
		{line: "!crash", want: step{name: "crash", line: "!crash"}},
		{line: "!", err: `unknown directive "!": see the fake engine's directives`},
		{line: "!SAY hi", err: `unknown directive "!SAY": see the fake engine's directives`},
		{line: "!stream 1s", err: `!stream: missing arguments: write "!stream DUR EVERY"`},
		{line: "!crash now", err: `!crash: takes no arguments: write "!crash"`},
	}
	for _, tc := range tests {
		got, err := parseStep(tc.line)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("parseStep(%q): error %v, want %q", tc.line, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseStep(%q) = %+v, %v; want %+v", tc.line, got, err, tc.want)
		}
	}
}

func TestHasDirectives(t *testing.T) {
	for text, want := range map[string]bool{
		"hello":              false,
		"Hello! how are you": false,
		"first\n  !say hi":   true,
		"!say hi":            true,
		"":                   false,
	} {
		if got := hasDirectives(text); got != want {
			t.Errorf("hasDirectives(%q) = %v, want %v", text, got, want)
		}
	}
}

func TestExpandJSON(t *testing.T) {
	v := vars{text: "say \"hi\"\n", from: "a", result: `\`}
	got := v.expandJSON(`{"t":"{text}","f":"{from}","r":"{result}"}`)
	var m map[string]string
	if err := json.Unmarshal([]byte(got), &m); err != nil {
		t.Fatalf("expanded JSON %s: %v", got, err)
	}
	if m["t"] != v.text || m["f"] != v.from || m["r"] != v.result {
		t.Errorf("expanded to %v", m)
	}
}

// TestChildProtocol runs the child's program in-process on pipes: it skips
// bad lines (saying so on stderr), answers a start with ready, runs a turn,
// and exits 0 at end of input.
func TestChildProtocol(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		c := runChild(inR, outW, &stderr)
		outW.Close()
		code <- c
	}()
	lines := bufio.NewScanner(outR)
	read := func() frame {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("child output ended: %v", lines.Err())
		}
		f, err := decode(lines.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	io.WriteString(inW, `{"type":"start","agent":"a"}`+"\n")
	if f := read(); f.Type != typeReady {
		t.Fatalf("got %+v, want ready", f)
	}
	io.WriteString(inW, "not json\n"+`{"type":"interrupt","turn":"old"}`+"\n"+
		`{"type":"input","turn":"t1","messages":[{"from":"b","text":"!tool x {\"a\":1}\n!say {result}"}]}`+"\n")
	if f := read(); f.Type != typeToolCall || f.Tool != "x" || string(f.Args) != `{"a":1}` || f.ID != 1 {
		t.Fatalf("got %+v, want tool call 1", f)
	}
	io.WriteString(inW, `{"type":"tool_result","turn":"t1","id":7,"result":"stale"}`+"\n"+
		`{"type":"tool_result","turn":"t1","id":1,"result":"fresh"}`+"\n")
	if f := read(); f.Type != typeOutput || f.Text != "fresh" {
		t.Fatalf("got %+v, want output fresh", f)
	}
	if f := read(); f.Type != typeTurnEnd || f.Text != "fresh" || f.Error != "" {
		t.Fatalf("got %+v, want turn end", f)
	}
	inW.Close()
	if c := <-code; c != 0 {
		t.Errorf("exit status %d at end of input", c)
	}
	if !strings.Contains(stderr.String(), "decode line: invalid character") {
		t.Errorf("stderr %q does not mention the bad line", stderr.String())
	}
}

func TestChildRefusesABadStart(t *testing.T) {
	var stderr bytes.Buffer
	in := strings.NewReader(`{"type":"interrupt","turn":"t"}` + "\n")
	if c := runChild(in, io.Discard, &stderr); c != 2 || !strings.Contains(stderr.String(), "first line must be a start frame") {
		t.Errorf("status %d, stderr %q", c, stderr.String())
	}
}

func TestChildEnv(t *testing.T) {
	t.Setenv("CLAUDE_CODE_SSE_PORT", "1")
	t.Setenv("GORACE", "halt_on_error=1")
	env := childEnv(map[string]string{"CLAUDECODE": "1", "X": "y"})
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	if m["X"] != "y" || m[ChildEnv] != "1" || m["GORACE"] != "halt_on_error=1" {
		t.Errorf("env %v", env)
	}
	for k := range m {
		if slices.Contains(proc.NestedSessionVars, k) {
			t.Errorf("env has %s", k)
		}
	}
}

// FuzzParseSteps checks that no message text makes the directive parser
// panic, and that parsed directives have all their argument slots.
func FuzzParseSteps(f *testing.F) {
	for _, s := range []string{"hello", "!say hi\n!ask b {text}", "!stream 1s 10ms\n\n  !tool x {}", "!\t", "!fail",
		"!think about {text}\n!permission Bash {\"command\":\"ls\"}\n!say {decision}", "!permission"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		steps, line, err := parseSteps(text)
		if err != nil {
			if line < 1 {
				t.Fatalf("error %v at line %d", err, line)
			}
			return
		}
		for _, s := range steps {
			if s.name != "" && len(s.args) != directives[s.name].args {
				t.Fatalf("step %+v has %d args, want %d", s, len(s.args), directives[s.name].args)
			}
		}
	})
}

// TestInputBytesFitsTheLineLimit: a turn of InputBytes of text (the most
// the runtime gives a fake agent), whatever the bytes, makes an input frame
// within maxLine, which the child's reader takes.
func TestInputBytesFitsTheLineLimit(t *testing.T) {
	for _, fill := range []string{"a", "\x01", "\xff", "<"} {
		text := strings.Repeat(fill, InputBytes)
		line, err := encode(frame{Type: typeInput, Turn: "t1", Messages: []wireMessage{{ID: 1, From: "lead", Kind: "message", Text: text}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(line) > maxLine {
			t.Errorf("frame of %d bytes of %q is %d bytes, over the %d-byte line limit", InputBytes, fill, len(line), maxLine)
		}
		if _, err := decode(line[:len(line)-1]); err != nil {
			t.Errorf("decode the frame of %q: %v", fill, err)
		}
	}
}
