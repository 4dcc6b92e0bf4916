// Package tool is the catalogue of tools troupe offers agents: each domain
// declares its own (the runtime: ask_agent, reply, send_message, delegate,
// list_agents; internal/task: the background-task tools; internal/memory:
// the notes), as a Spec (what the agent sees: name, description, JSON
// Schema of the arguments) and a Handler, and one Catalog composes them.
// The MCP endpoint serves whatever the catalogue holds; an engine that runs
// its own model loop gets the same specs through engine.Tools.
//
// A Handler acts as its Caller, the RuntimeKey of the agent session that
// made the call (C2): names resolve inside the caller's project only.
//
// A Catalog is immutable once built and safe for concurrent use; handlers
// must be safe for concurrent use too (an ask can wait for hours while other
// calls go on). The package imports only the standard library and
// internal/troupe; any package may import it.
package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Spec describes one tool to an agent.
type Spec struct {
	Name        string
	Description string
	Schema      json.RawMessage // JSON Schema (2020-12) of the arguments object
}

// Caller is who makes a tool call.
type Caller struct {
	Key troupe.RuntimeKey // the calling agent (C2)
	Dir string            // its project's folder
	// Workdir is the agent's working folder: its worktree, or "" when it
	// works in the project folder (Dir).
	Workdir string
	// Sandbox is the caller's sandbox: the processes a tool starts for it
	// (a background task) run in it. nil: none (the person, or an agent
	// whose sandbox is off).
	Sandbox *sandbox.Policy
	// Limit is how long the caller's client lets one tool call run (0:
	// no limit); a tool that can wait longer answers before it (C4).
	Limit time.Duration
	// Runner is the runner the caller runs on ("": this machine): a tool
	// that would start a process for it here refuses.
	Runner string
}

// Handler runs one call with its raw JSON arguments. A returned error is a
// tool error: its text is shown to the agent, so it says what to do.
type Handler func(ctx context.Context, c Caller, args json.RawMessage) (string, error)

// Tool is a Spec and its Handler.
type Tool struct {
	Spec
	Handle Handler
	// Class is what the tool does for the permission gate (C15): a tool
	// that runs a command or changes a file is decided under the caller's
	// permission_mode and allowed_tools before Handle runs. The zero value
	// is permission.Unknown, which asks: every tool says its class.
	Class permission.Class
	// Title, when set, says in a sentence what a call asks to do ("run:
	// make test"), for the person who decides it.
	Title func(args json.RawMessage) string
}

// Catalog is a set of tools with unique names, in the order given.
type Catalog struct {
	tools  []Tool
	byName map[string]int
}

// NewCatalog composes the tools of every domain. It panics on an empty or
// duplicate name or a nil handler: that is a wiring mistake.
func NewCatalog(groups ...[]Tool) *Catalog {
	c := &Catalog{byName: map[string]int{}}
	for _, g := range groups {
		for _, t := range g {
			if t.Name == "" || t.Handle == nil {
				panic(fmt.Sprintf("tool.NewCatalog: tool %q without a name or a handler", t.Name))
			}
			if _, dup := c.byName[t.Name]; dup {
				panic(fmt.Sprintf("tool.NewCatalog: tool %q declared twice", t.Name))
			}
			c.byName[t.Name] = len(c.tools)
			c.tools = append(c.tools, t)
		}
	}
	return c
}

// Specs lists the tools' specs in catalogue order. The slice is a copy.
func (c *Catalog) Specs() []Spec {
	out := make([]Spec, len(c.tools))
	for i, t := range c.tools {
		out[i] = t.Spec
	}
	return out
}

// Lookup returns the named tool.
func (c *Catalog) Lookup(name string) (Tool, bool) {
	i, ok := c.byName[name]
	if !ok {
		return Tool{}, false
	}
	return c.tools[i], true
}

// Names lists the tools' names, comma-separated, for error messages.
func (c *Catalog) Names() string {
	names := make([]string, len(c.tools))
	for i, t := range c.tools {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// Call runs the named tool as c. An unknown name is an error naming the
// tools there are.
func (c *Catalog) Call(ctx context.Context, caller Caller, name string, args json.RawMessage) (string, error) {
	i, ok := c.byName[name]
	if !ok {
		return "", fmt.Errorf("unknown tool %q: the tools are %s", name, c.Names())
	}
	return c.tools[i].Handle(ctx, caller, args)
}

// DecodeArgs decodes tool arguments strictly (unknown fields refused) and
// names the first missing required field, in sentences an agent can act on.
func DecodeArgs(args json.RawMessage, v any, required ...string) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad arguments: %v", err)
	}
	var present map[string]json.RawMessage
	_ = json.Unmarshal(args, &present)
	for _, f := range required {
		if raw, ok := present[f]; !ok || string(raw) == `""` || string(raw) == "null" {
			return fmt.Errorf("missing argument %q", f)
		}
	}
	return nil
}

// JSON renders v indented, for tool results an agent reads.
func JSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// maxTitleArg is how much of an argument a Title shows; the whole input
// stays in the permission request.
const maxTitleArg = 200

// ArgTitle returns a Title for a tool whose call is best said by one string
// argument: verb, then field's value (cut at 200 bytes, "…" where cut).
func ArgTitle(verb, field string) func(json.RawMessage) string {
	return func(args json.RawMessage) string {
		var m map[string]any
		_ = json.Unmarshal(args, &m)
		s, _ := m[field].(string)
		s, _ = clip.Ellipsis(s, maxTitleArg)
		return verb + " " + s
	}
}
