package codex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/internal/engine"
)

// maxLine bounds one line of the app-server's stdout (a turn's items, a
// command's aggregated output).
const maxLine = 64 << 20

// threadResult is the result of thread/start and thread/resume.
type threadResult struct {
	Thread struct {
		ID string `json:"id"`
	} `json:"thread"`
}

// turnResult is the result of turn/start, and the params of turn/started.
type turnResult struct {
	Turn turn `json:"turn"`
}

// turn is a Codex turn: its id, status, error and (at completion) items.
type turn struct {
	ID     string     `json:"id"`
	Status string     `json:"status"` // completed, interrupted, failed, inProgress
	Error  *turnError `json:"error"`
	Items  []item     `json:"items"`
}

type turnError struct {
	Message           string `json:"message"`
	AdditionalDetails string `json:"additionalDetails"`
	// CodexErrorInfo is the error's kind: a name ("usageLimitExceeded")
	// or an object of one name and its details
	// ({"responseTooManyFailedAttempts":{"httpStatusCode":429}}).
	CodexErrorInfo json.RawMessage `json:"codexErrorInfo"`
}

// limitKinds are the codexErrorInfo names of a usage or rate limit.
var limitKinds = []string{"usageLimitExceeded", "rateLimitExceeded"}

// limited reports whether the error is a usage or rate limit of the
// account: its kind is one of limitKinds, or it carries HTTP status 429
// (docs/engines/codex-opencode.md, "Codex: usage and rate limits").
func (e *turnError) limited() bool {
	if e == nil || len(e.CodexErrorInfo) == 0 {
		return false
	}
	var name string
	if json.Unmarshal(e.CodexErrorInfo, &name) == nil {
		return slices.Contains(limitKinds, name)
	}
	var kinds map[string]struct {
		HTTPStatusCode int `json:"httpStatusCode"`
	}
	if json.Unmarshal(e.CodexErrorInfo, &kinds) != nil {
		return false
	}
	for name, details := range kinds {
		if slices.Contains(limitKinds, name) || details.HTTPStatusCode == 429 {
			return true
		}
	}
	return false
}

// itemParams are the params of item/started and item/completed.
type itemParams struct {
	Item   item   `json:"item"`
	TurnID string `json:"turnId"`
}

// item is a thread item; which fields are set depends on Type.
type item struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	// agentMessage
	Text string `json:"text"`
	// reasoning
	Summary []string `json:"summary"`
	Content []string `json:"content"`
	// commandExecution
	Command          string  `json:"command"`
	Cwd              string  `json:"cwd"`
	AggregatedOutput *string `json:"aggregatedOutput"`
	ExitCode         *int    `json:"exitCode"`
	Status           string  `json:"status"`
	// fileChange
	Changes []fileChange `json:"changes"`
	// mcpToolCall, dynamicToolCall
	Server    string          `json:"server"`
	Namespace string          `json:"namespace"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Result    *struct {
		Content []json.RawMessage `json:"content"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Success      *bool             `json:"success"`
	ContentItems []json.RawMessage `json:"contentItems"`
	// webSearch
	Query string `json:"query"`
}

type fileChange struct {
	Path string          `json:"path"`
	Kind json.RawMessage `json:"kind"` // {"type":"add"} or "add"
	Diff string          `json:"diff"`
}

// kind is the change's kind as a word.
func (c fileChange) kind() string {
	var s string
	if json.Unmarshal(c.Kind, &s) == nil {
		return s
	}
	var o struct {
		Type string `json:"type"`
	}
	json.Unmarshal(c.Kind, &o)
	return o.Type
}

// deltaParams are the params of item/*/delta notifications.
type deltaParams struct {
	ItemID string `json:"itemId"`
	Delta  string `json:"delta"`
}

// errorParams are the params of the error notification.
type errorParams struct {
	Error     turnError `json:"error"`
	WillRetry bool      `json:"willRetry"`
}

// tokenUsage is one count of thread/tokenUsage/updated.
type tokenUsage struct {
	InputTokens           int64 `json:"inputTokens"`
	CachedInputTokens     int64 `json:"cachedInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
}

type usageParams struct {
	TokenUsage struct {
		Last tokenUsage `json:"last"`
	} `json:"tokenUsage"`
}

// Tool names troupe reports for Codex's own tools.
const (
	toolShell     = "shell"
	toolPatch     = "apply_patch"
	toolWebSearch = "web_search"
)

// mapper turns one turn's notifications into events. It keeps what the
// turn's end needs: the last agent message, the usage so far, the last
// error. A new mapper starts each turn.
type mapper struct {
	streamed  map[string]bool // agent messages whose text came as deltas
	lastText  string          // the last agent message's text
	usage     engine.Usage    // the turn's usage so far (sum of each request's)
	lastError string          // the last error notification's message
	limited   bool            // the last error notification was a limit Codex gave up on
}

// events maps a notification onto events (without Turn).
func (m *mapper) events(method string, params json.RawMessage) []engine.Event {
	switch method {
	case "item/agentMessage/delta":
		var p deltaParams
		if json.Unmarshal(params, &p) != nil || p.Delta == "" {
			return nil
		}
		if m.streamed == nil {
			m.streamed = make(map[string]bool)
		}
		m.streamed[p.ItemID] = true
		return []engine.Event{{Kind: engine.EventOutput, Text: p.Delta}}
	case "item/started":
		var p itemParams
		if json.Unmarshal(params, &p) != nil {
			return nil
		}
		if use := toolCall(p.Item); use != nil {
			return []engine.Event{{Kind: engine.EventToolCall, Tool: use}}
		}
	case "item/completed":
		var p itemParams
		if json.Unmarshal(params, &p) != nil {
			return nil
		}
		return m.completed(p.Item)
	case "thread/tokenUsage/updated":
		var p usageParams
		if json.Unmarshal(params, &p) != nil {
			return nil
		}
		u := p.TokenUsage.Last
		m.usage.InputTokens += max(u.InputTokens-u.CachedInputTokens, 0)
		m.usage.CacheReadTokens += u.CachedInputTokens
		m.usage.CacheWriteTokens += u.CacheWriteInputTokens
		m.usage.OutputTokens += u.OutputTokens
		usage := m.usage
		return []engine.Event{{Kind: engine.EventUsage, Usage: &usage}}
	case "error":
		var p errorParams
		if json.Unmarshal(params, &p) == nil && p.Error.Message != "" {
			m.lastError = p.Error.Message
			m.limited = !p.WillRetry && p.Error.limited()
		}
	}
	return nil
}

// completed maps a completed item.
func (m *mapper) completed(it item) []engine.Event {
	switch it.Type {
	case "agentMessage":
		m.lastText = it.Text
		if !m.streamed[it.ID] && it.Text != "" {
			return []engine.Event{{Kind: engine.EventOutput, Text: it.Text}}
		}
	case "reasoning":
		text := strings.Join(append(append([]string{}, it.Summary...), it.Content...), "\n")
		if text != "" {
			return []engine.Event{{Kind: engine.EventThinking, Text: text}}
		}
	case "error":
		if it.Text != "" {
			m.lastError = it.Text
		}
	case "commandExecution", "fileChange", "mcpToolCall", "dynamicToolCall", "webSearch":
		return []engine.Event{{Kind: engine.EventToolResult, Tool: toolResult(it)}}
	}
	return nil
}

// toolCall is the call an item starts, or nil for an item that is no tool.
func toolCall(it item) *engine.ToolUse {
	use := &engine.ToolUse{ID: it.ID}
	var in any
	switch it.Type {
	case "commandExecution":
		use.Name, in = toolShell, map[string]string{"command": it.Command, "cwd": it.Cwd}
	case "fileChange":
		type change struct {
			Path string `json:"path"`
			Kind string `json:"kind"`
			Diff string `json:"diff,omitempty"`
		}
		cs := make([]change, 0, len(it.Changes))
		for _, c := range it.Changes {
			cs = append(cs, change{c.Path, c.kind(), c.Diff})
		}
		use.Name, in = toolPatch, map[string]any{"changes": cs}
	case "mcpToolCall":
		use.Name = "mcp__" + it.Server + "__" + it.Tool
		use.Input = rawOrEmpty(it.Arguments)
		return use
	case "dynamicToolCall":
		use.Name = it.Tool
		if it.Namespace != "" {
			use.Name = it.Namespace + "__" + it.Tool
		}
		use.Input = rawOrEmpty(it.Arguments)
		return use
	case "webSearch":
		use.Name, in = toolWebSearch, map[string]string{"query": it.Query}
	default:
		return nil
	}
	use.Input, _ = json.Marshal(in)
	return use
}

func rawOrEmpty(r json.RawMessage) json.RawMessage {
	if len(r) == 0 || bytes.Equal(r, []byte("null")) {
		return json.RawMessage("{}")
	}
	return r
}

// toolResult is the result a completed tool item reports.
func toolResult(it item) *engine.ToolUse {
	use := &engine.ToolUse{ID: it.ID, IsError: it.Status == "failed" || it.Status == "declined"}
	switch it.Type {
	case "commandExecution":
		if it.AggregatedOutput != nil {
			use.Output = *it.AggregatedOutput
		}
		if it.ExitCode != nil && *it.ExitCode != 0 {
			use.IsError = true
		}
	case "fileChange":
		var lines []string
		for _, c := range it.Changes {
			lines = append(lines, c.kind()+" "+c.Path)
		}
		use.Output = strings.Join(lines, "\n")
	case "mcpToolCall":
		if it.Result != nil {
			use.Output = contentText(it.Result.Content)
		}
		if it.Error != nil {
			use.IsError, use.Output = true, it.Error.Message
		}
	case "dynamicToolCall":
		use.Output = contentText(it.ContentItems)
		if it.Success != nil && !*it.Success {
			use.IsError = true
		}
	case "webSearch":
		use.Output = it.Query
	}
	if use.IsError && use.Output == "" {
		use.Output = it.Status
	}
	return use
}

// contentText joins the text of MCP content blocks.
func contentText(blocks []json.RawMessage) string {
	var parts []string
	for _, b := range blocks {
		var c struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(b, &c) == nil && c.Text != "" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// interrupted is the Error of a turn ended by Interrupt.
const interrupted = "interrupted"

// turnEnd is the EventTurnEnd of a turn/completed notification (without
// Turn): the final text is the turn's last agent message; a failed turn's
// error is the turn's own, else the last error the server reported; an
// interrupted turn's is "interrupted". A turn failed for a usage or rate
// limit has Limit set (its Until zero: Codex does not say). asked says Interrupt was called
// during the turn: a turn that then fails was interrupted too.
func (m *mapper) turnEnd(params json.RawMessage, asked bool) engine.Event {
	var p turnResult
	err := json.Unmarshal(params, &p)
	ev := engine.Event{Kind: engine.EventTurnEnd, Text: m.lastText}
	if ev.Text == "" {
		for _, it := range p.Turn.Items {
			if it.Type == "agentMessage" && it.Text != "" {
				ev.Text = it.Text
			}
		}
	}
	switch {
	case err != nil:
		ev.Error = "codex ended the turn with an unreadable turn/completed: " + err.Error()
	case p.Turn.Status == "interrupted", asked && p.Turn.Status != "completed":
		ev.Error = interrupted
	case p.Turn.Status == "failed":
		switch {
		case p.Turn.Error != nil && p.Turn.Error.Message != "":
			ev.Error = p.Turn.Error.Message
		case m.lastError != "":
			ev.Error = m.lastError
		default:
			ev.Error = "codex turn failed"
		}
		if p.Turn.Error.limited() || m.limited {
			// Codex passes on no reset time (its 429 message and
			// details do not carry the provider's retry-after).
			ev.Limit = &engine.Limit{}
		}
	case p.Turn.Status != "completed":
		ev.Error = fmt.Sprintf("codex ended the turn with status %q", p.Turn.Status)
	}
	return ev
}
