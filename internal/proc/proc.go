// Package proc runs an engine's child process the way contract C11 asks:
// its own process group, pipes for its stdio, one reaper, a bounded tail of
// its stderr, a stop by escalation, and an environment that is built, not
// inherited. Every engine that drives a program over stdio (fake, and the
// Claude stream-json, Codex app-server and ACP adapters), the openai
// engine's commands and internal/term's programs on a terminal start it
// here, so these rules live in one place. It sits below both the engines
// and term, which is why it is not under internal/engine.
//
// Concurrency: Start returns a *Process that owns two goroutines: the
// reaper, the only caller of Wait, which closes Done once the child is
// reaped and its stderr is read to the end; and the stderr reader, which
// keeps the tail and calls Spec.OnStderr for every chunk (stderr output is
// activity too, C3). Both end on their own when the child exits; Stop makes
// it exit. Neither holds an OS thread while it waits: the reaper waits on
// the child's pidfd and the reader on its stderr pipe, both parked in Go's
// poller, so a daemon with N children does not hold N blocked threads. The caller owns the reading of Stdout: it reads until end of file
// (or closes it early, which makes the child's writes fail). Every method of
// Process is safe for concurrent use.
//
// Who may import: the engine packages (internal/engine/...) and their
// tests. It knows nothing of the runtime, projects or the engine seam.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/pidfd"
	"github.com/troupe-dev/troupe/internal/sandbox"
)

// DefaultStopTimeout bounds each wait of Stop's escalation when
// Spec.StopTimeout is zero.
const DefaultStopTimeout = 2 * time.Second

// DefaultStderrTail is how much of the child's stderr a Process keeps when
// Spec.StderrTail is zero.
const DefaultStderrTail = 4 << 10

// ErrStdinClosed is returned by writes to Stdin after it was closed.
var ErrStdinClosed = errors.New("child's input is closed")

// Spec says how to start a child. Zero values mean defaults.
type Spec struct {
	// Argv is the program and its arguments. Required.
	Argv []string
	// Dir is the child's working directory; empty means the daemon's.
	Dir string
	// Env is the child's whole environment, typically built by Env. A nil
	// Env gives an empty environment: nothing is inherited wholesale.
	Env []string
	// Logger gets the process's logs (start, exit, escalation); nil
	// discards them.
	Logger *slog.Logger
	// StopTimeout bounds each wait of Stop's escalation, and the wait for
	// the end of stderr after the child exits. Zero means
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// StderrTail is how many bytes of stderr StderrTail keeps. Zero means
	// DefaultStderrTail.
	StderrTail int
	// OnStderr, if set, is called by the stderr reader with every chunk the
	// child writes to stderr (the slice is reused after it returns). It
	// must not block: engines bump their activity token with it.
	OnStderr func(chunk []byte)
	// Sandbox, if set and on, runs Argv in that sandbox (internal/sandbox):
	// the argv is wrapped (bubblewrap, or the Landlock helper), the child
	// gets a session of its own (so no controlling terminal it could
	// push input into, and one process group), and Signal sends its
	// signals, SIGKILL aside, to the group but its leader: bubblewrap
	// forwards none, and its death would SIGKILL the program before its
	// own handler ran. Under bubblewrap the program is pid 1 of its pid
	// namespace (sandbox.Policy.AsInit): a signal it has no handler for
	// does not reach it, so Stop's SIGTERM ends only a program that
	// handles it and its SIGKILL the rest. A policy that cannot be
	// enforced fails Start. The child is born in the sandbox's cgroup (its
	// memory and process caps, Policy.Cgroup).
	Sandbox *sandbox.Policy
	// TTY, if set, is the slave side of a pseudo-terminal (internal/term
	// opens it): it becomes the child's stdin, stdout, stderr and
	// controlling terminal, in a session of its own (so its process group
	// too). No pipes are made: Stdin is closed from the start, Stdout is
	// nil, and the caller reads the PTY's master. The caller closes its
	// copy of TTY once Start returned.
	TTY *os.File
}

