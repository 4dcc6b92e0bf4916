// Package engine defines the seam between the runtime and the agent engines:
// Engine starts a Session for one agent; a Session runs turns and reports
// what the agent does as Events. One subpackage per engine implements it
// (fake/, later claude/, codex/, acp/, openai/), and the runtime never knows
// which one it drives.
//
// Concurrency rules are stated on each method. Implementations own their
// child processes (own process group, one reaper, stop by escalation, C11)
// and their goroutines, all stopped by Close. This package holds types and
// the pieces every engine shares: SessionCore (a session's lifecycle: its
// Events, activity, Err, turn gate, Close once and end), ActivityMeter,
// Render; the runtime and engine packages import it.
//
// Render is the one text every engine gives its agent for a turn. Who sent
// each message is said by a header that begins with the turn's tag, random
// bytes drawn for the turn after its messages were written (NewTag) and
// stated on the text's first line; no message body, task output or note
// can hold it, so a line that copies a header without the tag is known for
// text inside a message.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Engine starts sessions. Its methods may be called concurrently.
type Engine interface {
	// Check validates what the agent's definition asks of this engine (its
	// [agent.<engine>] options, its mode) when the team is loaded, so a
	// mistake is a team error, not a failed turn. A problem with one key
	// is a *troupe.FieldError whose Field is the key's path below the
	// [[agent]] table ("claude.permission_mode", "mode", "fake"); the team
	// loader adds the file and the line. Start may assume Check passed.
	Check(agent troupe.AgentSpec) error
	Start(ctx context.Context, spec StartSpec) (Session, error)
}

// StartSpec is what an engine needs to start one agent's session.
type StartSpec struct {
	Key          troupe.RuntimeKey
	Agent        troupe.AgentSpec
	Dir          string // the project's folder: the agent's working directory
	Instructions string // the agent's prompt plus what troupe tells every agent
	// Resume is the engine's own id of a conversation to continue (a
	// Claude session id, a Codex thread id) as an earlier session reported
	// it (EventSession); empty: start a new conversation.
	Resume string
	// Tools serves the troupe tools the agent calls, bound to Key (C2).
	// Engines that run the agent loop themselves (fake, openai) call it;
	// the real CLIs reach the same tools through MCP.
	Tools Tools
	// Approver decides the engine's permission requests (a command to run,
	// a file to write) that the agent's allowed_tools and permission_mode
	// do not settle by themselves. Nil: every request is denied.
	Approver Approver
	// MCP is how the agent reaches troupe's MCP endpoint: a URL and a
	// bearer token minted for this session only (C2), revoked when it ends.
	// Empty when the daemon serves no MCP endpoint (tests).
	MCP MCPAccess
	// Sandbox is the agent's sandbox (contract C16): every process the
	// engine starts for the agent runs in it (proc.Spec.Sandbox; its own
	// CLI with Sandbox.ForEngine(), which keeps the network). Off (the
	// zero value): unsandboxed.
	Sandbox sandbox.Policy
	Logger  *slog.Logger
}

// EngineSandbox is the sandbox of an engine's own CLI for spec: nil when
// the agent is unsandboxed.
func EngineSandbox(spec StartSpec) *sandbox.Policy {
	if !spec.Sandbox.On {
		return nil
	}
	p := spec.Sandbox.ForEngine()
	return &p
}

// MCPAccess is the endpoint and the session's token.
type MCPAccess struct {
	URL   string
	Token string
}

// Tools are the troupe tools of the session's agent, bound to its key.
// Specs lists them (name, description, argument schema) for an engine that
// runs its own model loop and must describe them to its model. Call runs
// one call; it may block for as long as the tool takes (an ask can take
// hours) and is safe for concurrent use. A returned error is a tool error
// to show the agent.
type Tools interface {
	Specs() []tool.Spec
	Call(ctx context.Context, name string, args json.RawMessage) (string, error)
}

// Approver decides permission requests. Approve may block until someone
// decides (the person, in the web UI or the CLI) or ctx ends; it is safe for
// concurrent use. An error means no decision: the engine denies.
type Approver interface {
	Approve(ctx context.Context, req Permission) (Decision, error)
}

// ErrNoApprover is the reason of a denial when a session has no Approver.
var ErrNoApprover = errors.New("no one can approve permission requests for this agent: add the tool to allowed_tools in .troupe/team.toml")

