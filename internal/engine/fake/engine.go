package fake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

var (
	_ engine.Engine  = (*Engine)(nil)
	_ engine.Session = (*Session)(nil)
)

// DefaultStopTimeout bounds each step of a session's stop escalation when
// Options.StopTimeout is zero.
const DefaultStopTimeout = 2 * time.Second

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
	if err := checkDir(spec.Dir); err != nil {
		return nil, fmt.Errorf("start fake agent %s: working directory: %w", name, err)
	}
	log := spec.Logger
	if log == nil {
		log = e.log
	}
	log = log.With("project", spec.Key.Project, "agent", spec.Key.Agent)
	env := childEnv(spec.Agent.Env)
	if spec.MCP.URL != "" {
		env = append(env, EnvMCPURL+"="+spec.MCP.URL, EnvMCPToken+"="+spec.MCP.Token)
	}
	s, err := start(e.command, env, spec.Dir, log, spec.Tools, e.stopTimeout)
	if err != nil {
		return nil, fmt.Errorf("start fake agent %s: %w", name, err)
	}
	if err := s.write(frame{Type: typeStart, Agent: string(name), Respond: opts.respond, Journal: opts.journal, Instructions: spec.Instructions,
		ToolTimeout: opts.toolTimeout.String()}); err != nil {
		// The child closed its stdin: it is dying; its exit says why.
		log.Debug("write start frame", "err", err)
	}
	select {
	case <-s.ready:
		return s, nil
	case <-s.done:
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

// checkDir checks that the agent's working directory exists.
func checkDir(dir string) error {
	if dir == "" {
		return errors.New("none given: set StartSpec.Dir to the project's folder")
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// ToolCallLimit implements engine.ToolCallLimiter: the agent's
// tool_timeout option, which its MCP client enforces (0: none).
func (e *Engine) ToolCallLimit(agent troupe.AgentSpec) time.Duration {
	opts, err := parseOptions(agent.Name, agent.Options)
	if err != nil {
		return 0
	}
	return opts.toolTimeout
}

var _ engine.ToolCallLimiter = (*Engine)(nil)

// EnvMCPURL and EnvMCPToken give the child troupe's MCP endpoint and its
// session token: with them, its tool calls go over MCP, as a real CLI's do;
// without, over its stdio protocol.
const (
	EnvMCPURL   = "TROUPE_MCP_URL"
	EnvMCPToken = "TROUPE_MCP_TOKEN"
)

// inheritedEnv lists the variables a child gets from the daemon's
// environment; everything else it gets from the agent's env table.
var inheritedEnv = []string{"PATH", "HOME", "TMPDIR", "LANG", "GORACE"}

// childEnv builds a child's environment (C11): a few variables of ours, the
// agent's env, ChildEnv=1; never CLAUDECODE or CLAUDE_CODE_*. The child is a
// Go program (troupe or a test binary): unless GORACE is set, a race-enabled
// child is told not to pause 1 s at exit (the race runtime's default), which
// would slow every Close.
func childEnv(agent map[string]string) []string {
	vars := map[string]string{"GORACE": "atexit_sleep_ms=0"}
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			vars[k] = v
		}
	}
	for k, v := range agent {
		vars[k] = v
	}
	vars[ChildEnv] = "1"
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		if k == "CLAUDECODE" || strings.HasPrefix(k, "CLAUDE_CODE_") {
			continue
		}
		env = append(env, k+"="+v)
	}
	return env
}

// start starts the child in its own process group, with pipes for its
// stdio, and the session's goroutines.
func start(argv, env []string, dir string, log *slog.Logger, tools engine.Tools, stopTimeout time.Duration) (*Session, error) {
	var files []*os.File // every pipe end, closed on failure
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll(files)
		return nil, fmt.Errorf("make pipes: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		closeAll(files)
		return nil, err
	}
	closeAll([]*os.File{inR, outW, errW}) // the child's ends
	log = log.With("pid", cmd.Process.Pid)
	log.Debug("fake agent started", "command", argv, "dir", dir)
	return newSession(cmd, inW, outR, errR, log, tools, stopTimeout), nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
