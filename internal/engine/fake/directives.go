package fake

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Directives a message or a respond script may carry, one per line, each
// line starting with "!". A message with at least one directive line runs
// its lines in order; its other lines are said as-is; blank lines are
// skipped. A message without directives is answered by the respond script,
// or else by "echo: <text>".
//
//	!say TEXT             say TEXT: one output event, and a line of the final text
//	!sleep DUR            stay silent for DUR (a Go duration: 300ms, 2s, 1h)
//	!stream DUR EVERY     emit a "." chunk every EVERY, DUR/EVERY times (no final text)
//	!ask AGENT QUESTION   tool ask_agent {"to":AGENT,"question":QUESTION}
//	!send AGENT TEXT      tool send_message {"to":AGENT,"text":TEXT}
//	!delegate AGENT TEXT  tool delegate {"to":AGENT,"task":TEXT}
//	!reply TEXT           tool reply {"text":TEXT}
//	!bg COMMAND           tool run_in_background {"command":COMMAND}
//	!tool NAME JSON       tool NAME with JSON (an object) as its args
//	!think TEXT           think TEXT: one thinking event (not in the final text)
//	!permission TOOL [JSON]  ask permission to use TOOL (JSON: its input, default {});
//	                      the decision becomes {decision}: "allow", or "deny: REASON"
//	!fail REASON          end the turn with error REASON
//	!crash                print "fake agent crashing on purpose" to stderr, exit 3
//	!exit                 exit 0 at once, mid-turn
//
// Templates, expanded in every line when it runs: {text} the message's text,
// {from} its sender, {result} the turn's last tool result ("error: <msg>"
// when the tool failed), {decision} the turn's last permission decision. In !tool's JSON they are expanded JSON-escaped, so
// {"q":"{text}"} stays valid.
//
// Directives for tests of process handling and diagnostics:
//
//	!ignore-eof           from now on, keep running when stdin closes
//	!ignore-term          from now on, ignore SIGTERM
//	!heartbeat EVERY      for the rest of the turn, emit a "." chunk every EVERY
//	                      while waiting (in !sleep and for tool results)
//	!env NAME             say "NAME=value", or "NAME unset"
//	!cwd                  say the working directory
//	!instructions         say the instructions the session was started with
//	!token                say the session's MCP token (tests of C2; a real
//	                      agent could print its token just the same)
//	!sh COMMAND           ask permission for tool "Bash" {"command": COMMAND}
//	                      (as a CLI's shell tool does), then run /bin/sh -c
//	                      COMMAND as the fake's own child, in its folder, and
//	                      say its output and "exit N" (tests of the sandbox,
//	                      C16); denied: say "!sh not run: deny.."
var directives = map[string]directive{
	"say":          {usage: "!say TEXT", args: 1},
	"sleep":        {usage: "!sleep DUR", args: 1, required: 1},
	"stream":       {usage: "!stream DUR EVERY", args: 2, required: 2},
	"ask":          {usage: "!ask AGENT QUESTION", args: 2, required: 2, tool: "ask_agent", keys: []string{"to", "question"}},
	"send":         {usage: "!send AGENT TEXT", args: 2, required: 2, tool: "send_message", keys: []string{"to", "text"}},
	"delegate":     {usage: "!delegate AGENT TEXT", args: 2, required: 2, tool: "delegate", keys: []string{"to", "task"}},
	"reply":        {usage: "!reply TEXT", args: 1, required: 1, tool: "reply", keys: []string{"text"}},
	"bg":           {usage: "!bg COMMAND", args: 1, required: 1, tool: "run_in_background", keys: []string{"command"}},
	"tool":         {usage: "!tool NAME JSON", args: 2, required: 1},
	"think":        {usage: "!think TEXT", args: 1, required: 1},
	"permission":   {usage: "!permission TOOL [JSON]", args: 2, required: 1},
	"fail":         {usage: "!fail REASON", args: 1, required: 1},
	"crash":        {usage: "!crash"},
	"exit":         {usage: "!exit"},
	"ignore-eof":   {usage: "!ignore-eof"},
	"ignore-term":  {usage: "!ignore-term"},
	"heartbeat":    {usage: "!heartbeat EVERY", args: 1, required: 1},
	"env":          {usage: "!env NAME", args: 1, required: 1},
	"cwd":          {usage: "!cwd"},
	"instructions": {usage: "!instructions"},
	"token":        {usage: "!token"},
	"sh":           {usage: "!sh COMMAND", args: 1, required: 1},
}

// directive describes one directive's arguments: args fields separated by
// whitespace, the last one taking the rest of the line; the first required
// of them must not be empty. tool and keys map the directive to a troupe
// tool and the names of its string arguments.
type directive struct {
	usage    string
	args     int
	required int
	tool     string
	keys     []string
}

// step is one parsed line: a directive (name without "!") with its raw,
// unexpanded arguments, or a plain line to say (name "").
type step struct {
	name string
	args []string
	line string
}

// hasDirectives reports whether text has a directive line.
func hasDirectives(text string) bool {
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimLeft(line, " \t"), "!") {
			return true
		}
	}
	return false
}

