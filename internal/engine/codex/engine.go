package codex

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/proc"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

var (
	_ engine.Engine          = (*Engine)(nil)
	_ engine.ToolCallLimiter = (*Engine)(nil)
	_ engine.InputLimiter    = (*Engine)(nil)
)

// DefaultCommand is the CLI an agent runs when its command is not set.
const DefaultCommand = "codex"

// MCPServerName is the name troupe's MCP server has in Codex's config: its
// tools are mcp__troupe__<tool>.
const MCPServerName = "troupe"

// DefaultHandshakeTimeout bounds Start's handshake (initialize and the
// thread's start or resume) when Options.HandshakeTimeout is zero.
const DefaultHandshakeTimeout = 2 * time.Minute

// Options configures an Engine. Zero values mean defaults.
type Options struct {
	// Logger gets the engine's logs; nil discards them. A StartSpec's
	// Logger, when set, is used for that session instead.
	Logger *slog.Logger
	// StopTimeout bounds each wait of Close's escalation. Zero means
	// proc.DefaultStopTimeout.
	StopTimeout time.Duration
	// HandshakeTimeout bounds Start's handshake with the app-server. Zero
	// means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Environ is the environment the child's is built from (C11). Nil
	// means os.Environ: the daemon's. Tests give an offline one here.
	Environ func() []string
}

// Engine starts Codex app-server sessions. It holds no state besides its
// options and is safe for concurrent use.
type Engine struct {
	log         *slog.Logger
	stopTimeout time.Duration
	handshake   time.Duration
	environ     func() []string
}

// New returns an Engine with the given options.
func New(o Options) *Engine {
	e := &Engine{log: o.Logger, stopTimeout: o.StopTimeout, handshake: o.HandshakeTimeout, environ: o.Environ}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.stopTimeout <= 0 {
		e.stopTimeout = proc.DefaultStopTimeout
	}
	if e.handshake <= 0 {
		e.handshake = DefaultHandshakeTimeout
	}
	if e.environ == nil {
		e.environ = os.Environ
	}
	return e
}

// ToolCallLimit implements engine.ToolCallLimiter: the troupe server's
// tool_timeout_sec (the agent's tool_timeout, else DefaultToolTimeout).
func (e *Engine) ToolCallLimit(agent troupe.AgentSpec) time.Duration {
	o, err := parseOptions(agent.Options)
	if err != nil || o.toolTimeout <= 0 {
		return DefaultToolTimeout
	}
	return o.toolTimeout
}

// InputBytes is the most text troupe gives one turn of a Codex agent
// (engine.Render's text, one text input of turn/start). The JSON-RPC line
// is no limit of its own; the model's context is: 128 KB is about 32k
// tokens, a small part of a Codex model's 258k-token window (the
// app-server reports modelContextWindow 258400), shared with the
// instructions, the tools and the conversation. Conservative, as Claude's,
// not measured against a real model.
const InputBytes = 128 << 10

// InputLimit implements engine.InputLimiter: no count of its own, and
// InputBytes of text a turn.
func (e *Engine) InputLimit(troupe.AgentSpec) (messages, bytes int) {
	return 0, InputBytes
}

// launch is what a session needs to start its CLI and its thread.
type launch struct {
	argv  []string
	dir   string
	env   []string
	model string
	instr string
	// sandbox is the CLI's sandbox; nil: none.
	sandbox *sandbox.Policy
}

// argv is the app-server's command line: the agent's args, troupe's MCP
// server (when there is an endpoint) and the agent's config overrides.
// The token is not in it: Codex reads it from envToken.
func argv(command string, agent troupe.AgentSpec, o options, mcp engine.MCPAccess, limit time.Duration) []string {
	argv := []string{command, "app-server"}
	argv = append(argv, agent.Args...)
	if mcp.URL != "" {
		secs := int64((limit + time.Second - 1) / time.Second)
		argv = append(argv,
			"-c", "mcp_servers."+MCPServerName+"={url = "+tomlString(mcp.URL)+
				", bearer_token_env_var = "+tomlString(envToken)+
				", required = true, startup_timeout_sec = 30, tool_timeout_sec = "+strconv.FormatInt(secs, 10)+"}",
			"-c", "mcp_optional_startup_grace_ms=0")
	}
	for _, kv := range o.config {
		argv = append(argv, "-c", kv)
	}
	return argv
}

// Start starts the agent's app-server in spec.Dir and its thread: a new
// one, or spec.Resume's (a new one when the server refuses it). The
// thread id is reported at once as an EventSession. The returned session
// is a *Session.
func (e *Engine) Start(ctx context.Context, spec engine.StartSpec) (engine.Session, error) {
	name := spec.Agent.Name
	if name == "" {
		name = spec.Key.Agent
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start codex agent %s: %w", name, err)
	}
	if spec.Agent.Mode == troupe.ModeTerminal {
		return nil, fmt.Errorf("start codex agent %s: terminal mode is not built yet: remove mode from the agent in .troupe/team.toml", name)
	}
	o, err := parseOptions(spec.Agent.Options)
	if err != nil {
		return nil, fmt.Errorf("start codex agent %s: %w", name, err)
	}
	if err := proc.CheckDir(spec.Dir); err != nil {
		return nil, fmt.Errorf("start codex agent %s: working directory: %w", name, err)
	}
	command, err := proc.Program(spec.Agent.Command, DefaultCommand, "Codex CLI", "install Codex (npm install -g @openai/codex)")
	if err != nil {
		return nil, fmt.Errorf("start codex agent %s: %w", name, err)
	}
	log := spec.Logger
	if log == nil {
		log = e.log
	}
	log = log.With("project", spec.Key.Project, "agent", spec.Key.Agent)
	token := ""
	if spec.MCP.URL != "" {
		token = spec.MCP.Token
	}
	args := argv(command, spec.Agent, o, spec.MCP, e.ToolCallLimit(spec.Agent))
	if spec.Sandbox.On {
		// Codex's own sandbox (its bundled bubblewrap) cannot run inside
		// troupe's: it locks a file under /tmp, read-only there (and under
		// Landlock nothing can mount). troupe's sandbox holds the agent and
		// all it runs, so Codex's is turned off for the session, last so
		// that it wins over the agent's config.
		args = append(args, "-c", `sandbox_mode="danger-full-access"`)
		log.Info("codex's own sandbox is off in this session: troupe's sandbox contains the agent and its commands")
	}
	l := &launch{
		argv:  args,
		dir:   spec.Dir,
		env:   childEnv(e.environ(), spec.Agent.Env, token),
		model: spec.Agent.Model,
		instr: spec.Instructions,
		// The app-server and every command it runs stay in troupe's sandbox.
		sandbox: engine.EngineSandbox(spec),
	}
	hctx, cancel := context.WithTimeout(ctx, e.handshake)
	defer cancel()
	s, err := start(hctx, sessionSpec{
		launch:      l,
		resume:      spec.Resume,
		approver:    spec.Approver,
		log:         log,
		stopTimeout: e.stopTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("start codex agent %s: %w", name, err)
	}
	return s, nil
}
