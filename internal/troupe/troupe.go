// Package troupe is the vocabulary shared by every other package: typed ids,
// the RuntimeKey, agent states, and sentinel errors.
//
// It holds data types only, imports the standard library only, and may be
// imported by any package. It has no goroutines and no shared state.
package troupe

import (
	"errors"
	"fmt"
	"time"
)

// ProjectID identifies a registered project. It is minted by the daemon when
// the folder is registered and stored in the daemon's database, never inside
// the folder: a copied folder is a different project.
type ProjectID string

// AgentID identifies an agent within its project only. It is the agent's name
// in the team file. It must never be used alone as a key for runtime state:
// use RuntimeKey (contract C1).
type AgentID string

// RuntimeKey is the only key for runtime state about an agent (contract C1).
type RuntimeKey struct {
	Project ProjectID
	Agent   AgentID
}

// String renders the key as "project/agent" for logs and errors.
func (k RuntimeKey) String() string { return string(k.Project) + "/" + string(k.Agent) }

// Valid reports whether both halves of the key are set.
func (k RuntimeKey) Valid() bool { return k.Project != "" && k.Agent != "" }

// AgentState is the lifecycle state of one agent's actor.
type AgentState string

// Agent states. An agent is stopped until a message or the person starts it.
const (
	StateStopped  AgentState = "stopped"
	StateStarting AgentState = "starting"
	StateIdle     AgentState = "idle"
	StateBusy     AgentState = "busy"
	StateBlocked  AgentState = "blocked"
	StateWaiting  AgentState = "waiting" // a permission request waits on the person
	StateFailed   AgentState = "failed"
	StateLimited  AgentState = "limited" // its engine hit a usage limit: its mail waits until the reset
	// StateUnreachable: it runs on a runner that cannot be reached; its
	// mail waits until the runner is back.
	StateUnreachable AgentState = "unreachable"
)

// Engine names an agent engine, as written in team.toml.
type Engine string

// Known engines.
const (
	EngineClaude   Engine = "claude"
	EngineCodex    Engine = "codex"
	EngineOpenCode Engine = "opencode"
	EngineACP      Engine = "acp"
	EngineOpenAI   Engine = "openai"
	EngineFake     Engine = "fake"
	// EngineTerminal is any CLI run on a terminal (mode terminal), read
	// through the patterns of its [agent.terminal] table.
	EngineTerminal Engine = "terminal"
)

// Engines lists every engine troupe knows, in the order shown to users.
var Engines = []Engine{EngineClaude, EngineCodex, EngineOpenCode, EngineACP, EngineOpenAI, EngineTerminal, EngineFake}

// Mode is how an engine is driven.
type Mode string

// Modes.
const (
	ModeStructured Mode = "structured"
	ModeTerminal   Mode = "terminal"
)

// DefaultTurnTimeout is the inactivity window of an ask when the target's
// profile does not set turn_timeout (contract C4).
const DefaultTurnTimeout = 10 * time.Minute

// DefaultToolTimeout is how long a tool call of an engine's own (a Bash
// command, a build) counts as activity while it runs silent, when the
// engine states no timeout of its own for it and the agent's profile does
// not set tool_timeout. Past it, silence counts again (contract C3).
const DefaultToolTimeout = 10 * time.Minute

// DefaultIdleTimeout is how long an agent's session may stay idle (no turn
// in flight) before troupe stops it, when its profile does not set
// idle_timeout. The next message starts it again, resuming its
// conversation where the engine can.
const DefaultIdleTimeout = 30 * time.Minute

// Project is a registered folder.
type Project struct {
	ID      ProjectID `json:"id"`
	Path    string    `json:"path"` // canonical real path, symlinks resolved
	Name    string    `json:"name"` // base name of Path, for display
	AddedAt time.Time `json:"added_at"`
}

// Sentinel errors. Callers branch with errors.Is.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	ErrInvalid       = errors.New("invalid")
	// ErrConflict: the thing exists but is not in a state that allows the
	// action (a permission already decided, an agent with no turn to
	// interrupt).
	ErrConflict = errors.New("conflict")
)

// FieldError reports a bad value in an input file or request, naming where it
// is and how to fix it. Line is 0 when unknown.
type FieldError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	switch {
	case loc != "" && e.Field != "":
		return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
	case loc != "":
		return fmt.Sprintf("%s: %s", loc, e.Msg)
	case e.Field != "":
		return fmt.Sprintf("%s: %s", e.Field, e.Msg)
	}
	return e.Msg
}

// Unwrap makes every FieldError match ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }
