package fake

import (
	"github.com/troupe-dev/troupe/internal/troupe"

	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// ChildEnv marks a fake agent child: the Engine sets it to "1" in the
// child's environment, and MaybeRunChild runs Main when it is.
const ChildEnv = "TROUPE_FAKE_AGENT"

// MaybeRunChild runs the fake agent and exits when this process was started
// as one (ChildEnv is "1"); otherwise it returns at once. Tests that start
// fake agents with TestCommand call it first thing in TestMain:
//
//	func TestMain(m *testing.M) {
//		fake.MaybeRunChild()
//		os.Exit(m.Run())
//	}
func MaybeRunChild() {
	if os.Getenv(ChildEnv) == "1" {
		os.Exit(Main())
	}
}

// TestCommand is the Options.Command that starts fake agents from a test
// binary: the binary itself, whose TestMain must call MaybeRunChild. The
// -test.run=^$ argument is a guard: a test binary that forgot MaybeRunChild
// runs no test in the child (instead of re-running itself recursively), and
// Start fails because the child never says it is ready.
func TestCommand() []string {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return []string{exe, "-test.run=^$"}
}

// Main is the fake agent's program: it speaks the protocol of protocol.go on
// stdin and stdout, writes diagnostics to stderr, and returns the process's
// exit status: 0 at end of input or on !exit, 3 on !crash, 2 on a bad start.
func Main() int {
	return runChild(os.Stdin, os.Stdout, os.Stderr)
}

// child is the state of the fake agent's single main goroutine; a second
// goroutine only decodes stdin into in.
type child struct {
	in           chan frame // closed at end of input
	out          io.Writer
	errw         io.Writer
	script       []step        // the respond script; nil when there is none
	instructions string        // what the session was started with
	journal      string        // file (relative to the cwd) logging every message received; "" for none
	toolTimeout  time.Duration // the MCP client gives up on a tool call after this; 0: never
	mcpURL       string        // troupe's MCP endpoint; "" to call tools over stdio
	mcpToken     string        // the session's bearer token
	mcpDone      chan frame    // results of MCP tool calls, as tool_result frames
	ignoreEOF    bool
	calls        int64 // the last tool call id

	// The running turn ("" between turns) and its state.
	turn      string
	said      []string
	result    string
	decision  string
	heartbeat time.Duration
}

func runChild(stdin io.Reader, stdout, stderr io.Writer) int {
	c := &child{in: make(chan frame, 16), out: stdout, errw: stderr, mcpDone: make(chan frame, 16),
		mcpURL: os.Getenv(EnvMCPURL)}
	go c.read(stdin) // lives as long as the process
	f, ok := <-c.in
	if !ok {
		return 0
	}
	if f.Type != typeStart {
		fmt.Fprintf(stderr, "fake agent: the first line must be a start frame, not %q\n", f.Type)
		return 2
	}
	c.instructions = f.Instructions
	c.journal = f.Journal
	c.mcpToken = f.MCPToken
	if d, err := time.ParseDuration(f.ToolTimeout); err == nil && d > 0 {
		c.toolTimeout = d
	}
	if f.Respond != "" {
		steps, line, err := parseSteps(f.Respond)
		if err != nil {
			fmt.Fprintf(stderr, "fake agent: respond: line %d: %v\n", line, err)
			return 2
		}
		c.script = steps
	}
	if err := c.write(frame{Type: typeReady}); err != nil {
		return 1
	}
	for {
		f, ok := <-c.in
		if !ok {
			c.eof()
			return 0
		}
		switch f.Type {
		case typeInput:
			if code, exit := c.runTurn(f); exit {
				return code
			}
		case typeInterrupt, typeToolResult:
			// For a turn that already ended: nothing to do.
		default:
			fmt.Fprintf(stderr, "fake agent: unexpected %s frame between turns: ignored\n", f.Type)
		}
	}
}

// read decodes stdin into c.in until end of input.
func (c *child) read(r io.Reader) {
	defer close(c.in)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		f, err := decode(sc.Bytes())
		if err != nil {
			fmt.Fprintf(c.errw, "fake agent: %v: line ignored\n", err)
			continue
		}
		c.in <- f
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(c.errw, "fake agent: read input: %v\n", err)
	}
}

// runTurn runs one input and ends it with one turn_end, unless the process
// must exit: then it returns the exit status and true.
func (c *child) runTurn(f frame) (int, bool) {
	c.turn, c.said, c.result, c.decision, c.heartbeat = f.Turn, nil, "", "", 0
	defer func() { c.turn = "" }()
	var err error
	for _, m := range f.Messages {
		if err = c.message(m); err != nil {
			break
		}
	}
	if code, ok := errors.AsType[exitCode](err); ok {
		return int(code), true
	}
	end := frame{Type: typeTurnEnd, Turn: c.turn, Text: strings.Join(c.said, "\n")}
	if err != nil {
		end.Error = err.Error()
	}
	if err := c.write(end); err != nil {
		return 1, true
	}
	return 0, false
}

