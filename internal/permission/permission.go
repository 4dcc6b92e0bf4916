// Package permission is the one decision of what an agent may do without
// asking the person (contract C15). Everything an agent can do that runs a
// command or changes a file — its engine's own tools when the engine asks,
// the openai engine's workspace tools, troupe's own tools (a background
// task is a command, a memory note is a file) — is classed, and Decide
// settles it from the agent's permission_mode and allowed_tools: allowed
// at once, denied at once, or put before the person.
//
// Who calls it: the runtime's approver (every engine's permission
// request) and the runtime's tool host (every call of troupe's own tools).
// The package holds no state and imports only the standard library; any
// package may import it.
package permission

import (
	"fmt"
	"slices"
	"strings"
)

// Class is what a tool does, as far as the person's approval goes.
type Class int

const (
	// Unknown is a tool troupe cannot class (an engine's own tool reported
	// only by name): allowed by allowed_tools, else the person decides.
	// The engine has applied its own permission mode before asking.
	Unknown Class = iota
	// Talk is messaging, listing and reading troupe's own records: never asked.
	Talk
	// Read reads the agent's workspace: never asked.
	Read
	// Edit changes a file.
	Edit
	// Command runs a program.
	Command
)

func (c Class) String() string {
	switch c {
	case Talk:
		return "talk"
	case Read:
		return "read"
	case Edit:
		return "edit"
	case Command:
		return "command"
	}
	return "unknown"
}

// The permission modes troupe knows. Claude Code takes them all; an
// engine's Check says which it accepts. "" is the engine's default, which
// troupe treats as Default.
const (
	Default     = "default"
	AcceptEdits = "acceptEdits"
	Bypass      = "bypassPermissions"
	Plan        = "plan"
	DontAsk     = "dontAsk"
	Auto        = "auto"
	Manual      = "manual"
)

// ranks orders the modes from the strictest, by what Decide lets through
// without the person: dontAsk (denies all but allowed_tools), plan
// (denies edits and commands), then the modes that ask, acceptEdits, auto
// (the engine decides for itself), bypassPermissions. "" ranks as default.
var ranks = map[string]int{
	DontAsk: 0, Plan: 1, Default: 2, Manual: 2, "": 2, AcceptEdits: 3, Auto: 4, Bypass: 5,
}

// Rank returns where mode sits in the order of permission modes, from 0
// (the strictest), and false for a mode troupe does not know. Moving an
// agent up the order, or to or from an unknown mode, widens what it may do
// (contract C17: the person approves it).
func Rank(mode string) (int, bool) {
	r, ok := ranks[mode]
	return r, ok
}

// Verdict is Decide's answer.
type Verdict int

const (
	// Ask puts the request before the person.
	Ask Verdict = iota
	// Allow lets it run at once.
	Allow
	// Deny refuses it at once; Decide's reason says why.
	Deny
)

// TroupePrefix is how Claude Code names troupe's tools (mcp__troupe__<tool>).
const TroupePrefix = "mcp__troupe__"

// Decide settles a use of tool, of class c, by an agent whose
// permission_mode is mode and whose allowed_tools are allowed. A tool in
// allowed_tools (by its name, or troupe's tools also as
// mcp__troupe__<name>) is allowed in every mode; otherwise the table below
// (the README's permission table says the same):
//
//	mode               talk, read   edit    command   unknown
//	default, "" ,
//	auto, manual       allow        ask     ask       ask
//	acceptEdits        allow        allow   ask       ask
//	bypassPermissions  allow        allow   allow     allow
//	plan               allow        deny    deny      ask
//	dontAsk            allow        deny    deny      deny
//
// reason is set for Deny.
func Decide(mode string, allowed []string, tool string, c Class) (v Verdict, reason string) {
	if c == Talk || c == Read {
		return Allow, ""
	}
	if slices.Contains(allowed, tool) || slices.Contains(allowed, TroupePrefix+tool) {
		return Allow, ""
	}
	switch mode {
	case Bypass:
		return Allow, ""
	case AcceptEdits:
		if c == Edit {
			return Allow, ""
		}
	case Plan:
		if c == Edit || c == Command {
			return Deny, fmt.Sprintf("the agent is in permission_mode %q: it plans and changes nothing (%s is a%s)", Plan, tool, article(c))
		}
	case DontAsk:
		return Deny, fmt.Sprintf("the agent is in permission_mode %q and %s is not in its allowed_tools: add it there to allow it", DontAsk, tool)
	}
	return Ask, ""
}

func article(c Class) string {
	s := c.String()
	if strings.IndexByte("aeiou", s[0]) >= 0 {
		return "n " + s
	}
	return " " + s
}
