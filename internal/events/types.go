package events

import (
	"encoding/json"

	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Type names an event of the feed. The catalogue below is every type the
// daemon publishes; docs/API.md shows their data.
type Type string

// The event catalogue. Each type has one payload struct, named beside it
// (its data on the wire).
const (
	TypeDaemonStarted   Type = "daemon.started"    // DaemonStarted
	TypeTeamChanged     Type = "team.changed"      // TeamChanged
	TypeProjectRemoved  Type = "project.removed"   // ProjectRemoved
	TypeAgentState      Type = "agent.state"       // AgentState
	TypeAgentOutput     Type = "agent.output"      // AgentActivity
	TypeAgentThinking   Type = "agent.thinking"    // AgentActivity
	TypeAgentToolCall   Type = "agent.tool_call"   // AgentActivity
	TypeAgentToolResult Type = "agent.tool_result" // AgentActivity
	TypeAgentUsage      Type = "agent.usage"       // AgentActivity
	TypeAgentSession    Type = "agent.session"     // AgentActivity
	TypeAgentNotice     Type = "agent.notice"      // AgentActivity
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
	TypeCheckEnded      Type = "check.ended"       // CheckEnded
	TypeAttemptChanged  Type = "attempt.changed"   // AttemptChanged
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

// AgentActivity: what an agent did in a turn, in the journal's words:
// the event is the journal.Event the turn's log records (its Kind gives
// the feed's type, "agent." + kind: output, thinking, tool_call,
// tool_result, usage, session, notice), its texts clipped to MaxText (Cut;
// Size is the original size), its Seq unset. One vocabulary from the
// engine to the UI: the web UI renders a live event and a logged one with
// the same code.
type AgentActivity struct {
	Turn troupe.TurnID `json:"turn,omitempty"`
	journal.Event
}

// EventType is "agent." + the event's kind.
func (a AgentActivity) EventType() Type { return Type("agent." + string(a.Kind)) }

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

// CheckEnded: a run of one of the project's checks on the agent's
// workspace was recorded (GET /api/projects/{id}/checks has it whole,
// output included).
type CheckEnded struct {
	ID         int64             `json:"id"`
	Check      troupe.CheckName  `json:"check"`
	State      troupe.CheckState `json:"state"` // passed, failed, timed_out, error
	ExitCode   int               `json:"exit_code"`
	Turn       troupe.TurnID     `json:"turn,omitempty"` // the turn it checked
	DurationMS int64             `json:"duration_ms"`
}

func (CheckEnded) EventType() Type { return TypeCheckEnded }

// AttemptChanged: an attempt of the project (troupe attempt) was started,
// a member of it moved on, or it was ranked or discarded (GET
// /api/projects/{id}/attempts/{attempt} has it whole).
type AttemptChanged struct {
	ID     int64          `json:"id"`
	State  string         `json:"state"` // running, done
	Winner troupe.AgentID `json:"winner,omitempty"`
}

func (AttemptChanged) EventType() Type { return TypeAttemptChanged }

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
	Digest string             `json:"digest"`
	Agents []troupe.AgentID   `json:"agents"`
	Checks []troupe.CheckName `json:"checks,omitempty"` // checks held too ([checks])
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
