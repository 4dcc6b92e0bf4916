package claude

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
const DefaultCommand = "claude"

// MCPServerName is the name troupe's MCP server has in the CLI's config:
// its tools are mcp__troupe__<tool>.
const MCPServerName = "troupe"

// Options configures an Engine. Zero values mean defaults.
type Options struct {
	// Logger gets the engine's logs; nil discards them. A StartSpec's
	// Logger, when set, is used for that session instead.
	Logger *slog.Logger
	// StopTimeout bounds each wait of Close's escalation (after closing
	// stdin, after SIGTERM). Zero means proc.DefaultStopTimeout.
	StopTimeout time.Duration
	// Environ is the environment the child's is built from (C11: only the
	// variables Claude Code needs pass). Nil means os.Environ: the
	// daemon's. Tests give an offline one here.
	Environ func() []string
}

// Engine starts Claude Code sessions. It holds no state besides its options
// and is safe for concurrent use.
type Engine struct {
	log         *slog.Logger
	stopTimeout time.Duration
	environ     func() []string
}

// New returns an Engine with the given options.
func New(o Options) *Engine {
	e := &Engine{log: o.Logger, stopTimeout: o.StopTimeout, environ: o.Environ}
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

// ToolCallLimit implements engine.ToolCallLimiter: how long Claude Code
// lets one call of a troupe tool run (see DefaultToolTimeout).
func (e *Engine) ToolCallLimit(agent troupe.AgentSpec) time.Duration {
	o, err := parseOptions(agent.Options)
	if err != nil {
		return DefaultToolTimeout
	}
	d, _ := toolLimit(agent, o, e.environ())
	return d
}

// InputBytes is the most text troupe gives one turn of a Claude agent
// (engine.Render's text, the one user line on the CLI's stdin). The line
// itself is not what limits: measured with the pinned CLI (2.1.328)
// against the fake model, a 2 MB line reaches the model whole, and from
// 3 MB the CLI ends the turn "Prompt is too long" without calling the
// model. The model's context is the real bound: 200k tokens is about
// 800 KB of English, shared with the system prompt, the tools and the
// conversation. 128 KB (about 32k tokens) keeps a turn's input a small
// part of it. Conservative, not measured against a real model.
const InputBytes = 128 << 10

// InputLimit implements engine.InputLimiter: no count of its own, and
// InputBytes of text a turn.
func (e *Engine) InputLimit(troupe.AgentSpec) (messages, bytes int) {
	return 0, InputBytes
}

// launch is what a session needs to (re)start its CLI: everything but the
// session id.
type launch struct {
	command string // resolved
	agent   troupe.AgentSpec
	dir     string
	env     []string
	mcpFile string // "" without an MCP endpoint
	instr   string
	sandbox *sandbox.Policy // the CLI's sandbox; nil: none
	// registry is the folder where the CLI's session registry is seen
	// from here: <config>/sessions, or the sandbox's own (privateRegistry).
	registry string
}

// argv is the CLI's command line for a new session (resume false: id is
// minted) or the continuation of an earlier one.
func (l *launch) argv(id string, resume bool) []string {
	argv := append([]string{l.command}, l.agent.Args...)
	argv = append(argv, "-p",
		"--input-format", "stream-json",
		"--output-format", "stream-json",
		"--verbose",
		"--include-partial-messages")
	// --allowedTools is variadic: its values (one argument each) run up
	// to the next flag, so a flag follows them.
	argv = l.sessionArgs(argv, id, resume)
	return append(argv, "--permission-prompt-tool", "stdio")
}

// sessionArgs appends what both modes give the CLI: the conversation (id
// minted, or resumed), the model, the permission mode, the instructions,
// troupe's MCP server and, last, the variadic --allowedTools.
func (l *launch) sessionArgs(argv []string, id string, resume bool) []string {
	if resume {
		argv = append(argv, "--resume", id)
	} else {
		argv = append(argv, "--session-id", id)
	}
	if l.agent.Model != "" {
		argv = append(argv, "--model", l.agent.Model)
	}
	if l.agent.PermissionMode != "" {
		argv = append(argv, "--permission-mode", l.agent.PermissionMode)
	}
	if l.instr != "" {
		argv = append(argv, "--append-system-prompt", l.instr)
	}
	if l.mcpFile != "" {
		argv = append(argv, "--mcp-config", l.mcpFile)
	}
	if l.sandbox != nil {
		// Claude Code's own sandbox (bubblewrap) cannot run inside troupe's
		// (tested: "Can't mount proc on /newroot/proc: Operation not
		// permitted", every Bash command failing): troupe's holds the CLI
		// and all it runs, so Claude Code's is off for the session.
		argv = append(argv, "--settings", noOwnSandbox)
	}
	argv = append(argv, "--allowedTools", "mcp__"+MCPServerName)
	return append(argv, l.agent.AllowedTools...)
}

// Start starts the agent's CLI in spec.Dir: a new conversation with a
// minted session id, or spec.Resume's (falling back to a new one when the
// CLI no longer has it). The session's id is reported at once as an
// EventSession. The returned session is a *Session.
func (e *Engine) Start(ctx context.Context, spec engine.StartSpec) (engine.Session, error) {
	name := spec.Agent.Name
	if name == "" {
		name = spec.Key.Agent
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start claude agent %s: %w", name, err)
	}
	o, err := parseOptions(spec.Agent.Options)
	if err != nil {
		return nil, fmt.Errorf("start claude agent %s: %w", name, err)
	}
	if err := proc.CheckDir(spec.Dir); err != nil {
		return nil, fmt.Errorf("start claude agent %s: working directory: %w", name, err)
	}
	command, err := proc.Program(spec.Agent.Command, DefaultCommand, "Claude Code CLI", "install Claude Code (npm install -g @anthropic-ai/claude-code)")
	if err != nil {
		return nil, fmt.Errorf("start claude agent %s: %w", name, err)
	}
	log := spec.Logger
	if log == nil {
		log = e.log
	}
	log = log.With("project", spec.Key.Project, "agent", spec.Key.Agent)

	environ := e.environ()
	limit, personSet := toolLimit(spec.Agent, o, environ)
	l := &launch{
		command: command,
		agent:   spec.Agent,
		dir:     spec.Dir,
		env:     childEnv(environ, spec.Agent.Env, limit, personSet),
		instr:   spec.Instructions,
		sandbox: engine.EngineSandbox(spec),
	}
	if l.sandbox != nil {
		log.Info("Claude Code's own sandbox is off in this session: troupe's sandbox contains the agent and its commands")
	}
	if cfg := configDir(l.env); cfg != "" {
		if l.registry, err = privateRegistry(l.sandbox, cfg); err != nil {
			return nil, fmt.Errorf("start claude agent %s: %w", name, err)
		}
	}
	if spec.Sandbox.On && spec.Sandbox.Temp != "" {
		// /tmp is read-only in the sandbox: Claude Code's temporary files
		// (its messaging sockets, task outputs) go in the agent's own.
		l.env = proc.Env(nil, nil, append(l.env, envTmpDir+"="+spec.Sandbox.Temp, "TMPDIR="+spec.Sandbox.Temp)...)
	}
	var tmp string
	if spec.MCP.URL != "" {
		// In a sandbox, the file holding the session's token goes in the
		// agent's private temporary folder: /tmp is readable by every
		// agent's sandbox.
		if tmp, l.mcpFile, err = writeMCPConfig(spec.MCP, limit, spec.Sandbox.Temp); err != nil {
			return nil, fmt.Errorf("start claude agent %s: %w", name, err)
		}
	}
	if spec.Agent.Mode == troupe.ModeTerminal {
		s, err := e.startTUI(spec, l, tmp, log)
		if err != nil {
			if tmp != "" {
				os.RemoveAll(tmp)
			}
			return nil, fmt.Errorf("start claude agent %s in terminal mode: %w", name, err)
		}
		return s, nil
	}
	s, err := start(sessionSpec{
		launch:      l,
		resume:      spec.Resume,
		tmpDir:      tmp,
		approver:    spec.Approver,
		log:         log,
		stopTimeout: e.stopTimeout,
	})
	if err != nil {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
		return nil, fmt.Errorf("start claude agent %s: %w", name, err)
	}
	return s, nil
}

// mcpConfig is the --mcp-config file: troupe's endpoint with the session's
// bearer token, and the limit of one tool call in ms (it sets Claude Code's
// limit and its HTTP idle limit for this server).
type mcpConfig struct {
	MCPServers map[string]mcpServer `json:"mcpServers"`
}

type mcpServer struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Timeout int64             `json:"timeout"`
}

