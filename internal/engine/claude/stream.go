package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
)

// maxLine bounds one stdout line of the CLI (a tool result or a session's
// init can be large; a line over this kills the session rather than the
// daemon's memory, C14).
const maxLine = 16 << 20

// lostSession is what the CLI says when --resume names a conversation it
// does not have (its stderr, and the result's errors).
const lostSession = "No conversation found with session ID"

// line is one stdout line of Claude Code's stream-json output: the fields
// troupe reads, whatever its type. Unknown types and fields are ignored.
type line struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	// ParentToolUseID is set on the messages of a subagent (the Task
	// tool): they are activity, not the agent's own output.
	ParentToolUseID *string `json:"parent_tool_use_id"`

	// assistant, user
	Message *message `json:"message"`

	// stream_event (--include-partial-messages)
	Event        *streamEvent `json:"event"`
	APIMessageID string       `json:"api_message_id"`

	// result
	IsError        bool              `json:"is_error"`
	Result         string            `json:"result"`
	Errors         []json.RawMessage `json:"errors"`
	TerminalReason string            `json:"terminal_reason"`
	TotalCostUSD   float64           `json:"total_cost_usd"`
	Usage          *usage            `json:"usage"`
	APIErrorStatus int               `json:"api_error_status"` // result: the model's HTTP status, 429 on a limit
	APIErrorType   string            `json:"api_error_type"`   // result: "rate_limit_error" on a limit

	// rate_limit_event (with a claude.ai login): the account's limit
	RateLimitInfo *rateLimitInfo `json:"rate_limit_info"`

	// control_request (from the CLI), control_response (to ours)
	RequestID string          `json:"request_id"`
	Request   *controlRequest `json:"request"`
	Response  json.RawMessage `json:"response"`
}

type message struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or blocks
}

// block is one content block of a message.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`     // text
	Thinking  string          `json:"thinking"` // thinking
	ID        string          `json:"id"`       // tool_use
	Name      string          `json:"name"`     // tool_use
	Input     json.RawMessage `json:"input"`    // tool_use
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"` // tool_result: a string or blocks
	IsError   bool            `json:"is_error"`
}

type streamEvent struct {
	Type  string `json:"type"`
	Delta *struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
	} `json:"delta"`
}

type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// rateLimitInfo is a rate_limit_event's state of the account's limit:
// status "rejected" when requests are refused, and when it resets (Unix
// seconds), when the model said.
type rateLimitInfo struct {
	Status   string  `json:"status"`
	ResetsAt float64 `json:"resetsAt"`
}

// controlRequest is the request of a control_request line the CLI sends
// (can_use_tool with --permission-prompt-tool stdio).
type controlRequest struct {
	Subtype     string          `json:"subtype"`
	ToolName    string          `json:"tool_name"`
	DisplayName string          `json:"display_name"`
	Title       string          `json:"title"`
	Input       json.RawMessage `json:"input"`
	ToolUseID   string          `json:"tool_use_id"`
}

// parseLine decodes one stdout line. Blank lines are not an error: they
// decode to a line of no type. A field whose JSON type is not the one troupe
// reads (the same key means different things in different line types:
// "message" is a string in system/permission_denied) is left zero, the rest
// of the line decoded.
func parseLine(b []byte) (line, error) {
	var l line
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return l, nil
	}
	if err := json.Unmarshal(b, &l); err != nil {
		if _, ok := errors.AsType[*json.UnmarshalTypeError](err); !ok || b[0] != '{' {
			return line{}, fmt.Errorf("decode stream-json line: %w", err)
		}
	}
	return l, nil
}

// blocks decodes a message's content: a plain string is one text block.
func blocks(raw json.RawMessage) []block {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == 'n' {
		return nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil
		}
		return []block{{Type: "text", Text: s}}
	}
	var bs []block
	if json.Unmarshal(raw, &bs) != nil {
		return nil
	}
	return bs
}