// Process is one running child in its own process group.
type Process struct {
	log         *slog.Logger
	cmd         *exec.Cmd
	pid         int
	stopTimeout time.Duration
	onStderr    func([]byte)
	stdin       *stdin
	stdout      *os.File
	sandboxed   bool // Argv runs under bubblewrap or the Landlock helper

	done       chan struct{} // closed by the reaper when the child is reaped and stderr read
	stderrDone chan struct{} // closed by the stderr reader at end of stderr

	// Set by the reaper before it closes done.
	exitErr error
	state   *os.ProcessState

	// mu guards reaped. Signal holds it while it signals, so the reaper
	// cannot free the pid in between.
	mu     sync.Mutex
	reaped bool // the child exited and the reaper is about to reap it

	// tmu guards tail: the last tailMax bytes of stderr.
	tmu     sync.Mutex
	tail    []byte
	tailMax int
}

// Start starts spec.Argv in its own process group with pipes for its stdin,
// stdout and stderr, and the Process's goroutines. The child outlives no
// owner: the caller must Stop it (or see it exit) and wait for Done.
func Start(spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("start process: no command")
	}
	if spec.Sandbox != nil && spec.Sandbox.On {
		p := *spec.Sandbox
		p.AsInit = true // the daemon is no subreaper: leave no zombie behind
		argv, err := sandbox.Wrap(p, spec.Argv)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", spec.Argv[0], err)
		}
		spec.Argv = argv
	}
	if spec.TTY != nil {
		return startTTY(spec)
	}
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
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would inherit the daemon's environment
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.Sandbox != nil && spec.Sandbox.On {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // its own group too
	}
	if err := spec.cgroup().Start(cmd); err != nil {
		closeAll(files)
		return nil, err // exec's error names the program
	}
	closeAll([]*os.File{inR, outW, errW}) // the child's ends

	p := newProcess(spec, cmd)
	p.stdin.f = inW
	p.stdout = outR
	// The child is not reaped before the reaper reaps it, so its pid is
	// still its own here.
	h, err := pidfd.Open(p.pid)
	if err != nil {
		p.log.Warn("no pidfd for the child: its reaper blocks a thread", "err", err)
	}
	p.log.Debug("child started", "command", spec.Argv, "dir", spec.Dir)
	go p.readStderr(errR)
	go p.reap(h, errR)
	return p, nil
}

// startTTY starts spec.Argv on the terminal spec.TTY, in a new session
// whose controlling terminal it is.
func startTTY(spec Spec) (*Process, error) {
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.TTY, spec.TTY, spec.TTY
	// Setsid: a new session, so a new process group whose id is the pid;
	// Setctty makes the terminal (fd 0 in the child) its controlling one.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := spec.cgroup().Start(cmd); err != nil {
		return nil, err
	}
	p := newProcess(spec, cmd)
	p.stdin.closed = true
	close(p.stderrDone) // no stderr of its own: it writes to the terminal
	h, err := pidfd.Open(p.pid)
	if err != nil {
		p.log.Warn("no pidfd for the child: its reaper blocks a thread", "err", err)
	}
	p.log.Debug("child started on a terminal", "command", spec.Argv, "dir", spec.Dir)
	go p.reap(h, nil)
	return p, nil
}

// cgroup is the agent's cgroup the child is born in (its sandbox's
// caps; v1 cgroups are joined by the sandbox's helper): nil for none.
func (spec Spec) cgroup() *cgroup.Group {
	if spec.Sandbox == nil || !spec.Sandbox.On {
		return nil
	}
	return &spec.Sandbox.Cgroup
}

func newProcess(spec Spec, cmd *exec.Cmd) *Process {
	log := spec.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Process{
		log:         log.With("pid", cmd.Process.Pid),
		cmd:         cmd,
		pid:         cmd.Process.Pid,
		stopTimeout: spec.StopTimeout,
		onStderr:    spec.OnStderr,
		stdin:       &stdin{},
		done:        make(chan struct{}),
		stderrDone:  make(chan struct{}),
		tailMax:     spec.StderrTail,
		sandboxed:   spec.Sandbox != nil && spec.Sandbox.On,
	}
	if p.stopTimeout <= 0 {
		p.stopTimeout = DefaultStopTimeout
	}
	if p.tailMax <= 0 {
		p.tailMax = DefaultStderrTail
	}
	return p
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// PID is the child's process id, which is also its process group id.
func (p *Process) PID() int { return p.pid }

// Stdin is the child's standard input. Writes are serialised, so one Write
// (one protocol line) is never interleaved with another. Close is
// idempotent; writes after it fail with ErrStdinClosed.
func (p *Process) Stdin() io.WriteCloser { return p.stdin }

// Stdout is the child's standard output. The caller reads it until end of
// file, which comes once the child and every process that inherited the
// pipe are gone, and then closes it.
func (p *Process) Stdout() io.ReadCloser { return p.stdout }

// Done is closed when the child has been reaped and its stderr read to the
// end (or, if a process that escaped the group still holds it, after
// StopTimeout more).
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitErr is Wait's error: nil for exit status 0, an *exec.ExitError
// otherwise ("exit status 3", "signal: killed"). It blocks until Done is
// closed.
func (p *Process) ExitErr() error {
	<-p.done
	return p.exitErr
}

// ProcessState is the reaped child's state (exit code, the signal that
// killed it). It blocks until Done is closed.
func (p *Process) ProcessState() *os.ProcessState {
	<-p.done
	return p.state
}

// Signal sends sig to the child's process group. Once the child has been
// reaped it does nothing: its pid may belong to another process by then.
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return nil
	}
	if p.sandboxed && sig != syscall.SIGKILL {
		if err := pidfd.SignalGroupButLeader(p.pid, sig); err != nil {
			return fmt.Errorf("signal process group %d: %w", p.pid, err)
		}
		return nil
	}
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d: %w", p.pid, err)
	}
	return nil
}

// Stop ends the child by escalation and returns once it is reaped: close its
// stdin (the quit path of a program that exits at end of input; engines with
// another quit path write it before calling Stop), wait up to StopTimeout,
// SIGTERM the process group, wait again, SIGKILL the group. Whenever the
// child exits (during a Stop or on its own), what is left of its group (a
// grandchild that ignored SIGTERM) is SIGKILLed before the child is reaped.
// When ctx ends, the remaining waits are skipped. Stop may be called more
// than once, concurrently.
func (p *Process) Stop(ctx context.Context) {
	p.stdin.Close()
	if p.waitDone(ctx) {
		return
	}
	p.log.Debug("child still running after end of input: SIGTERM")
	if err := p.Signal(syscall.SIGTERM); err != nil {
		p.log.Warn("stop child", "err", err)
	}
	if p.waitDone(ctx) {
		return
	}
	p.log.Warn("child still running after SIGTERM: SIGKILL")
	if err := p.Signal(syscall.SIGKILL); err != nil {
		p.log.Warn("stop child", "err", err)
	}
	<-p.done
}