// writeMCPConfig writes the MCP config into a new private folder (0700, the
// file 0600: the token never shows on a command line), which the session
// removes when it ends.
func writeMCPConfig(m engine.MCPAccess, limit time.Duration, parent string) (dir, file string, err error) {
	b, err := json.Marshal(mcpConfig{MCPServers: map[string]mcpServer{MCPServerName: {
		Type:    "http",
		URL:     m.URL,
		Headers: map[string]string{"Authorization": "Bearer " + m.Token},
		Timeout: limit.Milliseconds(),
	}}})
	if err != nil {
		return "", "", fmt.Errorf("encode mcp config: %w", err)
	}
	dir, err = os.MkdirTemp(parent, "troupe-claude-")
	if err != nil {
		return "", "", fmt.Errorf("make mcp config folder: %w", err)
	}
	file = filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("write mcp config: %w", err)
	}
	return dir, file, nil
}

// privateRegistry gives the CLI in a bubblewrap sandbox a session registry
// of its own and returns where it is seen from here; elsewhere it returns
// the shared <cfg>/sessions (docs/engines/claude-code.md, "Session
// registry"). In a bubblewrap sandbox the CLI runs in a pid namespace of
// its own, where it is pid 1, and names its files by that pid
// (sessions/1.json): in the person's shared folder every sandboxed agent
// would write, and remove at its exit, the same file. So the folder
// <p.Private>/claude-sessions (troupe's, out of every agent's reach) is
// bound over <cfg>/sessions in the sandbox, emptied first: one session
// of the agent runs at a time, and what a killed CLI left there is stale.
// Under Landlock (no pid namespace: the CLI writes its real pid) or
// without p.Private the shared folder is used.
func privateRegistry(p *sandbox.Policy, cfg string) (string, error) {
	shared := filepath.Join(cfg, "sessions")
	if p == nil || p.Private == "" || p.Enforcer() != sandbox.Bubblewrap {
		return shared, nil
	}
	dir := filepath.Join(p.Private, "claude-sessions")
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("empty the sandbox's session registry: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("make the sandbox's session registry: %w", err)
	}
	// The mount's target, made if missing. Agents may write in <cfg>: a
	// link planted there is not followed (the mount then shadows what it
	// names inside the sandbox, no more).
	if err := os.Mkdir(shared, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("make %s: %w", shared, err)
	}
	p.Binds = append(slices.Clip(p.Binds), sandbox.Bind{Source: dir, Target: shared})
	return dir, nil
}

// noOwnSandbox is the --settings layer that turns Claude Code's own
// sandbox off in a session troupe sandboxes.
const noOwnSandbox = `{"sandbox":{"enabled":false}}`

// envTmpDir is where Claude Code keeps its temporary files (else TMPDIR).
const envTmpDir = "CLAUDE_CODE_TMPDIR"

// newSessionID mints a UUID v4, as --session-id wants.
func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
