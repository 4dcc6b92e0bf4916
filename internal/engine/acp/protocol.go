package acp

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
)

// ProtocolVersion is the ACP version troupe speaks (initialize).
const ProtocolVersion = 1

// maxLine bounds one line of the agent's stdout (a tool result, a replayed
// history).
const maxLine = 16 << 20

// initializeResult is the agent's answer to initialize (what troupe uses).
type initializeResult struct {
	ProtocolVersion   int `json:"protocolVersion"`
	AgentCapabilities struct {
		LoadSession     bool `json:"loadSession"`
		MCPCapabilities struct {
			HTTP bool `json:"http"`
			SSE  bool `json:"sse"`
		} `json:"mcpCapabilities"`
	} `json:"agentCapabilities"`
	AgentInfo *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"agentInfo,omitempty"`
}

// initializeParams is troupe's initialize: no file system and no terminal
// offered (troupe serves neither; the agent uses its own tools, under its
// own permission checks).
func initializeParams() any {
	return map[string]any{
		"protocolVersion": ProtocolVersion,
		"clientCapabilities": map[string]any{
			"fs":       map[string]bool{"readTextFile": false, "writeTextFile": false},
			"terminal": false,
		},
		"clientInfo": map[string]string{"name": "troupe", "version": "1"},
	}
}

// mcpServer is an HTTP MCP server in session/new and session/load.
type mcpServer struct {
	Type    string       `json:"type"`
	Name    string       `json:"name"`
	URL     string       `json:"url"`
	Headers []httpHeader `json:"headers"`
}

type httpHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// sessionParams are the params of session/new (id "") and session/load.
type sessionParams struct {
	SessionID  string      `json:"sessionId,omitempty"`
	CWD        string      `json:"cwd"`
	MCPServers []mcpServer `json:"mcpServers"`
}

// newSessionResult is session/new's answer.
type newSessionResult struct {
	SessionID string `json:"sessionId"`
}

// contentBlock is a text content block (the only kind troupe sends).
type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// promptParams are session/prompt's.
type promptParams struct {
	SessionID string         `json:"sessionId"`
	Prompt    []contentBlock `json:"prompt"`
}

// promptResult is session/prompt's answer: the end of the turn.
type promptResult struct {
	StopReason string    `json:"stopReason"`
	Usage      *acpUsage `json:"usage,omitempty"`
}

type acpUsage struct {
	InputTokens       int64 `json:"inputTokens"`
	OutputTokens      int64 `json:"outputTokens"`
	CachedReadTokens  int64 `json:"cachedReadTokens"`
	CachedWriteTokens int64 `json:"cachedWriteTokens"`
}

// notification params of session/update.
type updateParams struct {
	SessionID string `json:"sessionId"`
	Update    update `json:"update"`
}

// update is one session/update. Which fields are set depends on
// SessionUpdate.
type update struct {
	SessionUpdate string          `json:"sessionUpdate"`
	Content       json.RawMessage `json:"content,omitempty"` // a block for chunks, a list for tool calls
	ToolCallID    string          `json:"toolCallId,omitempty"`
	Title         string          `json:"title,omitempty"`
	Kind          string          `json:"kind,omitempty"`
	Status        string          `json:"status,omitempty"`
	RawInput      json.RawMessage `json:"rawInput,omitempty"`
	RawOutput     json.RawMessage `json:"rawOutput,omitempty"`
	Cost          *struct {
		Amount   float64 `json:"amount"`
		Currency string  `json:"currency"`
	} `json:"cost,omitempty"`
}

// permissionParams are session/request_permission's.
type permissionParams struct {
	SessionID string             `json:"sessionId"`
	ToolCall  update             `json:"toolCall"`
	Options   []permissionOption `json:"options"`
}

type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"` // allow_once, allow_always, reject_once, reject_always
}

// permissionOutcome is the answer to session/request_permission: the
// option chosen, or cancelled when none fits (or the turn was cancelled).
func permissionOutcome(opts []permissionOption, d engine.Decision, cancelled bool) any {
	if !cancelled {
		kinds := []string{"reject_once", "reject_always"}
		if d.Allow {
			kinds = []string{"allow_once", "allow_always"}
		}
		for _, k := range kinds {
			for _, o := range opts {
				if o.Kind == k {
					return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": o.OptionID}}
				}
			}
		}
	}
	return map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}
}

// mapper turns one turn's session updates into events. The reader owns it.
type mapper struct {
	text  strings.Builder   // the agent's message since its last tool call: the turn's final text (C4)
	tools map[string]string // tool call id → name
	done  map[string]bool   // tool calls whose result was reported
	cost  float64           // the last usage_update's cost, USD
	costs bool              // cost is set
}