// Ask is a's decision on req. No Approver, or no decision (an error: the
// turn ended, the session closed), is a denial saying why: every engine
// denies what it cannot ask about.
func Ask(ctx context.Context, a Approver, req Permission) Decision {
	if a == nil {
		return Decision{Reason: ErrNoApprover.Error()}
	}
	d, err := a.Approve(ctx, req)
	if err != nil {
		return Decision{Reason: "not approved: " + err.Error()}
	}
	return d
}

// Permission is an engine's request to use a tool.
type Permission struct {
	// ID is the engine's id of the request, for its answer. An
	// EventPermission reporting its decision carries the same ID: the
	// runtime has published that decision already and does not repeat it.
	ID    string
	Turn  troupe.TurnID   // the turn that asks
	Tool  string          // the engine's tool name ("Bash", "Edit", "mcp__x__y")
	Input json.RawMessage // the tool's input, as the engine gave it
	// Class is what the tool does, when the engine knows it (the openai
	// engine's workspace tools); permission.Unknown otherwise.
	Class permission.Class
	// Title says in a sentence what is asked, when the engine says it.
	Title string
}

// Decision answers a Permission.
type Decision struct {
	Allow bool
	// Reason is shown to the agent when denied ("not in allowed_tools").
	Reason string
}

// ToolCallLimiter is implemented by engines whose MCP client cuts a tool
// call after some time (Claude Code's MCP tool timeout, Codex's
// tool_timeout_sec). The runtime mints the session's token with a limit a
// little shorter, so ask_agent returns a request id before the client gives
// up, and the answer comes to the agent's inbox (C4).
type ToolCallLimiter interface {
	ToolCallLimit(agent troupe.AgentSpec) time.Duration
}

// InputLimiter is implemented by engines that take only so much in one
// turn: the size of their stdin frame or line, what their model's context
// can hold. InputLimit returns at most how many messages and how many bytes
// of Render's text one turn of agent may be given; 0 for either means no
// limit of the engine's own. The runtime bounds every turn by the smaller
// of these and its own defaults, and cuts a single message bigger than the
// bytes (the cut stated), so a Send never exceeds them.
type InputLimiter interface {
	InputLimit(agent troupe.AgentSpec) (messages, bytes int)
}

// Session is one running conversation with an engine for one agent.
//
// Send starts a turn; it fails if a turn is already running. The session
// reports the turn through Events and ends it with exactly one EventTurnEnd
// (contract C7: from the protocol, never from silence). A session whose
// process dies mid-turn sends no EventTurnEnd: Events closes and Err says
// why (the runtime fails the turn with that reason). Err is nil when Close
// ended the session, and keeps the reason of an earlier death. Interrupt
// asks the running turn to stop and returns without waiting; the turn then
// ends with an EventTurnEnd whose Error is "interrupted". Close may be called
// concurrently with everything else, more than once, and unblocks Events.
type Session interface {
	Send(ctx context.Context, in Input) error
	Events() <-chan Event
	// Activity advances whenever the engine produces output of any kind
	// (contract C3) and tells when it last did.
	Activity() Activity
	Interrupt(ctx context.Context) error
	Close(ctx context.Context) error
	Err() error
}

// Activity is a session's activity token and the time it last advanced.
type Activity struct {
	Count uint64
	At    time.Time
}

// Input is what a turn is given: one or more inbox messages, in order.
type Input struct {
	Turn     troupe.TurnID
	Messages []troupe.Message
	// Tag marks the lines troupe writes into the turn's text (Render):
	// NewTag of the messages as they were queued, drawn when the turn is
	// made. Troupe's own notices inside a message (an oversize message's
	// cut) begin with HeaderPrefix(Tag) too. Empty: Render draws one.
	Tag string
}

// EventKind is the kind of an Event.
type EventKind string

// Event kinds. Every session reports EventOutput and EventTurnEnd; the
// others when its protocol tells them. Consumers ignore kinds they do not
// know.
const (
	EventOutput     EventKind = "output"      // text the agent produced (a chunk or a line): Text
	EventThinking   EventKind = "thinking"    // the model's reasoning, when the engine shows it: Text
	EventToolCall   EventKind = "tool_call"   // the agent calls a tool: Tool (ID, Name, Input)
	EventToolResult EventKind = "tool_result" // a tool call's result: Tool (ID, Output, IsError)
	EventUsage      EventKind = "usage"       // tokens and cost so far in the turn: Usage
	EventSession    EventKind = "session"     // the engine's own id of the conversation: SessionID
	EventPermission EventKind = "permission"  // a permission request and how it was decided: Permission, Decision
	EventTurnEnd    EventKind = "turn_end"    // the protocol's end of the turn: Text, Error
	// EventNotice is something the engine tells about the turn that is no
	// output of the agent's (the oldest turns of the conversation dropped
	// to fit the model's context): Text.
	EventNotice EventKind = "notice"

	// EventBlocked: the agent cannot go on until the person acts (a
	// terminal agent shows a dialog troupe does not know): Text says what,
	// with the screen. A later EventBlocked with empty Text: it goes on.
	EventBlocked EventKind = "blocked"
)

// Event is one thing a session reports. Which fields are set depends on
// Kind (see the kinds).
type Event struct {
	Kind EventKind
	Turn troupe.TurnID
	// Text: for EventOutput and EventThinking the chunk; for EventTurnEnd
	// the turn's final output, which answers an ask handled by the turn
	// (C4).
	Text string
	// Error, on EventTurnEnd, says why the turn failed; empty on success.
	Error string
	// Tool is the call of EventToolCall and EventToolResult.
	Tool *ToolUse
	// Usage is the turn's usage so far, on EventUsage.
	Usage *Usage
	// SessionID is the engine's id of the conversation, on EventSession:
	// the runtime keeps it and gives it back as StartSpec.Resume.
	SessionID string
	// Permission and Decision, on EventPermission.
	Permission *Permission
	Decision   *Decision
	// Limit, on EventTurnEnd, says the turn ended on a usage or rate limit
	// of the engine's account (HTTP 429, a plan's usage limit): not the
	// agent's failure. The runtime keeps the turn's messages and runs
	// them again once the limit resets. Error says the engine's words.
	Limit *Limit
}

// Limit is a usage or rate limit an engine reported.
type Limit struct {
	// Until is when it resets, as the engine said it (a retry-after, a
	// reset time); zero when it did not say.
	Until time.Time
	// Unreachable, if set, says the turn ended because the agent's
	// machine cannot be reached: no usage limit, its messages wait for
	// the machine to come back.
	Unreachable *Unreachable `json:",omitempty"`
}

// ToolUse is one tool call of the agent's own (its engine's tools, or
// troupe's through MCP) and, once known, its result.
type ToolUse struct {
	ID      string          // the engine's id, linking a result to its call
	Name    string          // e.g. "Bash", "mcp__troupe__ask_agent"
	Input   json.RawMessage // on a call
	Output  string          // on a result
	IsError bool            // on a result
	// Limit is how long the engine lets this call run (its own timeout for
	// it: a Bash command's timeout), 0 when it does not say; on a call.
	// While the call runs, up to its Limit (else the agent's tool_timeout),
	// the agent counts as active though silent.
	Limit time.Duration
}

// Usage counts a turn's tokens and, when the engine reports it, its cost.
type Usage struct {
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64   `json:"cache_write_tokens,omitempty"`
	CostUSD          float64 `json:"cost_usd,omitempty"`
}

// TerminalSession is implemented by sessions that run their agent's own
// TUI on a terminal (mode = "terminal"): the person can attach to it.
type TerminalSession interface {
	Terminal() Terminal
}

// Terminal is an agent's terminal as a person sees it.
type Terminal interface {
	// Attach adds a viewer: the screen now, then the live output.
	Attach() (TerminalViewer, error)
	// Size is the terminal's columns and rows.
	Size() (cols, rows int)
	// InUse reports whether a person is attached: the session is theirs
	// too, so an idle_timeout does not stop it under them.
	InUse() bool
}

// TerminalViewer is one attached person. While they type, the session
// does not write its own input (queued turns wait for the next idle
// moment after they stop).
type TerminalViewer interface {
	// Snapshot redraws the screen as it was when the viewer attached.
	Snapshot() []byte
	// Output is the program's output since the snapshot; it closes when
	// the viewer is detached, Reason saying why.
	Output() <-chan []byte
	Reason() string
	// Type writes the person's keys to the program.
	Type(ctx context.Context, keys []byte) error
	// Resize resizes the terminal (the program gets SIGWINCH).
	Resize(cols, rows int) error
	Detach()
}
