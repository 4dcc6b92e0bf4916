package acp

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/proc"
	"github.com/troupe-dev/troupe/internal/troupe"
)

var (
	_ engine.Engine          = (*Engine)(nil)
	_ engine.ToolCallLimiter = (*Engine)(nil)
	_ engine.InputLimiter    = (*Engine)(nil)
)

// OpenCodeCommand is the program an opencode agent runs when its command
// is not set; OpenCodeArgs follow it (then the agent's args).
const OpenCodeCommand = "opencode"

// OpenCodeArgs is OpenCode's ACP subcommand.
var OpenCodeArgs = []string{"acp"}

// MCPServerName is the name troupe's MCP server has for the agent: OpenCode
// offers its tools as troupe_<tool>.
const MCPServerName = "troupe"

// Options configures an Engine. Zero values mean defaults.
type Options struct {
	// Logger gets the engine's logs; nil discards them. A StartSpec's
	// Logger, when set, is used for that session instead.
	Logger *slog.Logger
	// StopTimeout bounds each wait of Close's escalation. Zero means
	// proc.DefaultStopTimeout.
	StopTimeout time.Duration
	// Environ is the environment the child's is built from (C11). Nil
	// means os.Environ. Tests give an offline one here.
	Environ func() []string
}

// flavor is what differs between engine = "acp" and engine = "opencode".
type flavor struct {
	engine  troupe.Engine
	name    string   // in messages: "acp agent", "opencode"
	command string   // default command; "" means required
	args    []string // before the agent's args
	env     envRules
}

// Engine starts sessions of an ACP agent. It is safe for concurrent use.
type Engine struct {
	f           flavor
	log         *slog.Logger
	stopTimeout time.Duration
	environ     func() []string

	// Until one session has started, starts take turns: the first run of
	// OpenCode under a HOME creates and migrates its SQLite database, and
	// a second OpenCode starting meanwhile dies at initialize with
	// "database is locked" (seen with two projects' agents woken at
	// once). Later starts run in parallel.
	warmMu sync.Mutex
	warm   bool
}

// startAttempts bounds the starts of one session whose agent died of a
// busy database (lockedDB); retryDelay is the wait before the second.
const (
	startAttempts = 3
	retryDelay    = 250 * time.Millisecond
	lockedDB      = "database is locked"
)

// New returns the engine of engine = "acp": any agent speaking the Agent
// Client Protocol on stdio, run as the agent's command and args.
func New(o Options) *Engine {
	return newEngine(flavor{engine: troupe.EngineACP, name: "acp agent", env: acpEnv}, o)
}

// NewOpenCode returns the engine of engine = "opencode": `opencode acp`
// (the agent's command replaces opencode), with OpenCode's settings passed.
func NewOpenCode(o Options) *Engine {
	return newEngine(flavor{engine: troupe.EngineOpenCode, name: "opencode", command: OpenCodeCommand, args: OpenCodeArgs, env: openCodeEnv}, o)
}

func newEngine(f flavor, o Options) *Engine {
	e := &Engine{f: f, log: o.Logger, stopTimeout: o.StopTimeout, environ: o.Environ}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.stopTimeout <= 0 {
		e.stopTimeout = proc.DefaultStopTimeout
	}
	if e.environ == nil {
		e.environ = os.Environ
	}
	return e
}

// InputBytes is the most text troupe gives one turn (one session/prompt
// line). Like the claude engine's: the model's context is the real bound;
// not measured against a real model.
const InputBytes = 128 << 10

// InputLimit implements engine.InputLimiter.
func (e *Engine) InputLimit(troupe.AgentSpec) (messages, bytes int) {
	return 0, InputBytes
}

// ToolCallLimit implements engine.ToolCallLimiter: the agent's tool_timeout
// option, else DefaultToolTimeout (OpenCode's MCP client: the MCP SDK's
// request timeout, 60 s, unless experimental.mcp_timeout says otherwise).
func (e *Engine) ToolCallLimit(agent troupe.AgentSpec) time.Duration {
	o, err := e.parseOptions(agent.Options)
	if err != nil || o.toolTimeout == 0 {
		return DefaultToolTimeout
	}
	return o.toolTimeout
}

// Start starts the agent's program in spec.Dir, initializes the protocol
// and opens its session: session/load of spec.Resume when the agent can
// load sessions (a new session if it refuses), else session/new. The
// session's id is reported at once as an EventSession. The returned
// session is a *Session.
func (e *Engine) Start(ctx context.Context, spec engine.StartSpec) (engine.Session, error) {
	name := spec.Agent.Name
	if name == "" {
		name = spec.Key.Agent
	}
	fail := func(err error) (engine.Session, error) {
		return nil, fmt.Errorf("start %s %s: %w", e.f.name, name, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := e.Check(spec.Agent); err != nil {
		return fail(err)
	}
	o, _ := e.parseOptions(spec.Agent.Options)
	if err := proc.CheckDir(spec.Dir); err != nil {
		return fail(fmt.Errorf("working directory: %w", err))
	}
	path, err := proc.Program(spec.Agent.Command, e.f.command, "program", "install it")
	if err != nil {
		return fail(err)
	}
	log := spec.Logger
	if log == nil {
		log = e.log
	}
	log = log.With("project", spec.Key.Project, "agent", spec.Key.Agent, "engine", string(e.f.engine))
	argv := append([]string{path}, e.f.args...)
	argv = append(argv, spec.Agent.Args...)
	env, err := e.f.env.build(e.environ(), spec.Agent, o)
	if err != nil {
		return fail(err)
	}
	s, err := e.startWarm(ctx, sessionSpec{
		name:        e.f.name,
		argv:        argv,
		dir:         spec.Dir,
		env:         env,
		instr:       spec.Instructions,
		resume:      spec.Resume,
		mcp:         spec.MCP,
		approver:    spec.Approver,
		log:         log,
		stopTimeout: e.stopTimeout,
		sandbox:     engine.EngineSandbox(spec),
	})
	if err != nil {
		return fail(err)
	}
	return s, nil
}

// startWarm is start, one at a time until the engine's first session is
// up, and tried again (at most startAttempts times, the wait doubling) when
// the agent died of a busy database: another OpenCode of the person's
// (or of a second troupe) may hold it for a moment.
func (e *Engine) startWarm(ctx context.Context, spec sessionSpec) (*Session, error) {
	e.warmMu.Lock()
	held := !e.warm
	if held {
		defer e.warmMu.Unlock()
	} else {
		e.warmMu.Unlock()
	}
	delay := retryDelay
	for attempt := 1; ; attempt++ {
		s, err := start(ctx, spec)
		if err == nil {
			if held {
				e.warm = true
			}
			return s, nil
		}
		if attempt == startAttempts || !strings.Contains(err.Error(), lockedDB) {
			return nil, err
		}
		spec.log.Warn("the agent found its database locked: starting it again", "attempt", attempt, "wait", delay)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
		delay *= 2
	}
}
