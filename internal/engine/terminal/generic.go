package terminal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/proc"
	"github.com/troupe-dev/troupe/internal/term"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Settle is how long a generic program's screen must stay unchanged,
// showing its idle pattern, before it counts as idle.
const Settle = 300 * time.Millisecond

// The keys of the [agent.terminal] table.
const (
	optIdle      = "idle"
	optBusy      = "busy"
	optDialog    = "dialog"
	optInterrupt = "interrupt"
	optQuit      = "quit"
	optInput     = "input"
)

var optKeys = []string{optBusy, optDialog, optIdle, optInput, optInterrupt, optQuit}

// patterns are an agent's [agent.terminal] table, parsed.
type patterns struct {
	idle, busy, dialog []term.Pattern
	interrupt          string        // keys; default Ctrl-C
	quit               string        // typed then Enter; "": Ctrl-D
	input              inputTemplate // nil: the messages' text alone
}

// parsePatterns parses the [agent.terminal] table: idle (required), busy
// and dialog, each a pattern or a list of them ("/re/" a regular
// expression, else a literal matched whitespace-insensitively), interrupt
// (keys, default Ctrl-C), quit (a command typed to leave, default
// Ctrl-D) and input (a template of what a message is typed as: input.go).
func parsePatterns(opts map[string]any) (patterns, error) {
	p := patterns{interrupt: "\x03"}
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field := "terminal." + k
		switch k {
		case optIdle, optBusy, optDialog:
			list, err := patternList(opts[k])
			if err != nil {
				return p, &troupe.FieldError{Field: field, Msg: err.Error()}
			}
			switch k {
			case optIdle:
				p.idle = list
			case optBusy:
				p.busy = list
			default:
				p.dialog = list
			}
		case optInterrupt, optQuit:
			s, ok := opts[k].(string)
			if !ok {
				return p, &troupe.FieldError{Field: field, Msg: fmt.Sprintf(`must be a string like "\u0003", not %v`, opts[k])}
			}
			if k == optInterrupt {
				if s == "" {
					return p, &troupe.FieldError{Field: field, Msg: `must not be empty: leave it out for Ctrl-C`}
				}
				p.interrupt = s
			} else {
				p.quit = s
			}
		case optInput:
			s, ok := opts[k].(string)
			if !ok {
				return p, &troupe.FieldError{Field: field, Msg: fmt.Sprintf(`must be a string like "{text}", not %v`, opts[k])}
			}
			t, err := parseInput(s)
			if err != nil {
				return p, &troupe.FieldError{Field: field, Msg: err.Error()}
			}
			p.input = t
		default:
			return p, &troupe.FieldError{Field: field, Msg: "unknown option: the [agent.terminal] table takes " + strings.Join(optKeys, ", ")}
		}
	}
	if len(p.idle) == 0 {
		return p, &troupe.FieldError{Field: "terminal.idle", Msg: `missing: say what the program's prompt looks like when it waits for input, e.g. idle = "> " under [agent.terminal]`}
	}
	return p, nil
}

