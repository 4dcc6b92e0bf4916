package fake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The wire protocol between the Engine (parent) and a fake agent (child):
// one JSON object per line, in both directions, each with a "type".
//
// Parent → child (the child's stdin):
//
//	{"type":"start","agent":"architect","respond":"!say hi"}          first line, once; "mcp_token" with an MCP endpoint
//	{"type":"input","turn":"t1","messages":[{"from":"@person","kind":"message","text":"hello"}]}
//	{"type":"tool_result","turn":"t1","id":1,"result":"42"}             or "error":"…"
//	{"type":"decision","turn":"t1","id":2,"allow":true}                 answers a permission; "reason":"…" when denied
//	{"type":"interrupt","turn":"t1"}
//
// Child → parent (the child's stdout):
//
//	{"type":"ready"}                                                     answers start
//	{"type":"output","turn":"t1","text":"echo: hello"}                   a line or a chunk
//	{"type":"tool_call","turn":"t1","id":1,"tool":"ask_agent","args":{"to":"b","question":"q"}}
//	{"type":"tool_use","turn":"t1","id":1,"tool":"ask_agent","args":{…}}  a call it makes over MCP itself (a report)
//	{"type":"tool_done","turn":"t1","id":1,"result":"42"}                its result, or "error":"…" (a report)
//	{"type":"thinking","turn":"t1","text":"let me see"}
//	{"type":"permission","turn":"t1","id":2,"tool":"Bash","args":{…}}   asks; the parent answers with a decision
//	{"type":"turn_end","turn":"t1","text":"echo: hello"}                 or "error":"…"
//
// The parent reports a tool_call as an engine.EventToolCall and its result
// as an EventToolResult; a call the child makes over MCP (the parent runs
// nothing) it reports with tool_use and tool_done instead. Before each
// turn_end the parent reports the turn's usage, counted from the lengths of
// its texts (about 4 bytes a token).
//
// A turn ends with exactly one turn_end. Tool call ids increase within a
// child's life; a tool_result answers the call with the same id and turn.
// An interrupt for a turn that is not running is ignored. On end of input
// the child exits with status 0. Unknown fields are ignored; unknown types,
// missing required fields and lines longer than maxLine are errors.

// Frame types.
const (
	typeStart      = "start"
	typeInput      = "input"
	typeToolResult = "tool_result"
	typeInterrupt  = "interrupt"
	typeReady      = "ready"
	typeOutput     = "output"
	typeToolCall   = "tool_call"
	typeTurnEnd    = "turn_end"
	typeThinking   = "thinking"
	typeToolUse    = "tool_use"
	typeToolDone   = "tool_done"
	typePermission = "permission"
	typeDecision   = "decision"
)

// maxLine bounds one protocol line, in both directions.
const maxLine = 16 << 20

// frame is one line of the protocol, in either direction.
type frame struct {
	Type         string          `json:"type"`
	Agent        string          `json:"agent,omitempty"`        // start
	Respond      string          `json:"respond,omitempty"`      // start: the respond script
	Instructions string          `json:"instructions,omitempty"` // start: the session's instructions
	Journal      string          `json:"journal,omitempty"`      // start: file logging every message received
	ToolTimeout  string          `json:"tool_timeout,omitempty"` // start: how long the MCP client lets a tool call run
	MCPToken     string          `json:"mcp_token,omitempty"`    // start: the session's MCP bearer token
	Turn         string          `json:"turn,omitempty"`
	Messages     []wireMessage   `json:"messages,omitempty"` // input
	ID           int64           `json:"id,omitempty"`       // tool_call, tool_result
	Tool         string          `json:"tool,omitempty"`     // tool_call
	Args         json.RawMessage `json:"args,omitempty"`     // tool_call: a JSON object
	Result       string          `json:"result,omitempty"`   // tool_result
	Text         string          `json:"text,omitempty"`     // output, turn_end
	Error        string          `json:"error,omitempty"`    // tool_result, tool_done, turn_end
	Allow        bool            `json:"allow,omitempty"`    // decision
	Reason       string          `json:"reason,omitempty"`   // decision: why denied
}

// wireMessage is what the child is told of one inbox message.
type wireMessage struct {
	ID          int64  `json:"id,omitempty"`
	From        string `json:"from"`
	Kind        string `json:"kind,omitempty"`
	Text        string `json:"text"`
	Redelivered bool   `json:"redelivered,omitempty"`
}

// encode renders f as one protocol line, newline included.
func encode(f frame) ([]byte, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode %s frame: %w", f.Type, err)
	}
	return append(b, '\n'), nil
}

// decode parses and checks one protocol line (without its newline).
// Tool-call args come back compacted.
func decode(line []byte) (frame, error) {
	var f frame
	if len(line) > maxLine {
		return frame{}, fmt.Errorf("decode line: %d bytes, more than %d", len(line), maxLine)
	}
	if err := json.Unmarshal(line, &f); err != nil {
		return frame{}, fmt.Errorf("decode line: %w", err)
	}
	need := func(ok bool, what string) error {
		if ok {
			return nil
		}
		return fmt.Errorf("decode %s frame: missing %s", f.Type, what)
	}
	var err error
	switch f.Type {
	case typeStart, typeReady:
	case typeInput:
		err = errors.Join(need(f.Turn != "", "turn"), need(len(f.Messages) > 0, "messages"))
	case typeToolResult, typeToolDone, typeDecision:
		err = errors.Join(need(f.Turn != "", "turn"), need(f.ID > 0, "id"))
	case typeInterrupt, typeOutput, typeTurnEnd, typeThinking:
		err = need(f.Turn != "", "turn")
	case typeToolCall, typeToolUse, typePermission:
		err = errors.Join(need(f.Turn != "", "turn"), need(f.ID > 0, "id"), need(f.Tool != "", "tool"))
		if err == nil {
			if f.Args, err = objectArgs(f.Args); err != nil {
				err = fmt.Errorf("decode %s frame: %w", f.Type, err)
			}
		}
	case "":
		return frame{}, errors.New(`decode line: missing "type"`)
	default:
		return frame{}, fmt.Errorf("decode line: unknown frame type %q", f.Type)
	}
	if err != nil {
		return frame{}, err
	}
	return f, nil
}

// objectArgs checks that raw is a JSON object ({} when absent) and compacts it.
func objectArgs(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return json.RawMessage("{}"), nil
	}
	if raw[0] != '{' {
		return nil, errors.New("args must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("args: %w", err)
	}
	return buf.Bytes(), nil
}