// waitDone waits up to the stop timeout for Done.
func (p *Process) waitDone(ctx context.Context) bool {
	t := time.NewTimer(p.stopTimeout)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// reap is the only caller of Wait. It first waits for the exit without
// reaping (the zombie keeps the pid and the group id, so signalling the
// group is safe until reaped is set), then reaps, then waits for the end of
// stderr. It waits on the child's pidfd h, parked in the poller; without
// one (a kernel before 5.3), in a blocking waitid.
func (p *Process) reap(h *pidfd.Process, errR *os.File) {
	if err := waitExited(h, p.pid); err != nil {
		p.log.Warn("wait for child exit", "err", err) // Wait below still reaps
	}
	// Whether it was stopped or died on its own, nothing of its group
	// outlives it (C11): the leader is not reaped yet, so the group id
	// cannot have been reused.
	p.mu.Lock()
	if err := syscall.Kill(-p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.log.Warn("kill what is left of the child's group", "err", err)
	}
	p.reaped = true
	p.mu.Unlock()
	p.exitErr = p.cmd.Wait() // the child has exited: it does not block
	p.state = p.cmd.ProcessState
	if h != nil {
		h.Close()
	}
	p.log.Debug("child exited", "status", p.state)
	t := time.NewTimer(p.stopTimeout)
	select {
	case <-p.stderrDone:
	case <-t.C:
		p.log.Warn("child's stderr still open after it exited: closed")
	}
	t.Stop()
	if errR != nil {
		errR.Close() // also unblocks the reader when something else holds the pipe
	}
	<-p.stderrDone
	close(p.done)
}

// waitExited returns once the child has exited, leaving it unreaped: a
// pidfd becomes readable at the exit and does not reap.
func waitExited(h *pidfd.Process, pid int) error {
	if h != nil {
		return h.Wait(context.Background())
	}
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// readStderr keeps the tail of the child's stderr and reports every chunk.
func (p *Process) readStderr(r *os.File) {
	defer close(p.stderrDone)
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if p.onStderr != nil {
				p.onStderr(buf[:n])
			}
			p.tmu.Lock()
			p.tail = append(p.tail, buf[:n]...)
			if len(p.tail) > p.tailMax {
				p.tail = append(p.tail[:0], p.tail[len(p.tail)-p.tailMax:]...)
			}
			p.tmu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// StderrTail is the last bytes the child wrote to stderr, at most
// Spec.StderrTail of them. It is complete once Done is closed.
func (p *Process) StderrTail() string {
	p.tmu.Lock()
	defer p.tmu.Unlock()
	return string(p.tail)
}

// LastStderrLine is the last non-blank line of StderrTail, trimmed: the
// usual reason a program gives when it dies.
func (p *Process) LastStderrLine() string {
	p.tmu.Lock()
	defer p.tmu.Unlock()
	return lastLine(p.tail)
}

func lastLine(b []byte) string {
	b = bytes.TrimRight(b, " \t\r\n")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return string(bytes.TrimSpace(b))
}

// stdin serialises writes to the child's stdin and closes it once.
type stdin struct {
	mu     sync.Mutex // guards f and closed
	f      *os.File
	closed bool
}

func (s *stdin) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrStdinClosed
	}
	return s.f.Write(b)
}

func (s *stdin) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.f.Close()
}

// NestedSessionVars are set by Claude Code in the processes it runs; a
// child that inherits them takes itself for a nested session.
var NestedSessionVars = []string{"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT"}

// Env builds a child's environment (C11): the daemon's variables named in
// allow, then the agent's env table, then extra ("KEY=value" entries; one
// without "=" is ignored), each later source overriding an earlier one.
// The variables that mark a process as running inside a Claude Code
// session (NestedSessionVars) are never passed on, whatever their source:
// a Claude Code child would take itself for a nested session. The person's
// own Claude settings (CLAUDE_CODE_USE_BEDROCK, CLAUDE_CODE_MAX_RETRIES,
// ...) are theirs to pass, like any variable (C11). The result is sorted.
func Env(allow []string, agentEnv map[string]string, extra ...string) []string {
	vars := make(map[string]string, len(allow)+len(agentEnv)+len(extra))
	for _, k := range allow {
		if v, ok := os.LookupEnv(k); ok {
			vars[k] = v
		}
	}
	for k, v := range agentEnv {
		vars[k] = v
	}
	for _, kv := range extra {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		if k == "" || slices.Contains(NestedSessionVars, k) {
			continue
		}
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// Program finds the program an agent runs: command, or def when command
// is empty, looked up on PATH. what names the program in errors ("Codex
// CLI") and install says how to get it ("install Codex (npm install -g
// @openai/codex)").
func Program(command, def, what, install string) (string, error) {
	if command == "" {
		command = def
	}
	path, err := exec.LookPath(command)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("find %s %q: not found: %s or set command for the agent in .troupe/team.toml", what, command, install)
		}
		return "", fmt.Errorf("find %s %q: %w", what, command, err)
	}
	return path, nil
}

// CheckDir checks that a child's working directory is given and is a
// directory.
func CheckDir(dir string) error {
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
