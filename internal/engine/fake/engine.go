package fake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/proc"
	"github.com/troupe-dev/troupe/internal/troupe"
)

var (
	_ engine.Engine  = (*Engine)(nil)
	_ engine.Session = (*Session)(nil)
)

// DefaultStopTimeout bounds each step of a session's stop escalation when
// Options.StopTimeout is zero.
const DefaultStopTimeout = proc.DefaultStopTimeout

// Options configures an Engine. Zero values mean defaults.
type Options struct {
	// Command is the argv that starts a fake agent: the troupe binary with
	// its hidden "fake-agent" subcommand in the daemon, TestCommand() in
	// tests. Required.
	Command []string
	// Logger gets the engine's logs; nil discards them. A StartSpec's
	// Logger, when set, is used for that session instead.
	Logger *slog.Logger
	// StopTimeout bounds each wait of Close's escalation (after closing
	// stdin, after SIGTERM). Zero means DefaultStopTimeout.
	StopTimeout time.Duration
}

// Engine starts fake agents as child processes. It holds no state besides
// its options and is safe for concurrent use.
type Engine struct {
	command     []string
	log         *slog.Logger
	stopTimeout time.Duration
}

// New returns an Engine with the given options.
func New(o Options) *Engine {
	e := &Engine{command: append([]string(nil), o.Command...), log: o.Logger, stopTimeout: o.StopTimeout}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.stopTimeout <= 0 {
		e.stopTimeout = DefaultStopTimeout
	}
	return e
}

// Start checks the agent's [agent.fake] options, starts its child process
// in spec.Dir and waits until the child says it is ready (or ctx ends, or
// the child dies). The returned session is a *Session.
func (e *Engine) Start(ctx context.Context, spec engine.StartSpec) (engine.Session, error) {
	name := spec.Agent.Name
	if name == "" {
		name = spec.Key.Agent
	}
	opts, err := parseOptions(name, spec.Agent.Options)
	if err != nil {
		return nil, err
	}
	if len(e.command) == 0 {
		return nil, fmt.Errorf("start fake agent %s: no command: set fake.Options.Command (the troupe binary and \"fake-agent\")", name)
	}
	if err := proc.CheckDir(spec.Dir); err != nil {
		return nil, fmt.Errorf("start fake agent %s: working directory: %w", name, err)
	}
	log := spec.Logger
	if log == nil {
		log = e.log
	}
	log = log.With("project", spec.Key.Project, "agent", spec.Key.Agent)
	// The URL goes in the environment, the token in the start frame on
	// the child's stdin: never in /proc/<pid>/environ or cmdline, which
	// every process of the user can read.
	var mcp []string
	var token string
	if spec.MCP.URL != "" {
		mcp, token = []string{EnvMCPURL + "=" + spec.MCP.URL}, spec.MCP.Token
	}
	s, err := start(proc.Spec{Argv: e.command, Dir: spec.Dir, Env: childEnv(spec.Agent.Env, mcp...), Logger: log, StopTimeout: e.stopTimeout, Sandbox: engine.EngineSandbox(spec)}, spec.Tools, spec.Approver)
	if err != nil {
		return nil, fmt.Errorf("start fake agent %s: %w", name, err)
	}
	if err := s.write(frame{Type: typeStart, Agent: string(name), Respond: opts.respond, Journal: opts.journal, Instructions: spec.Instructions,
		ToolTimeout: opts.toolTimeout.String(), MCPToken: token}); err != nil {
		// The child closed its stdin: it is dying; its exit says why.
		log.Debug("write start frame", "err", err)
	}
	select {
	case <-s.ready:
		return s, nil
	case <-s.Done():
		err := s.Err()
		if err == nil {
			err = errors.New("fake agent exited before it was ready")
		}
		s.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("start fake agent %s: %w", name, err)
	case <-ctx.Done():
		s.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("start fake agent %s: %w", name, context.Cause(ctx))
	}
}

// ToolCallLimit implements engine.ToolCallLimiter: the agent's
// tool_timeout option, which its MCP client enforces (0: none). Options
// that Check refuses never reach here from a loaded team; given anyway,
// they read as no limit, and Start fails with Check's error.
func (e *Engine) ToolCallLimit(agent troupe.AgentSpec) time.Duration {
	opts, err := parseOptions(agent.Name, agent.Options)
	if err != nil {
		return 0
	}
	return opts.toolTimeout
}

var _ engine.ToolCallLimiter = (*Engine)(nil)

// InputBytes is the most text one turn of a fake agent is given: its input
// frame is one line of at most maxLine (16 MB) on the child's stdin, and
// JSON may write a byte of text as six ("\u0000"), so an eighth of the
// line leaves room for any text and the frame's fields.
const InputBytes = maxLine / 8

// InputLimit implements engine.InputLimiter: no count of its own, and
// InputBytes of text a turn.
func (e *Engine) InputLimit(troupe.AgentSpec) (messages, bytes int) {
	return 0, InputBytes
}

var _ engine.InputLimiter = (*Engine)(nil)

// EnvMCPURL gives the child troupe's MCP endpoint; its session token comes
// in the start frame on its stdin (not in its environment, which other
// processes of the user can read in /proc/<pid>/environ). With them, its
// tool calls go over MCP, as a real CLI's do; without, over its stdio
// protocol.
const EnvMCPURL = "TROUPE_MCP_URL"

// inheritedEnv lists the variables a child gets from the daemon's
// environment; everything else it gets from the agent's env table.
var inheritedEnv = []string{"PATH", "HOME", "TMPDIR", "LANG", "GORACE"}

// childEnv builds a child's environment (C11) with proc.Env: a few
// variables of ours, the agent's env, ChildEnv=1 and extra; never the
// nested-session markers (proc.NestedSessionVars). The child is a Go program (troupe or a test binary):
// unless GORACE is set, a race-enabled child is told not to pause 1 s at
// exit (the race runtime's default), which would slow every Close.
func childEnv(agent map[string]string, extra ...string) []string {
	env := proc.Env(inheritedEnv, agent, append([]string{ChildEnv + "=1"}, extra...)...)
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "GORACE=") }) {
		env = append(env, "GORACE=atexit_sleep_ms=0")
	}
	return env
}