// contentText is the text of a tool result's content (a string or blocks);
// non-text blocks (images) are named by their type.
func contentText(raw json.RawMessage) string {
	var parts []string
	for _, b := range blocks(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		} else if b.Type != "" {
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// errorText is what a failed result says: its result text (the CLI's own
// "API Error: 500 …"), else its errors, else its terminal reason.
func (l line) errorText() string {
	if s := strings.TrimSpace(l.Result); s != "" {
		return s
	}
	var errs []string
	for _, raw := range l.Errors {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = string(raw)
		}
		if s = strings.TrimSpace(s); s != "" {
			errs = append(errs, s)
		}
	}
	if len(errs) > 0 {
		return strings.Join(errs, "; ")
	}
	if l.TerminalReason != "" {
		return "turn failed: " + l.TerminalReason
	}
	return "turn failed"
}

// lostResume reports whether the line is the CLI's refusal of --resume for
// an id it has no conversation of.
func (l line) lostResume() bool {
	if l.Type != "result" || !l.IsError {
		return false
	}
	for _, raw := range l.Errors {
		if bytes.Contains(raw, []byte(lostSession)) {
			return true
		}
	}
	return strings.Contains(l.Result, lostSession)
}

// mapper turns the stream-json lines of turns into engine events. It keeps
// what it needs across lines: which assistant messages were already
// reported chunk by chunk from their stream events (their whole blocks,
// which follow, are then not reported again), and the session's cost so
// far (the CLI reports it summed over the process's turns). It is used by
// one goroutine, the stdout reader.
type mapper struct {
	streamed map[string]bool // assistant message ids whose text/thinking came as deltas
	cost     float64         // total_cost_usd of the last result
	// rejected: a rate_limit_event of this turn said requests are
	// refused; reset is when it said they resume (zero if it did not).
	rejected bool
	reset    time.Time
	now      func() time.Time // the clock limits are clamped by; nil: time.Now
}

// events maps one line onto events (their Turn left empty). Control
// messages and results are not its business: the session handles those.
func (m *mapper) events(l line) []engine.Event {
	if l.ParentToolUseID != nil && *l.ParentToolUseID != "" {
		return nil // a subagent's work: activity only
	}
	switch l.Type {
	case "stream_event":
		return m.delta(l)
	case "assistant":
		return m.assistant(l)
	case "user":
		return userEvents(l)
	case "rate_limit_event":
		m.rateLimit(l)
	}
	return nil
}

// rateLimit keeps what a rate_limit_event says of a refusal for the turn's
// end. Only a claude.ai login gets these lines (docs/engines/claude-code.md,
// "Usage and rate limits"). resetsAt is the CLI's word: bounded before it
// becomes a time (LimitUntil clamps it again at the turn's end).
func (m *mapper) rateLimit(l line) {
	info := l.RateLimitInfo
	if info == nil {
		return
	}
	m.rejected, m.reset = info.Status == "rejected", time.Time{}
	if !m.rejected {
		return // allowed again (a retry went through)
	}
	if secs := info.ResetsAt; secs > 0 {
		m.reset = time.Unix(int64(min(secs, maxUnixSeconds)), 0)
	}
}

// maxUnixSeconds bounds a reset time read from the CLI (year 2200) before
// it is converted; LimitUntil then cuts it to a day ahead.
const maxUnixSeconds = 7258118400

// limit is the Limit of a failed turn's result: set when the model refused
// it for the account's usage or rate limit (HTTP 429, "rate_limit_error",
// or a rate_limit_event that said "rejected"), with the reset time the CLI
// passed on, clamped to [now, now+engine.MaxLimitWait]; nil otherwise.
func (m *mapper) limit(l line) *engine.Limit {
	if !l.IsError || (l.APIErrorStatus != 429 && l.APIErrorType != "rate_limit_error" && !m.rejected) {
		return nil
	}
	now := time.Now
	if m.now != nil {
		now = m.now
	}
	return &engine.Limit{Until: engine.LimitUntil(m.reset, now())}
}

func (m *mapper) delta(l line) []engine.Event {
	if l.Event == nil || l.Event.Type != "content_block_delta" || l.Event.Delta == nil {
		return nil
	}
	d := l.Event.Delta
	var ev engine.Event
	switch {
	case d.Type == "text_delta" && d.Text != "":
		ev = engine.Event{Kind: engine.EventOutput, Text: d.Text}
	case d.Type == "thinking_delta" && d.Thinking != "":
		ev = engine.Event{Kind: engine.EventThinking, Text: d.Thinking}
	default:
		return nil
	}
	if l.APIMessageID != "" {
		if m.streamed == nil {
			m.streamed = make(map[string]bool)
		}
		m.streamed[l.APIMessageID] = true
	}
	return []engine.Event{ev}
}

func (m *mapper) assistant(l line) []engine.Event {
	if l.Message == nil {
		return nil
	}
	streamed := m.streamed[l.Message.ID]
	var evs []engine.Event
	for _, b := range blocks(l.Message.Content) {
		switch b.Type {
		case "text":
			if !streamed && b.Text != "" {
				evs = append(evs, engine.Event{Kind: engine.EventOutput, Text: b.Text})
			}
		case "thinking":
			if !streamed && b.Thinking != "" {
				evs = append(evs, engine.Event{Kind: engine.EventThinking, Text: b.Thinking})
			}
		case "tool_use":
			input := b.Input
			if len(input) == 0 {
				input = json.RawMessage("{}")
			}
			evs = append(evs, engine.Event{Kind: engine.EventToolCall, Tool: &engine.ToolUse{ID: b.ID, Name: b.Name, Input: input, Limit: bashLimit(b.Name, input)}})
		}
	}
	return evs
}

// bashLimit is the limit Claude Code puts on a call of its tool name: a
// Bash command's own timeout (milliseconds in its input), when given; 0
// otherwise (its default depends on the person's settings: troupe falls
// back on the agent's tool_timeout).
func bashLimit(name string, input json.RawMessage) time.Duration {
	if name != "Bash" {
		return 0
	}
	var in struct {
		Timeout float64 `json:"timeout"`
	}
	if json.Unmarshal(input, &in) != nil || in.Timeout <= 0 {
		return 0
	}
	return time.Duration(in.Timeout * float64(time.Millisecond))
}

func userEvents(l line) []engine.Event {
	if l.Message == nil {
		return nil
	}
	var evs []engine.Event
	for _, b := range blocks(l.Message.Content) {
		if b.Type == "tool_result" {
			evs = append(evs, engine.Event{Kind: engine.EventToolResult, Tool: &engine.ToolUse{ID: b.ToolUseID, Output: contentText(b.Content), IsError: b.IsError}})
		}
	}
	return evs
}

// turnEnd maps a result line onto the turn's usage and its end. Error is
// "interrupted" for a failed turn that troupe interrupted (or that the CLI
// says was aborted), else the CLI's own error text, with Limit set when
// the model refused the turn for a usage or rate limit (limit). The cost is this
// turn's: the result's total less the previous result's.
func (m *mapper) turnEnd(l line, interrupted bool) (engine.Event, engine.Event) {
	u := engine.Usage{}
	if l.Usage != nil {
		u = engine.Usage{
			InputTokens:      l.Usage.InputTokens,
			OutputTokens:     l.Usage.OutputTokens,
			CacheReadTokens:  l.Usage.CacheReadInputTokens,
			CacheWriteTokens: l.Usage.CacheCreationInputTokens,
		}
	}
	if cost := l.TotalCostUSD - m.cost; cost > 0 {
		u.CostUSD = cost
	}
	if l.TotalCostUSD > m.cost {
		m.cost = l.TotalCostUSD
	}
	clear(m.streamed)
	end := engine.Event{Kind: engine.EventTurnEnd, Text: l.Result}
	if l.IsError {
		end.Text = ""
		if interrupted || l.TerminalReason == "aborted_streaming" {
			end.Error = "interrupted"
		} else {
			end.Error = l.errorText()
			end.Limit = m.limit(l)
		}
	}
	m.rejected, m.reset = false, time.Time{}
	return engine.Event{Kind: engine.EventUsage, Usage: &u}, end
}

// Lines troupe writes to the CLI's stdin.

type userLine struct {
	Type    string      `json:"type"`
	Message userMessage `json:"message"`
}

type userMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type controlRequestLine struct {
	Type      string         `json:"type"`
	RequestID string         `json:"request_id"`
	Request   map[string]any `json:"request"`
}

type controlResponseLine struct {
	Type     string          `json:"type"`
	Response controlResponse `json:"response"`
}

type controlResponse struct {
	Subtype   string `json:"subtype"` // success, error
	RequestID string `json:"request_id"`
	Response  any    `json:"response,omitempty"`
	Error     string `json:"error,omitempty"`
}

// permissionAnswer is the response to can_use_tool (fixture 19).
type permissionAnswer struct {
	Behavior     string          `json:"behavior"` // allow, deny
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	Message      string          `json:"message,omitempty"`
}

func encodeLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode stream-json line: %w", err)
	}
	return append(b, '\n'), nil
}

func userInput(text string) ([]byte, error) {
	return encodeLine(userLine{Type: "user", Message: userMessage{Role: "user", Content: text}})
}

func interruptRequest(id string) ([]byte, error) {
	return encodeLine(controlRequestLine{Type: "control_request", RequestID: id, Request: map[string]any{"subtype": "interrupt"}})
}

// permissionResponse answers a can_use_tool request: allow with the input
// unchanged, or deny with the reason the model is shown.
func permissionResponse(requestID string, input json.RawMessage, d engine.Decision) ([]byte, error) {
	a := permissionAnswer{Behavior: "deny", Message: d.Reason}
	if d.Allow {
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		a = permissionAnswer{Behavior: "allow", UpdatedInput: input}
	} else if a.Message == "" {
		a.Message = "denied"
	}
	return encodeLine(controlResponseLine{Type: "control_response", Response: controlResponse{Subtype: "success", RequestID: requestID, Response: a}})
}

// errorResponse refuses a control request troupe does not serve.
func errorResponse(requestID, msg string) ([]byte, error) {
	return encodeLine(controlResponseLine{Type: "control_response", Response: controlResponse{Subtype: "error", RequestID: requestID, Error: msg}})
}
