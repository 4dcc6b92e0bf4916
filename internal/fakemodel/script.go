package fakemodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Reply is what the model does for one request. The zero Reply answers an
// empty text at once.
type Reply struct {
	Text  string     // the answer text; with Calls, a text block before them
	Calls []ToolCall // tool calls, in order (stop reason tool_use / tool_calls)

	Delay   time.Duration // send nothing at all (no headers) for this long first
	Silence time.Duration // start the stream (headers and its first event), then nothing for this long
	Slow    Pace          // spread the text over this much time

	Hold <-chan struct{} // if set, wait (after Delay) until it is closed: a turn held open by a test

	Status int  // non-zero: fail with this HTTP status and the provider's error body
	Drop   bool // close the connection in the middle of the answer

	StopSequence string // the answer ended on this stop sequence (Anthropic stop_reason "stop_sequence")

	// Limit, when set, refuses the request with HTTP 429 and the
	// provider's rate-limit headers and body until the limit resets
	// (Server.limit); a request after that is answered as the rest of the
	// Reply says.
	Limit *Limit
}

// Limit is a usage or rate limit the model answers with. Like an
// account's limit it is not a prompt's: every request naming the same
// limit (Key) shares it, whatever else its prompt says (a client that
// sends the question again, reworded, is still refused until the reset).
type Limit struct {
	Key   string        // the marker's text ("30s", "30s quiet")
	Reset time.Duration // how long after its first refusal the limit lasts
	// Quiet: the answer says no reset time (no retry-after, no reset
	// header): the client has to guess.
	Quiet bool
}

// Pace makes a slow stream: the text goes out in Total/Every+1 chunks, the
// first at once, then one every Every, the last at Total. A zero Pace sends
// the text in one chunk.
type Pace struct {
	Total, Every time.Duration
}

// ToolCall is one call of a tool the request offered.
type ToolCall struct {
	// Name is the tool's name as the request offered it (Codex namespace
	// tools as NAMESPACE__NAME, e.g. mcp__troupe__ask_agent). "NAME*"
	// matches the first offered tool with that prefix and "*NAME" the first
	// with that suffix (e.g. "*ask_agent" matches both mcp__troupe__ask_agent
	// and OpenCode's troupe_ask_agent).
	Name string
	Args json.RawMessage // a JSON object; empty means {}
	// Raw sends Name and Args exactly as given, unchecked and unmatched:
	// a model that calls a tool nobody offered, or writes arguments that
	// are not JSON (Chat Completions and Responses only).
	Raw bool
}

// maxChunks bounds a slow stream, whatever a marker asks for.
const maxChunks = 10000

// DefaultScript answers a tool result with "TOOL_RESULT_SEEN: <result>",
// otherwise follows the markers in the prompt (ParseMarkers); with no text
// and no tool call asked for it answers "Echo: <prompt without markers>".
// A malformed marker is answered with a text saying what is wrong.
func DefaultScript(req Request) Reply {
	if req.AfterTool {
		return Reply{Text: "TOOL_RESULT_SEEN: " + req.ToolResult}
	}
	r, rest, err := ParseMarkers(req.Prompt)
	if err != nil {
		return Reply{Text: "fakemodel: " + err.Error()}
	}
	if r.Text == "" && len(r.Calls) == 0 {
		r.Text = "Echo: " + rest
	}
	return r
}