// reset forgets the turn.
func (m *mapper) reset() { *m = mapper{} }

// events maps one update; updates troupe does not show give none.
func (m *mapper) events(u update) []engine.Event {
	switch u.SessionUpdate {
	case "agent_message_chunk":
		t := blockText(u.Content)
		if t == "" {
			return nil
		}
		m.text.WriteString(t)
		return []engine.Event{{Kind: engine.EventOutput, Text: t}}
	case "agent_thought_chunk":
		if t := blockText(u.Content); t != "" {
			return []engine.Event{{Kind: engine.EventThinking, Text: t}}
		}
	case "tool_call", "tool_call_update":
		// What the agent said before a tool call is not its answer: the
		// final text is what it says after its last one, like Claude's
		// result.
		m.text.Reset()
		return m.toolEvents(u)
	case "usage_update":
		if u.Cost != nil && (u.Cost.Currency == "" || u.Cost.Currency == "USD") {
			m.cost, m.costs = u.Cost.Amount, true
		}
	}
	return nil
}

// toolEvents reports a tool call the first time its id shows and its result
// once it is completed or failed.
func (m *mapper) toolEvents(u update) []engine.Event {
	if u.ToolCallID == "" {
		return nil
	}
	if m.tools == nil {
		m.tools, m.done = map[string]string{}, map[string]bool{}
	}
	var evs []engine.Event
	if _, seen := m.tools[u.ToolCallID]; !seen {
		name := u.Title
		if name == "" {
			name = u.Kind
		}
		if name == "" {
			name = "tool"
		}
		m.tools[u.ToolCallID] = name
		evs = append(evs, engine.Event{Kind: engine.EventToolCall, Tool: &engine.ToolUse{ID: u.ToolCallID, Name: name, Input: u.RawInput}})
	}
	if (u.Status == "completed" || u.Status == "failed") && !m.done[u.ToolCallID] {
		m.done[u.ToolCallID] = true
		out := toolText(u.Content)
		if out == "" && len(u.RawOutput) > 0 && string(u.RawOutput) != "null" {
			out = string(u.RawOutput)
		}
		evs = append(evs, engine.Event{Kind: engine.EventToolResult, Tool: &engine.ToolUse{ID: u.ToolCallID, Name: m.tools[u.ToolCallID], Output: out, IsError: u.Status == "failed"}})
	}
	return evs
}

// toolName is the name a tool call was reported under, if it was.
func (m *mapper) toolName(id string) string { return m.tools[id] }

// turnEnd makes the turn's usage and end events from session/prompt's
// answer (res nil: rerr says why the request failed; Limit is set when it
// says a usage or rate limit, limitOf).
func (m *mapper) turnEnd(res *promptResult, rerr error, interrupted bool) (*engine.Event, engine.Event) {
	end := engine.Event{Kind: engine.EventTurnEnd, Text: m.text.String()}
	var usage *engine.Event
	switch {
	case interrupted || (res != nil && res.StopReason == "cancelled"):
		end.Error = "interrupted"
	case rerr != nil:
		end.Error = rerr.Error()
		if end.Error == "" {
			end.Error = "the agent failed the turn"
		}
		end.Limit = limitOf(end.Error, time.Now())
	case res.StopReason == "end_turn" || res.StopReason == "":
	default: // max_tokens, max_turn_requests, refusal
		end.Error = "the agent stopped: " + res.StopReason
	}
	if res != nil && (res.Usage != nil || m.costs) {
		u := &engine.Usage{CostUSD: m.cost}
		if res.Usage != nil {
			u.InputTokens, u.OutputTokens = res.Usage.InputTokens, res.Usage.OutputTokens
			u.CacheReadTokens, u.CacheWriteTokens = res.Usage.CachedReadTokens, res.Usage.CachedWriteTokens
		}
		usage = &engine.Event{Kind: engine.EventUsage, Usage: u}
	}
	return usage, end
}

// blockText is the text of a content block ({"type":"text","text":...});
// other kinds give "".
func blockText(raw json.RawMessage) string {
	var b contentBlock
	if len(raw) == 0 || json.Unmarshal(raw, &b) != nil || b.Type != "text" {
		return ""
	}
	return b.Text
}

// toolText is the text of a tool call's content list: its text blocks, and
// a line per diff.
func toolText(raw json.RawMessage) string {
	var items []struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
		Path    string          `json:"path"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &items) != nil {
		return ""
	}
	var parts []string
	for _, it := range items {
		switch it.Type {
		case "content":
			if t := blockText(it.Content); t != "" {
				parts = append(parts, t)
			}
		case "diff":
			parts = append(parts, "edited "+it.Path)
		}
	}
	return strings.Join(parts, "\n")
}