// message handles one message of the turn.
func (c *child) message(m wireMessage) error {
	if c.journal != "" {
		if err := c.log(m); err != nil {
			return err
		}
	}
	var steps []step
	switch {
	case hasDirectives(m.Text):
		var err error
		if steps, _, err = parseSteps(m.Text); err != nil {
			return err
		}
	case c.script != nil && newWork(m.Kind):
		steps = c.script
	default:
		return c.say("echo: " + m.Text)
	}
	for _, s := range steps {
		if err := c.poll(); err != nil {
			return err
		}
		if err := c.step(s, vars{text: m.Text, from: m.From, result: c.result, decision: c.decision}); err != nil {
			return err
		}
	}
	return nil
}

// log appends one JSON line for m to the journal, for tests that count
// what each agent received (C6: exactly once, or marked redelivered).
func (c *child) log(m wireMessage) error {
	f, err := os.OpenFile(c.journal, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	line, _ := json.Marshal(m)
	_, err = f.Write(append(line, '\n'))
	return errors.Join(err, f.Close())
}

// newWork reports whether a message of this kind is work the respond script
// handles; replies, delegation results and task completions are
// acknowledged with echo (a script reacting to them would loop).
func newWork(kind string) bool {
	switch troupe.MessageKind(kind) {
	case troupe.KindReply, troupe.KindResult, troupe.KindTask:
		return false
	}
	return true
}

// step runs one line.
func (c *child) step(s step, v vars) error {
	d := directives[s.name]
	switch s.name {
	case "":
		return c.say(v.expand(s.line))
	case "say":
		return c.say(v.expand(s.args[0]))
	case "sleep":
		dur, err := duration(s.name, v.expand(s.args[0]), 0)
		if err != nil {
			return err
		}
		_, err = c.wait(dur, 0)
		return err
	case "stream":
		dur, err := duration(s.name, v.expand(s.args[0]), 0)
		if err != nil {
			return err
		}
		every, err := duration(s.name, v.expand(s.args[1]), time.Millisecond)
		if err != nil {
			return err
		}
		for range dur / every {
			if _, err := c.wait(every, 0); err != nil {
				return err
			}
			if err := c.output("."); err != nil {
				return err
			}
		}
		return nil
	case "ask", "send", "delegate", "reply", "bg":
		vals := make([]string, len(s.args))
		for i, a := range s.args {
			vals[i] = v.expand(a)
		}
		return c.call(d.tool, toolArgs(d, vals))
	case "tool":
		args, err := objectArgs(json.RawMessage(v.expandJSON(s.args[1])))
		if err != nil {
			return fmt.Errorf("!tool %s: %w", s.args[0], err)
		}
		return c.call(v.expand(s.args[0]), args)
	case "think":
		return c.write(frame{Type: typeThinking, Turn: c.turn, Text: v.expand(s.args[0])})
	case "permission":
		input := s.args[1]
		if input == "" {
			input = "{}"
		}
		args, err := objectArgs(json.RawMessage(v.expandJSON(input)))
		if err != nil {
			return fmt.Errorf("!permission %s: %w", s.args[0], err)
		}
		return c.askPermission(v.expand(s.args[0]), args)
	case "fail":
		return errors.New(v.expand(s.args[0]))
	case "crash":
		fmt.Fprintln(c.errw, "fake agent crashing on purpose")
		return exitCode(3)
	case "exit":
		return exitCode(0)
	case "ignore-eof":
		c.ignoreEOF = true
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
	case "heartbeat":
		every, err := duration(s.name, v.expand(s.args[0]), time.Millisecond)
		if err != nil {
			return err
		}
		c.heartbeat = every
	case "env":
		name := v.expand(s.args[0])
		if val, ok := os.LookupEnv(name); ok {
			return c.say(name + "=" + val)
		}
		return c.say(name + " unset")
	case "cwd":
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("!cwd: %w", err)
		}
		return c.say(wd)
	case "instructions":
		return c.say(c.instructions)
	case "token":
		return c.say(c.mcpToken)
	case "sh":
		// Asked like a CLI's shell tool: the agent's permission_mode and
		// allowed_tools ("Bash") decide, or the person.
		command := v.expand(s.args[0])
		input, _ := json.Marshal(map[string]string{"command": command})
		if err := c.askPermission("Bash", input); err != nil {
			return err
		}
		if c.decision != "allow" {
			return c.say("!sh not run: " + c.decision)
		}
		out, err := exec.Command("/bin/sh", "-c", command).CombinedOutput()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			return fmt.Errorf("!sh: %w", err)
		}
		return c.say(fmt.Sprintf("%sexit %d", out, code))
	}
	return nil
}

// duration parses a directive's duration argument, at least min.
func duration(directive, s string, min time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < min {
		return 0, fmt.Errorf("!%s: bad duration %q: write a Go duration of at least %v, such as 300ms or 2s", directive, s, min)
	}
	return d, nil
}

// call asks the parent to run a tool and waits for its result, which
// becomes {result}.
func (c *child) call(tool string, args json.RawMessage) error {
	c.calls++
	id := c.calls
	if c.mcpURL != "" {
		// The parent runs nothing: tell it what the call is, for its events.
		if err := c.write(frame{Type: typeToolUse, Turn: c.turn, ID: id, Tool: tool, Args: args}); err != nil {
			return err
		}
		turn := c.turn
		go func() { // ends with its HTTP call; its result may outlive the turn
			res, errText := mcpCall(c.mcpURL, c.mcpToken, tool, args, c.toolTimeout)
			c.mcpDone <- frame{Type: typeToolResult, Turn: turn, ID: id, Result: res, Error: errText}
		}()
	} else if err := c.write(frame{Type: typeToolCall, Turn: c.turn, ID: id, Tool: tool, Args: args}); err != nil {
		return err
	}
	f, err := c.wait(-1, id)
	if err != nil {
		return err
	}
	if c.mcpURL != "" {
		if err := c.write(frame{Type: typeToolDone, Turn: c.turn, ID: id, Result: f.Result, Error: f.Error}); err != nil {
			return err
		}
	}
	c.result = f.Result
	if f.Error != "" {
		c.result = "error: " + f.Error
	}
	return nil
}

// askPermission asks the parent whether the agent may use tool and waits
// for the decision, which becomes {decision}.
func (c *child) askPermission(tool string, input json.RawMessage) error {
	c.calls++
	id := c.calls
	if err := c.write(frame{Type: typePermission, Turn: c.turn, ID: id, Tool: tool, Args: input}); err != nil {
		return err
	}
	f, err := c.wait(-1, id)
	if err != nil {
		return err
	}
	c.decision = "allow"
	if !f.Allow {
		c.decision = "deny"
		if f.Reason != "" {
			c.decision += ": " + f.Reason
		}
	}
	return nil
}

// wait waits for d (forever when d < 0) or, when call is not 0, until the
// result of that tool call (or the decision of that permission) arrives. It ends early on an interrupt of the
// turn or at end of input, and emits heartbeat chunks meanwhile.
func (c *child) wait(d time.Duration, call int64) (frame, error) {
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	var tick <-chan time.Time
	if c.heartbeat > 0 {
		t := time.NewTicker(c.heartbeat)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case f, ok := <-c.in:
			if !ok {
				return frame{}, c.eof()
			}
			if err := c.during(f); err != nil {
				return frame{}, err
			}
			if call != 0 && (f.Type == typeToolResult || f.Type == typeDecision) && f.ID == call && f.Turn == c.turn {
				return f, nil
			}
		case f := <-c.mcpDone:
			if call != 0 && f.ID == call && f.Turn == c.turn {
				return f, nil
			}
		case <-timeout:
			return frame{}, nil
		case <-tick:
			if err := c.output("."); err != nil {
				return frame{}, err
			}
		}
	}
}

// poll handles the frames already received, without waiting.
func (c *child) poll() error {
	for {
		select {
		case f, ok := <-c.in:
			if !ok {
				return c.eof()
			}
			if err := c.during(f); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// during handles a frame received while a turn runs.
func (c *child) during(f frame) error {
	switch {
	case f.Type == typeInterrupt && f.Turn == c.turn:
		return errInterrupted
	case f.Type == typeInput:
		fmt.Fprintf(c.errw, "fake agent: input for turn %s while turn %s runs: ignored\n", f.Turn, c.turn)
	}
	return nil
}

// eof is the end of input: exit, unless told to ignore it (!ignore-eof):
// then wait to be killed.
func (c *child) eof() error {
	for c.ignoreEOF {
		time.Sleep(time.Hour)
	}
	return exitCode(0)
}

// say outputs a line and adds it to the turn's final text.
func (c *child) say(text string) error {
	c.said = append(c.said, text)
	return c.output(text)
}

func (c *child) output(text string) error {
	return c.write(frame{Type: typeOutput, Turn: c.turn, Text: text})
}

// write sends one frame to the parent; on failure the process must exit.
func (c *child) write(f frame) error {
	b, err := encode(f)
	if err == nil {
		_, err = c.out.Write(b)
	}
	if err != nil {
		fmt.Fprintf(c.errw, "fake agent: write: %v\n", err)
		return exitCode(1)
	}
	return nil
}