// ParseMarkers reads the markers in a prompt into a Reply and returns the
// text outside the markers, trimmed. Markers may combine:
//
//	[[text:X]]                 answer X
//	[[tool:NAME {json}]]       call tool NAME with these arguments ({} if absent); NAME* / *NAME match a prefix / suffix
//	[[slow:TOTAL every STEP]]  stream the answer in chunks spread over TOTAL (STEP defaults to 500ms)
//	[[sleep:DUR]]              send nothing for DUR, then answer
//	[[silent:DUR]]             start the stream, then send nothing for DUR, then answer
//	[[error:N]]                fail with HTTP status N (400–599) and the provider's error body
//	[[drop]]                   close the connection in the middle of the answer
//	[[limit:DUR]]              refuse with HTTP 429 (a usage limit, reset time given) until DUR after the first refusal of any prompt naming it
//	[[limit:DUR quiet]]        the same, with no reset time given
//
// DUR is a Go duration (3s, 500ms) or a number of seconds. A tool call
// without [[text:…]] comes with the text "Calling tool NAME". Anything else
// in [[…]] is left as text.
func ParseMarkers(prompt string) (Reply, string, error) {
	var r Reply
	var rest strings.Builder
	var texts []string
	s := prompt
	for {
		i := strings.Index(s, "[[")
		if i < 0 {
			rest.WriteString(s)
			break
		}
		rest.WriteString(s[:i])
		body := s[i+2:]
		kind, arg, ok := strings.Cut(body, ":")
		if strings.HasPrefix(body, "drop]]") {
			r.Drop = true
			s = body[len("drop]]"):]
			continue
		}
		if !ok || !isMarker(kind) {
			rest.WriteString("[[")
			s = body
			continue
		}
		if kind == "tool" {
			call, after, err := parseToolMarker(arg)
			if err != nil {
				return Reply{}, "", err
			}
			r.Calls = append(r.Calls, call)
			s = after
			continue
		}
		val, after, ok := strings.Cut(arg, "]]")
		if !ok {
			return Reply{}, "", fmt.Errorf("marker [[%s: has no closing ]]", kind)
		}
		s = after
		switch kind {
		case "text":
			texts = append(texts, val)
		case "sleep", "silent":
			d, err := parseDuration(val)
			if err != nil {
				return Reply{}, "", fmt.Errorf("marker [[%s:%s]]: %w", kind, val, err)
			}
			if kind == "sleep" {
				r.Delay += d
			} else {
				r.Silence += d
			}
		case "slow":
			p, err := parsePace(val)
			if err != nil {
				return Reply{}, "", fmt.Errorf("marker [[slow:%s]]: %w", val, err)
			}
			r.Slow = p
		case "limit":
			dur, quiet := strings.CutSuffix(strings.TrimSpace(val), " quiet")
			d, err := parseDuration(dur)
			if err != nil {
				return Reply{}, "", fmt.Errorf("marker [[limit:%s]]: %w", val, err)
			}
			r.Limit = &Limit{Key: strings.TrimSpace(val), Reset: d, Quiet: quiet}
		case "error":
			n, err := strconv.Atoi(strings.TrimSpace(val))
			if err != nil || n < 400 || n > 599 {
				return Reply{}, "", fmt.Errorf("marker [[error:%s]]: want an HTTP status from 400 to 599", val)
			}
			r.Status = n
		}
	}
	r.Text = strings.Join(texts, "")
	if r.Text == "" && len(r.Calls) > 0 {
		names := make([]string, len(r.Calls))
		for i, c := range r.Calls {
			names[i] = c.Name
		}
		r.Text = "Calling tool " + strings.Join(names, ", ")
	}
	return r, strings.TrimSpace(rest.String()), nil
}

func isMarker(kind string) bool {
	switch kind {
	case "text", "tool", "slow", "sleep", "silent", "error", "limit":
		return true
	}
	return false
}

// parseToolMarker reads `NAME {json}]]` (the JSON is optional) and returns
// the text after the closing brackets.
func parseToolMarker(s string) (ToolCall, string, error) {
	end := strings.IndexAny(s, " \t\n]")
	if end <= 0 {
		return ToolCall{}, "", fmt.Errorf("marker [[tool: wants a tool name, as in [[tool:NAME {\"arg\":1}]]")
	}
	call := ToolCall{Name: s[:end]}
	s = strings.TrimLeft(s[end:], " \t\n")
	if strings.HasPrefix(s, "{") {
		dec := json.NewDecoder(strings.NewReader(s))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return ToolCall{}, "", fmt.Errorf("marker [[tool:%s]]: arguments: %w", call.Name, err)
		}
		call.Args = raw
		s = strings.TrimLeft(s[dec.InputOffset():], " \t\n")
	}
	after, ok := strings.CutPrefix(s, "]]")
	if !ok {
		return ToolCall{}, "", fmt.Errorf("marker [[tool:%s]]: want ]] after the arguments", call.Name)
	}
	return call, after, nil
}

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return 0, fmt.Errorf("want a duration like 3s or 500ms")
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 || d > 24*time.Hour {
		return 0, fmt.Errorf("want a duration from 0 to 24h")
	}
	return d, nil
}

// parsePace reads "TOTAL every STEP" or "TOTAL".
func parsePace(s string) (Pace, error) {
	total, every, hasEvery := strings.Cut(strings.TrimSpace(s), " every ")
	p := Pace{Every: 500 * time.Millisecond}
	var err error
	if p.Total, err = parseDuration(total); err != nil {
		return Pace{}, err
	}
	if hasEvery {
		if p.Every, err = parseDuration(every); err != nil {
			return Pace{}, err
		}
	}
	if p.Every <= 0 {
		return Pace{}, fmt.Errorf("want a step above 0")
	}
	if p.Total/p.Every >= maxChunks {
		return Pace{}, fmt.Errorf("want fewer than %d chunks", maxChunks)
	}
	return p, nil
}

// chunks splits text for a Pace: Total/Every+1 chunks, none empty (a text
// with fewer runes than chunks is padded with dots, so every chunk is output).
func (p Pace) chunks(text string) []string {
	if p.Total <= 0 || p.Every <= 0 {
		return []string{text}
	}
	n := int(min(p.Total/p.Every, maxChunks-1)) + 1
	rs := []rune(text)
	for len(rs) < n {
		rs = append(rs, '.')
	}
	out := make([]string, n)
	for i := range n {
		out[i] = string(rs[i*len(rs)/n : (i+1)*len(rs)/n])
	}
	return out
}

// Side queries of the CLIs, answered before any script.
const (
	SideSchema     = "schema"     // Anthropic output_config.format json_schema (Claude's session title)
	SideClassifier = "classifier" // stop_sequences ["</block>"] (Claude's auto-mode permission classifier)
	SideTitle      = "title"      // a "title generator" system prompt (OpenCode)
)

func sideReply(req Request) (Reply, bool) {
	switch req.Side {
	case SideSchema:
		b, _ := json.Marshal(schemaValue("", req.schema, 0))
		return Reply{Text: string(b)}, true
	case SideClassifier:
		return Reply{Text: "<block>no", StopSequence: "</block>"}, true
	case SideTitle:
		return Reply{Text: "Fake title"}, true
	}
	return Reply{}, false
}

// schemaValue builds a minimal value of a JSON schema: strings are
// "Fake <property>", numbers 0, booleans false, arrays empty, enums their
// first value.
func schemaValue(name string, schema any, depth int) any {
	m, _ := schema.(map[string]any)
	if enum, ok := m["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	typ, _ := m["type"].(string)
	if ts, ok := m["type"].([]any); ok && len(ts) > 0 {
		typ, _ = ts[0].(string)
	}
	switch typ {
	case "string":
		if name == "" {
			return "Fake"
		}
		return "Fake " + name
	case "integer", "number":
		return 0
	case "boolean":
		return false
	case "array":
		return []any{}
	case "null":
		return nil
	}
	obj := map[string]any{}
	if props, ok := m["properties"].(map[string]any); ok && depth < 8 {
		for k, v := range props {
			obj[k] = schemaValue(k, v, depth+1)
		}
	}
	return obj
}

// resolve turns the reply's tool names into names the request offered. A
// call no offered tool matches, or with arguments that are not a JSON
// object, makes the reply a text saying so.
func resolve(req Request, r Reply) Reply {
	if len(r.Calls) == 0 {
		return r
	}
	calls := make([]ToolCall, len(r.Calls))
	for i, c := range r.Calls {
		if c.Raw {
			calls[i] = c
			continue
		}
		name, ok := matchTool(c.Name, req.Tools)
		if !ok {
			r.Calls = nil
			r.Text = fmt.Sprintf("fakemodel: no offered tool matches %q (offered: %s)", c.Name, strings.Join(req.Tools, ", "))
			return r
		}
		args := bytes.TrimSpace(c.Args)
		if len(args) == 0 {
			args = []byte("{}")
		}
		var obj map[string]any
		if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
			r.Calls = nil
			r.Text = fmt.Sprintf("fakemodel: arguments of tool %s are not a JSON object: %s", c.Name, args)
			return r
		}
		var compact bytes.Buffer
		_ = json.Compact(&compact, args) // valid: it just unmarshalled
		calls[i] = ToolCall{Name: name, Args: compact.Bytes()}
	}
	r.Calls = calls
	return r
}

func matchTool(want string, offered []string) (string, bool) {
	for _, name := range offered {
		switch {
		case strings.HasSuffix(want, "*") && strings.HasPrefix(name, want[:len(want)-1]),
			strings.HasPrefix(want, "*") && len(want) > 1 && strings.HasSuffix(name, want[1:]),
			name == want:
			return name, true
		}
	}
	return "", false
}