// parseSteps parses the lines of a message with directives or of a respond
// script. On error it returns the 1-based number of the bad line.
func parseSteps(text string) ([]step, int, error) {
	var steps []step
	n := 0
	for line := range strings.Lines(text) {
		n++
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		s, err := parseStep(line)
		if err != nil {
			return nil, n, err
		}
		steps = append(steps, s)
	}
	return steps, 0, nil
}

// parseStep parses one non-blank line.
func parseStep(line string) (step, error) {
	rest, ok := strings.CutPrefix(strings.TrimLeft(line, " \t"), "!")
	if !ok {
		return step{line: line}, nil
	}
	name := rest
	if i := strings.IndexAny(rest, " \t"); i >= 0 {
		name, rest = rest[:i], rest[i+1:]
	} else {
		rest = ""
	}
	d, ok := directives[name]
	if !ok {
		return step{}, fmt.Errorf("unknown directive %q: see the fake engine's directives", "!"+name)
	}
	s := step{name: name, line: line}
	for i := range d.args {
		rest = strings.TrimLeft(rest, " \t")
		var field string
		if i == d.args-1 {
			field = strings.TrimRight(rest, " \t")
		} else if j := strings.IndexAny(rest, " \t"); j >= 0 {
			field, rest = rest[:j], rest[j:]
		} else {
			field, rest = rest, ""
		}
		if i < d.required && field == "" {
			return step{}, fmt.Errorf("!%s: missing arguments: write %q", name, d.usage)
		}
		s.args = append(s.args, field)
	}
	if d.args == 0 && strings.TrimSpace(rest) != "" {
		return step{}, fmt.Errorf("!%s: takes no arguments: write %q", name, d.usage)
	}
	return s, nil
}

// vars are the values of the templates of one message.
type vars struct {
	text, from, result, decision string
}

func (v vars) expand(s string) string {
	return strings.NewReplacer("{text}", v.text, "{from}", v.from, "{result}", v.result, "{decision}", v.decision).Replace(s)
}

// expandJSON expands templates with JSON-escaped values, for use inside
// JSON strings.
func (v vars) expandJSON(s string) string {
	return strings.NewReplacer("{text}", jsonEscape(v.text), "{from}", jsonEscape(v.from), "{result}", jsonEscape(v.result),
		"{decision}", jsonEscape(v.decision)).Replace(s)
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b[1 : len(b)-1])
}

// toolArgs renders the args object of a tool directive (ask, send, …).
func toolArgs(d directive, values []string) json.RawMessage {
	m := make(map[string]string, len(d.keys))
	for i, k := range d.keys {
		m[k] = values[i]
	}
	b, _ := json.Marshal(m) // a map of strings always marshals
	return b
}

// The options of the [agent.fake] table.
const (
	optRespond     = "respond"      // directive lines run for every new piece of work
	optJournal     = "journal"      // a file (relative to the project) where the agent logs every message it gets
	optToolTimeout = "tool_timeout" // how long its MCP client lets one tool call run, like a real CLI's
)

// fakeOptions are the parsed options of the [agent.fake] table.
type fakeOptions struct {
	respond     string
	journal     string
	toolTimeout time.Duration
}

// optionError is a bad [agent.fake] option: key is the option ("" for the
// table), msg what is wrong with it and what to write instead.
type optionError struct {
	agent troupe.AgentID
	key   string
	msg   string
}

func (e *optionError) Error() string {
	return fmt.Sprintf("agent %q: [agent.fake]: %s", e.agent, e.msg)
}

// field is the error as the team loader reports it (engine.Engine.Check).
func (e *optionError) field() *troupe.FieldError {
	f := "fake"
	if e.key != "" {
		f += "." + e.key
	}
	return &troupe.FieldError{Field: f, Msg: e.msg}
}

// parseOptions checks the [agent.fake] table.
func parseOptions(agent troupe.AgentID, opts map[string]any) (fakeOptions, error) {
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var o fakeOptions
	bad := func(key, format string, args ...any) error {
		return &optionError{agent: agent, key: key, msg: fmt.Sprintf(format, args...)}
	}
	for _, k := range keys {
		switch k {
		case optRespond:
			s, ok := opts[k].(string)
			if !ok {
				return o, bad(k, "respond must be a string of directive lines, not %T", opts[k])
			}
			if _, line, err := parseSteps(s); err != nil {
				return o, bad(k, "respond: line %d: %v", line, err)
			}
			o.respond = s
		case optJournal:
			s, ok := opts[k].(string)
			if !ok || !filepath.IsLocal(s) {
				return o, bad(k, "journal must be a file path inside the project, like \"agent.journal\"")
			}
			o.journal = s
		case optToolTimeout:
			s, _ := opts[k].(string)
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				return o, bad(k, "tool_timeout must be a duration like \"30s\", not %v", opts[k])
			}
			o.toolTimeout = d
		default:
			return o, bad(k, "unknown option %q: valid options are %s, %s, %s", k, optJournal, optRespond, optToolTimeout)
		}
	}
	return o, nil
}

// errInterrupted ends a turn that the parent interrupted.
var errInterrupted = errors.New("interrupted")

// exitCode asks the child to exit at once with the given status.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }
