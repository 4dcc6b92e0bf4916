package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// parseArgs reads a tool call's arguments as the model wrote them: one
// JSON object (empty means {}); an object encoded once more as a JSON
// string, as some models do, is taken too. Anything else is an error the
// model is shown.
func parseArgs(raw string) (json.RawMessage, error) {
	b := bytes.TrimSpace([]byte(raw))
	if len(b) == 0 {
		return json.RawMessage("{}"), nil
	}
	if len(b) > maxCallArgs {
		return nil, fmt.Errorf("the arguments are %d bytes, more than %d", len(b), maxCallArgs)
	}
	if b[0] == '"' {
		var inner string
		if err := json.Unmarshal(b, &inner); err == nil {
			b = bytes.TrimSpace([]byte(inner))
		}
	}
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("the arguments are not a JSON object: %s", clipText(string(b), 80))
	}
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		return nil, fmt.Errorf("the arguments are not valid JSON (%v): %s", err, clipText(string(b), 80))
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return nil, fmt.Errorf("the arguments are not valid JSON (%v)", err)
	}
	return c.Bytes(), nil
}

// call runs one tool call and returns the result the model is given. It
// reports the call and its result as events; a tool error is a result
// beginning with "Error: ".
func (s *Session) call(ctx context.Context, turn troupe.TurnID, c toolCall) string {
	name := c.Function.Name
	args, perr := parseArgs(c.Function.Arguments)
	input := args
	if perr != nil {
		input, _ = json.Marshal(c.Function.Arguments) // shown as the model wrote it
	}
	use := &engine.ToolUse{ID: c.ID, Name: name, Input: input}
	if name == "run_command" {
		var a commandArgs
		json.Unmarshal(args, &a)
		use.Limit = time.Duration(commandLimit(a.TimeoutSeconds)) * time.Second
	}
	s.Emit(engine.Event{Kind: engine.EventToolCall, Turn: turn, Tool: use})
	out, err := s.dispatch(ctx, turn, c.ID, name, args, perr)
	isErr := err != nil
	if isErr {
		out = "Error: " + err.Error()
	}
	out = capOutput(out, "ask for less")
	s.Emit(engine.Event{Kind: engine.EventToolResult, Turn: turn, Tool: &engine.ToolUse{ID: c.ID, Name: name, Output: out, IsError: isErr}})
	return out
}

// dispatch runs the tool: troupe's in process, a workspace tool once
// permitted.
func (s *Session) dispatch(ctx context.Context, turn troupe.TurnID, id, name string, args json.RawMessage, perr error) (string, error) {
	kind, ok := s.offered[name]
	if !ok {
		return "", fmt.Errorf("unknown tool %q: your tools are %s", name, strings.Join(s.names, ", "))
	}
	if perr != nil {
		return "", fmt.Errorf("%s: %v: call it again with one JSON object of arguments", name, perr)
	}
	if kind == kindTroupe {
		return s.tools.Call(ctx, name, args)
	}
	if err := s.permit(ctx, turn, id, name, args); err != nil {
		return "", err
	}
	switch name {
	case toolReadFile:
		return s.ws.readFile(args)
	case toolWriteFile:
		return s.ws.writeFile(args)
	case toolEditFile:
		return s.ws.editFile(args)
	case toolListDir:
		return s.ws.listDir(args)
	case toolSearchText:
		return s.ws.searchText(ctx, args)
	case toolRunCommand:
		return runCommand(ctx, args, s.ws.dir, s.env, s.backstop, s.sandbox, s.Bump)
	}
	return "", fmt.Errorf("unknown tool %q", name)
}

// permit puts a write, an edit or a command before the Approver, which
// decides it under the agent's permission_mode and allowed_tools (the one
// decision, internal/permission) or asks the person. Reads are never asked.
// A path is shown as it resolves (a link named by the model is not what is
// written). The request and its decision are reported as an EventPermission.
func (s *Session) permit(ctx context.Context, turn troupe.TurnID, id, name string, args json.RawMessage) error {
	var title string
	var class permission.Class
	switch name {
	case toolWriteFile, toolEditFile:
		var a struct{ Path string }
		json.Unmarshal(args, &a)
		target, err := s.ws.resolve(a.Path)
		if err != nil {
			return err
		}
		class, title = permission.Edit, "wants to change "+clipText(target, 300)
		if target != a.Path {
			title += " (asked as " + clipText(a.Path, 200) + ")"
		}
	case toolRunCommand:
		var a struct{ Command string }
		json.Unmarshal(args, &a)
		class, title = permission.Command, "wants to run: "+clipText(a.Command, 200)
	default:
		return nil
	}
	perm := engine.Permission{ID: id, Turn: turn, Tool: name, Class: class, Input: args, Title: title}
	d := engine.Ask(ctx, s.approver, perm)
	s.Emit(engine.Event{Kind: engine.EventPermission, Turn: turn, Permission: &perm, Decision: &d})
	if !d.Allow {
		why := d.Reason
		if why == "" {
			why = "denied"
		}
		return fmt.Errorf("%s was not allowed: %s", name, why)
	}
	return nil
}
