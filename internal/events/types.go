package events

import (
	"encoding/json"

	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Type names an event of the feed. The catalogue below is every type the
// daemon publishes; docs/API.md shows their data.
type Type string

// The event catalogue. Each type has one payload struct of the same name
// (its data on the wire).
const (
	TypeDaemonStarted   Type = "daemon.started"    // DaemonStarted
	TypeTeamChanged     Type = "team.changed"      // TeamChanged
	TypeProjectRemoved  Type = "project.removed"   // ProjectRemoved
	TypeAgentState      Type = "agent.state"       // AgentState
	TypeAgentOutput     Type = "agent.output"      // AgentOutput
	TypeAgentThinking   Type = "agent.thinking"    // AgentThinking
	TypeAgentToolCall   Type = "agent.tool_call"   // AgentToolCall
	TypeAgentToolResult Type = "agent.tool_result" // AgentToolResult
	TypeAgentUsage      Type = "agent.usage"       // AgentUsage
	TypeAgentSession    Type = "agent.session"     // AgentSession
	TypeAgentPermission Type = "agent.permission"  // AgentPermission
	TypeTurnStarted     Type = "turn.started"      // TurnStarted
	TypeTurnEnded       Type = "turn.ended"        // TurnEnded
	TypeMessageQueued   Type = "message.queued"    // MessageQueued
	TypeRequestDone     Type = "request.done"      // RequestDone
	TypeInboxExpired    Type = "inbox.expired"     // InboxExpired
	TypeTaskStarted     Type = "task.started"      // TaskStarted
	TypeTaskEnded       Type = "task.ended"        // TaskEnded
	TypeWorktreeKept    Type = "worktree.kept"     // WorktreeKept
	TypeTeamHeld        Type = "team.held"         // TeamHeld
	TypeTeamDecided     Type = "team.decided"      // TeamDecided
)

// Payload is the data of one event; its type says which event it is.
type Payload interface{ EventType() Type }

// MaxText bounds every text of a payload (output, thinking, tool input and
// output): the feed is for watching, the session and the store keep it all.
// A cut text ends with "…" and its payload says Cut.
const MaxText = 4096

// Clip cuts s to MaxText bytes (on a rune boundary) and reports whether it
// cut.
func Clip(s string) (string, bool) {
	return clip.Ellipsis(s, MaxText)
}

// DaemonStarted: the daemon is ready.
type DaemonStarted struct {
	Addr string `json:"addr"`
}

// TeamChanged: a project's team file was (re)loaded (its data is the
// change). Its lists are empty when Error is set: the last good team stays
// in force.
type TeamChanged struct{ troupe.TeamChange }

// ProjectRemoved: a project was unregistered.
type ProjectRemoved struct {
	Project troupe.ProjectID `json:"project"`
}

// AgentState: an agent changed state; Reason says why for failed, blocked
// and stopped.
type AgentState struct {
	State  troupe.AgentState `json:"state"`
	Reason string            `json:"reason"`
}

// AgentOutput: text the agent wrote in a turn (clipped to MaxText).
type AgentOutput struct {
	Turn troupe.TurnID `json:"turn"`
	Text string        `json:"text"`
	Cut  bool          `json:"cut,omitempty"`
}

// AgentThinking: the model's reasoning in a turn (clipped to MaxText).
type AgentThinking struct {
	Turn troupe.TurnID `json:"turn"`
	Text string        `json:"text"`
	Cut  bool          `json:"cut,omitempty"`
}

// AgentToolCall: the agent called a tool; Input is its JSON input as text
// (clipped to MaxText).
type AgentToolCall struct {
	Turn  troupe.TurnID `json:"turn"`
	ID    string        `json:"id"`
	Name  string        `json:"name"`
	Input string        `json:"input"`
	Cut   bool          `json:"cut,omitempty"`
}

// AgentToolResult: a tool call's result (clipped to MaxText).
type AgentToolResult struct {
	Turn    troupe.TurnID `json:"turn"`
	ID      string        `json:"id"`
	Output  string        `json:"output"`
	IsError bool          `json:"is_error,omitempty"`
	Cut     bool          `json:"cut,omitempty"`
}

// AgentUsage: a turn's tokens and cost so far.
type AgentUsage struct {
	Turn             troupe.TurnID `json:"turn"`
	InputTokens      int64         `json:"input_tokens"`
	OutputTokens     int64         `json:"output_tokens"`
	CacheReadTokens  int64         `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64         `json:"cache_write_tokens,omitempty"`
	CostUSD          float64       `json:"cost_usd,omitempty"`
}

// AgentSession: the engine's own id of the agent's conversation (a Claude
// session id, a Codex thread id), which a restarted session resumes.
type AgentSession struct {
	SessionID string `json:"session_id"`
}

// AgentPermission: an engine asked to use a tool (State pending: it waits
// on the person, who decides it by ID), or the request was decided (State
// allowed or denied, with Allow and Reason). A request the person decides
// is published twice, pending then decided; one the agent's definition
// settles (allowed_tools, troupe's own tools) once, decided.
type AgentPermission struct {
	Turn   troupe.TurnID          `json:"turn"`
	ID     string                 `json:"id"`
	Tool   string                 `json:"tool"`
	Title  string                 `json:"title,omitempty"`
	Input  string                 `json:"input"`
	Cut    bool                   `json:"cut,omitempty"`
	State  troupe.PermissionState `json:"state"`
	Allow  bool                   `json:"allow"`
	Reason string                 `json:"reason,omitempty"`
}

// TurnStarted: a turn began with these inbox messages.
type TurnStarted struct {
	Turn     troupe.TurnID `json:"turn"`
	Messages []int64       `json:"messages"`
}

// TurnEnded: a turn ended; Error says why it failed, empty on success.
type TurnEnded struct {
	Turn  troupe.TurnID `json:"turn"`
	Error string        `json:"error"`
}

// MessageQueued: a message entered the conversation (its data is the
// message itself).
type MessageQueued struct{ troupe.Message }

// RequestDone: an ask or a delegation ended (its data is the request).
type RequestDone struct{ troupe.Request }

// InboxExpired: an agent's undelivered messages expired.
type InboxExpired struct {
	Messages int `json:"messages"`
}

// TaskStarted: a background task started (its owner is the event's
// agent: an agent, or the person).
type TaskStarted struct {
	ID      string `json:"id"`
	Command string `json:"command"` // clipped to MaxText
	Cut     bool   `json:"cut,omitempty"`
}

// TaskEnded: a background task's end was recorded.
type TaskEnded struct {
	ID       string `json:"id"`
	State    string `json:"state"` // exited, failed, killed, timed_out, lost
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

func (TaskStarted) EventType() Type { return TypeTaskStarted }
func (TaskEnded) EventType() Type   { return TypeTaskEnded }

// WorktreeKept: an agent with a worktree left its team; the worktree and
// its branch are kept (Reason says so, and what to do).
type WorktreeKept struct {
	Path   string `json:"path"`
	Branch string `json:"branch"`
	Reason string `json:"reason"`
}

// TeamHeld: a project's team file widens what some agents may do; the
// change waits for the person (GET /api/projects/{id}/team/pending shows
// what it grants) and those agents keep their approved definition (C17).
type TeamHeld struct {
	Digest string           `json:"digest"`
	Agents []troupe.AgentID `json:"agents"`
}

// TeamDecided: the person approved or rejected a held team change.
type TeamDecided struct {
	Digest   string `json:"digest"`
	Approved bool   `json:"approved"`
}

func (TeamHeld) EventType() Type    { return TypeTeamHeld }
func (TeamDecided) EventType() Type { return TypeTeamDecided }

func (DaemonStarted) EventType() Type   { return TypeDaemonStarted }
func (TeamChanged) EventType() Type     { return TypeTeamChanged }
func (ProjectRemoved) EventType() Type  { return TypeProjectRemoved }
func (AgentState) EventType() Type      { return TypeAgentState }
func (AgentOutput) EventType() Type     { return TypeAgentOutput }
func (AgentThinking) EventType() Type   { return TypeAgentThinking }
func (AgentToolCall) EventType() Type   { return TypeAgentToolCall }
func (AgentToolResult) EventType() Type { return TypeAgentToolResult }
func (AgentUsage) EventType() Type      { return TypeAgentUsage }
func (AgentSession) EventType() Type    { return TypeAgentSession }
func (AgentPermission) EventType() Type { return TypeAgentPermission }
func (TurnStarted) EventType() Type     { return TypeTurnStarted }
func (TurnEnded) EventType() Type       { return TypeTurnEnded }
func (MessageQueued) EventType() Type   { return TypeMessageQueued }
func (RequestDone) EventType() Type     { return TypeRequestDone }
func (InboxExpired) EventType() Type    { return TypeInboxExpired }
func (WorktreeKept) EventType() Type    { return TypeWorktreeKept }

// marshal encodes p's data.
func marshal(p Payload) json.RawMessage {
	b, err := json.Marshal(p)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"marshal_error": err.Error()})
	}
	return b
}