func patternList(v any) ([]term.Pattern, error) {
	var srcs []string
	switch v := v.(type) {
	case string:
		srcs = []string{v}
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("must be a string or a list of strings, not %v", v)
			}
			srcs = append(srcs, s)
		}
	case []string:
		srcs = v
	default:
		return nil, fmt.Errorf("must be a string or a list of strings, not %v", v)
	}
	var out []term.Pattern
	for _, s := range srcs {
		if strings.TrimSpace(s) == "" {
			return nil, errors.New("a pattern must not be blank")
		}
		p, err := term.ParsePattern(s)
		if err != nil {
			return nil, fmt.Errorf("bad regular expression %q: %v", s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Options configures the generic Engine.
type Options struct {
	Logger      *slog.Logger
	StopTimeout time.Duration
	// Environ is what the child's environment is built from; nil means
	// os.Environ.
	Environ func() []string
	// QuietFor: see DefaultQuietFor.
	QuietFor time.Duration
}

// Engine runs any CLI in terminal mode (engine = "terminal").
type Engine struct{ o Options }

var _ engine.Engine = (*Engine)(nil)

// New returns the generic terminal engine.
func New(o Options) *Engine {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Environ == nil {
		o.Environ = os.Environ
	}
	return &Engine{o: o}
}

// Check implements engine.Engine: command is set, and [agent.terminal]
// says at least what idle looks like. The engine always runs on a
// terminal: mode may be left out or set to "terminal".
func (e *Engine) Check(agent troupe.AgentSpec) error {
	if agent.Command == "" {
		return &troupe.FieldError{Field: "command", Msg: `missing: the terminal engine runs the CLI you name, e.g. command = "aider"`}
	}
	if _, err := parsePatterns(agent.Options); err != nil {
		return err
	}
	return nil
}

// passedVars are the daemon's variables a generic CLI gets (C11): the
// person's session and locale; its own keys come from the agent's env.
var passedVars = []string{"HOME", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"}

// Start implements engine.Engine.
func (e *Engine) Start(ctx context.Context, spec engine.StartSpec) (engine.Session, error) {
	name := string(spec.Key.Agent)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start terminal agent %s: %w", name, err)
	}
	p, err := parsePatterns(spec.Agent.Options)
	if err != nil {
		return nil, fmt.Errorf("start terminal agent %s: %w", name, err)
	}
	if err := proc.CheckDir(spec.Dir); err != nil {
		return nil, fmt.Errorf("start terminal agent %s: working directory: %w", name, err)
	}
	cmd, err := exec.LookPath(spec.Agent.Command)
	if err != nil {
		return nil, fmt.Errorf("start terminal agent %s: find %q: %w: set command to the CLI's path in .troupe/team.toml", name, spec.Agent.Command, err)
	}
	log := spec.Logger
	if log == nil {
		log = e.o.Logger
	}
	log = log.With("project", spec.Key.Project, "agent", spec.Key.Agent)
	env := buildEnv(e.o.Environ(), passedVars, spec.Agent.Env)
	s, err := Launch(term.Options{
		Argv:        append([]string{cmd}, spec.Agent.Args...),
		Dir:         spec.Dir,
		Env:         env,
		Logger:      log,
		StopTimeout: e.o.StopTimeout,
		Sandbox:     engine.EngineSandbox(spec),
	}, SessionSpec{Name: name, Driver: newGeneric(p), Logger: log, QuietFor: e.o.QuietFor})
	if err != nil {
		return nil, fmt.Errorf("start terminal agent %s: %w", name, err)
	}
	return s, nil
}

// buildEnv is the child's environment: the daemon's variables named in
// allow, then the agent's env table.
func buildEnv(environ, allow []string, agentEnv map[string]string) []string {
	var extra []string
	for _, kv := range environ {
		if k, _, ok := strings.Cut(kv, "="); ok && slices.Contains(allow, k) {
			extra = append(extra, kv)
		}
	}
	for k, v := range agentEnv {
		extra = append(extra, k+"="+v)
	}
	return proc.Env(nil, nil, extra...)
}

// generic is the Driver of a CLI troupe knows only by its patterns.
type generic struct {
	p patterns

	lastText   string    // the screen's text at the last Observe
	changedAt  time.Time // when it last changed
	startRow   int       // where the submitted input is, in Screen.All's lines
	submitText string    // the screen's text at submission
	last       term.Screen
	emitted    int  // rows of the turn (absolute, Screen.All's) already given as output
	turnOn     bool // a turn was submitted and has not ended
}

func newGeneric(p patterns) *generic { return &generic{p: p, changedAt: time.Now()} }

func (g *generic) Poll() time.Duration { return Settle / 2 }

// Input implements Inputter: the messages' text, through the agent's
// input template if it has one; never troupe's framing.
func (g *generic) Input(in engine.Input) string { return g.p.input.render(in) }

// TakeOutput: the turn's rows above the cursor's (finished lines: the
// cursor's row may still change, a spinner or the prompt) not given yet.
func (g *generic) TakeOutput() []string {
	if !g.turnOn {
		return nil
	}
	s := g.last
	lines := strings.Split(s.All(), "\n")
	upTo := min(len(s.Scrollback)+s.CursorY, len(lines)) // the cursor's row, absolute
	from := max(g.emitted, g.startRow+1)
	if from >= upTo {
		return nil
	}
	g.emitted = upTo
	text := strings.TrimRight(strings.Join(lines[from:upTo], "\n"), "\n ")
	if strings.TrimSpace(text) == "" {
		return nil
	}
	return []string{text}
}
func (g *generic) InterruptKeys() []byte { return []byte(g.p.interrupt) }

func (g *generic) Quit(ctx context.Context, w Writer) {
	if g.p.quit == "" {
		_ = w.Write(ctx, []byte{0x04})
		return
	}
	_ = w.Write(ctx, []byte(term.PasteSafe(g.p.quit)+"\r"))
}

func matchAny(ps []term.Pattern, text string) (term.Pattern, bool) {
	for _, p := range ps {
		if p.Match(text) {
			return p, true
		}
	}
	return term.Pattern{}, false
}

// Observe: a dialog pattern near the cursor → blocked; a busy pattern
// near the cursor → busy; the idle pattern on the cursor's row with the
// screen unchanged for Settle → idle; else starting. "Near the cursor" is
// from two rows above the cursor's to the bottom: where a program shows
// its prompt, its spinner and its questions (older lines above, its
// answers included, are not read).
func (g *generic) Observe(s term.Screen) Observation {
	g.last = s
	text := s.Text()
	if text != g.lastText {
		g.lastText, g.changedAt = text, time.Now()
	}
	near, row := "", ""
	if len(s.Lines) > 0 {
		y := min(max(s.CursorY, 0), len(s.Lines)-1)
		near = strings.Join(s.Lines[max(y-2, 0):], "\n")
		row = s.Lines[y]
	}
	if p, ok := matchAny(g.p.dialog, near); ok {
		return Observation{State: Blocked, Why: fmt.Sprintf("the screen shows a dialog (pattern %q)", p.String())}
	}
	if _, ok := matchAny(g.p.busy, near); ok {
		return Observation{State: Busy}
	}
	if _, ok := matchAny(g.p.idle, row); ok && time.Since(g.changedAt) >= Settle {
		return Observation{State: Idle}
	}
	return Observation{State: Starting}
}

func (g *generic) Submitted(s term.Screen) {
	g.startRow = len(s.Scrollback) + s.CursorY
	g.submitText = s.All()
	g.emitted, g.turnOn = 0, true
}

// TurnEnded: the screen changed since the input was submitted and the
// program is idle again. The answer is what appeared between the input's
// line and the new prompt.
func (g *generic) TurnEnded(s term.Screen, interrupting bool) (bool, string, string) {
	all := s.All()
	if all == g.submitText || g.Observe(s).State != Idle {
		return false, "", ""
	}
	lines := strings.Split(all, "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > 0 {
		lines = lines[:len(lines)-1] // the new prompt
	}
	from := min(g.startRow+1, len(lines))
	return true, strings.TrimSpace(strings.Join(lines[from:], "\n")), ""
}
