package troupe

import (
	"fmt"
	"strings"
	"time"
)

// AgentSpec is one [[agent]] table of a team file, with defaults applied.
type AgentSpec struct {
	Name        AgentID       `json:"name"`
	Engine      Engine        `json:"engine"`
	Model       string        `json:"model,omitempty"`
	Mode        Mode          `json:"mode"`
	TurnTimeout time.Duration `json:"turn_timeout"`
	// IdleTimeout is how long the agent's session may stay idle before
	// troupe stops it (the next message starts it again); zero keeps it.
	// The team file's default is DefaultIdleTimeout.
	IdleTimeout time.Duration `json:"idle_timeout"`
	// ToolTimeout is how long one of the engine's own tool calls counts as
	// activity while it runs, when the engine states no timeout for it
	// (DefaultToolTimeout when the team file does not say).
	ToolTimeout  time.Duration `json:"tool_timeout"`
	Prompt       string        `json:"prompt,omitempty"`
	PromptFile   string        `json:"prompt_file,omitempty"`
	AllowedTools []string      `json:"allowed_tools,omitempty"`
	// PermissionMode is passed to the engine as it is (Claude Code's
	// --permission-mode); the engine's Check says which values it takes.
	PermissionMode string `json:"permission_mode,omitempty"`
	// Command and Args run the engine's CLI instead of its default program
	// on PATH.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Workspace is where the agent works: "project" (the project folder,
	// the default) or "worktree" (a git worktree of its own, outside the
	// project folder, on the branch troupe/<name>; internal/worktree).
	Workspace string `json:"workspace,omitempty"`
	// Base is the ref a worktree's branch starts from ("": the project's
	// HEAD when the worktree is made).
	Base string `json:"base,omitempty"`
	// Runner is the runner the agent runs on (runner = "NAME"); with
	// RunnerLabels instead, any runner that has every one of them. Both
	// empty: the daemon's own machine. An agent on a runner works in a
	// worktree (Workspace "worktree").
	Runner       RunnerName `json:"runner,omitempty"`
	RunnerLabels []string   `json:"runner_labels,omitempty"`
	// Sandbox is the team file's [agent.sandbox] (or sandbox = false):
	// changes to the agent's sandbox (internal/sandbox). The zero value is
	// the default sandbox.
	Sandbox AgentSandbox `json:"sandbox,omitzero"`
	// Options holds the engine-specific table ([agent.<engine>]), checked by
	// the engine when it starts the agent.
	Options map[string]any `json:"options,omitempty"`
	// Line is the line of the [[agent]] header in the file, for errors.
	Line int `json:"-"`
}

// Remote reports whether the agent runs on a runner, not on the daemon's
// machine.
func (a AgentSpec) Remote() bool { return a.Runner != "" || len(a.RunnerLabels) > 0 }

// AgentSandbox is what a team file changes of an agent's sandbox. Paths
// may start with "~/" (HOME); relative ones are inside the agent's
// workspace.
type AgentSandbox struct {
	// Enabled is sandbox = true/false (or enabled in the table); nil:
	// the default for the agent's engine.
	Enabled *bool `json:"enabled,omitempty"`
	// Readable, Writable and Hidden add paths of each kind; a path named
	// here overrides the default sandbox's kind for it.
	Readable []string `json:"readable,omitempty"`
	Writable []string `json:"writable,omitempty"`
	Hidden   []string `json:"hidden,omitempty"`
	// Network false cuts the agent's commands (tasks, run_command) from the
	// network; nil leaves it unchanged.
	Network *bool `json:"network,omitempty"`
	// Memory caps what the agent's processes hold, in bytes (memory =
	// "4GiB"); 0: the default (DefaultMemoryCap), NoCap: none.
	Memory int64 `json:"memory,omitempty"`
	// Processes caps the agent's processes and threads (processes = 512);
	// 0: the default (DefaultProcessCap), NoCap: none.
	Processes int64 `json:"processes,omitempty"`
}

// NoCap is a cap the team file removed (memory = "none").
const NoCap = -1

// The default caps of a sandboxed agent (README "Sandbox" says why): no
// memory cap, 4096 processes and threads.
const (
	DefaultMemoryCap  = 0
	DefaultProcessCap = 4096
)

// Caps are the agent's effective caps: 0 is none.
func (s AgentSandbox) Caps() (memory, processes int64) {
	eff := func(v, def int64) int64 {
		switch {
		case v == NoCap:
			return 0
		case v == 0:
			return def
		}
		return v
	}
	return eff(s.Memory, DefaultMemoryCap), eff(s.Processes, DefaultProcessCap)
}

// TeamChange describes what a reload of a team file changed. Agents whose
// definition did not change are in none of the lists and keep running.
type TeamChange struct {
	Project ProjectID `json:"project"`
	Added   []AgentID `json:"added,omitempty"`
	Removed []AgentID `json:"removed,omitempty"`
	Changed []AgentID `json:"changed,omitempty"`
	// Held lists the agents whose change in the team file widens what they
	// may do and waits for the person's approval (contract C17), when that
	// change is new; they keep their approved definition (a new agent does
	// not exist yet).
	Held []AgentID `json:"held,omitempty"`
	// HeldChecks lists the checks ([checks]) that the team file adds or
	// widens (command, dir, a longer timeout), held likewise; the
	// approved check, if any, stays in force.
	HeldChecks []CheckName `json:"held_checks,omitempty"`
	// Error is the current load error, empty when the file is good. When it
	// is set the lists are empty: the last good team stays in force.
	Error string `json:"error,omitempty"`
}

// Empty reports whether the change changes nothing.
func (c TeamChange) Empty() bool {
	return len(c.Added)+len(c.Removed)+len(c.Changed)+len(c.Held)+len(c.HeldChecks) == 0 && c.Error == ""
}

// ConversationEntry is one message of a conversation that troupe keeps
// itself for an engine that runs its own model loop (engine openai): Turn
// numbers the conversation's turn it belongs to (from 1, rising), Data is
// the engine's own encoding of the message.
type ConversationEntry struct {
	Turn int64
	Data []byte
}

// maxNamedAgents bounds the names NoAgent lists.
const maxNamedAgents = 20

// NoAgent is the one error for a name that is no agent of the project's
// team, in the same words wherever it is met (ask, send, log, diff, a
// check, a task's owner…): the team's names when the caller has them
// (at most 20), else the command that lists them. It matches ErrNotFound.
func NoAgent(name AgentID, team []AgentID) error {
	if len(team) == 0 {
		return fmt.Errorf("no agent named %q in this project: troupe agents lists its team: %w", name, ErrNotFound)
	}
	names := make([]string, 0, min(len(team), maxNamedAgents)+1)
	for _, a := range team[:min(len(team), maxNamedAgents)] {
		names = append(names, string(a))
	}
	if len(team) > maxNamedAgents {
		names = append(names, fmt.Sprintf("and %d more (troupe agents)", len(team)-maxNamedAgents))
	}
	return fmt.Errorf("no agent named %q in this project: the agents are %s: %w", name, strings.Join(names, ", "), ErrNotFound)
}
