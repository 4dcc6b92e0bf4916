// Package engine defines the seam between the runtime and the agent engines:
// Engine starts a Session for one agent; a Session runs turns and reports
// what the agent does as Events. One subpackage per engine implements it
// (fake/, later claude/, codex/, acp/, openai/), and the runtime never knows
// which one it drives.
//
// Concurrency rules are stated on each method. Implementations own their
// child processes (own process group, one reaper, stop by escalation, C11)
// and their goroutines, all stopped by Close. This package holds types only;
// the runtime and engine packages import it.
package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Engine starts sessions. Start may be called concurrently for different keys.
type Engine interface {
	Start(ctx context.Context, spec StartSpec) (Session, error)
}

// StartSpec is what an engine needs to start one agent's session.
type StartSpec struct {
	Key          troupe.RuntimeKey
	Agent        troupe.AgentSpec
	Dir          string // the project's folder: the agent's working directory
	Instructions string // the agent's prompt plus what troupe tells every agent
	// Tools serves the troupe tools the agent calls, bound to Key (C2).
	// Engines that run the agent loop themselves (fake, openai) call it;
	// the real CLIs reach the same tools through MCP.
	Tools Tools
	// MCP is how the agent reaches troupe's MCP endpoint: a URL and a
	// bearer token minted for this session only (C2), revoked when it ends.
	// Empty when the daemon serves no MCP endpoint (tests).
	MCP    MCPAccess
	Logger *slog.Logger
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

// ToolCallLimiter is implemented by engines whose MCP client cuts a tool
// call after some time (Claude Code's MCP tool timeout, Codex's
// tool_timeout_sec). The runtime mints the session's token with a limit a
// little shorter, so ask_agent returns a request id before the client gives
// up, and the answer comes to the agent's inbox (C4).
type ToolCallLimiter interface {
	ToolCallLimit(agent troupe.AgentSpec) time.Duration
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
}

// EventKind is the kind of an Event.
type EventKind string

// Event kinds.
const (
	EventOutput  EventKind = "output"   // text the agent produced (a chunk or a line)
	EventTurnEnd EventKind = "turn_end" // the protocol's end of the turn
)

// Event is one thing a session reports.
type Event struct {
	Kind EventKind
	Turn troupe.TurnID
	// Text: for EventOutput the chunk; for EventTurnEnd the turn's final
	// output, which answers an ask handled by the turn (C4).
	Text string
	// Error, on EventTurnEnd, says why the turn failed; empty on success.
	Error string
}
