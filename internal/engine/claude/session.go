package claude

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/proc"
)

var _ engine.Session = (*Session)(nil)

// eventBuffer is the capacity of a session's Events channel.
const eventBuffer = 64

// sessionSpec is what start needs.
type sessionSpec struct {
	launch      *launch
	resume      string // "" for a new conversation
	tmpDir      string // removed when the session ends; "" for none
	approver    engine.Approver
	log         *slog.Logger
	stopTimeout time.Duration
}

// Session is one long-lived Claude Code process in stream-json mode for
// one agent. It is safe for concurrent use; see the package doc for the
// goroutines it owns.
type Session struct {
	log         *slog.Logger
	launch      *launch
	approver    engine.Approver
	stopTimeout time.Duration
	tmpDir      string

	// The events, activity, Err, turn gate and Close; approvals run under
	// the running turn's context (else the session's). Its Mu guards the
	// fields below.
	*engine.SessionCore

	approvals sync.WaitGroup // permission requests in flight
	seq       atomic.Uint64  // ids of troupe's control requests

	proc        *proc.Process // the running child; replaced once if a resume is refused
	id          string        // the Claude session id
	resuming    bool          // the child was started with --resume and has not yet shown it took
	input       []byte        // the running turn's user line, sent again to a fresh child after a refused resume
	interrupted bool          // Interrupt was called during the running turn
	lastError   string        // the last failed turn's error text, for the reason of a death
}

// start starts the CLI and the session's lifecycle goroutine, and reports
// the session id.
func start(spec sessionSpec) (*Session, error) {
	id, resume := spec.resume, spec.resume != ""
	if !resume {
		id = newSessionID()
	}
	s := &Session{
		log:         spec.log.With("session", id),
		launch:      spec.launch,
		approver:    spec.approver,
		stopTimeout: spec.stopTimeout,
		tmpDir:      spec.tmpDir,
		SessionCore: engine.NewSessionCore(eventBuffer),
	}
	p, err := s.startChild(id, resume)
	if err != nil {
		return nil, err
	}
	s.proc, s.id, s.resuming = p, id, resume
	s.Emit(engine.Event{Kind: engine.EventSession, SessionID: id}) // the buffer is empty
	go s.run()
	return s, nil
}

// startChild starts the CLI for session id with proc (own process group,
// pipes, one reaper, stderr tail; every stderr chunk is activity).
func (s *Session) startChild(id string, resume bool) (*proc.Process, error) {
	return proc.Start(proc.Spec{
		Argv:        s.launch.argv(id, resume),
		Dir:         s.launch.dir,
		Env:         s.launch.env,
		Logger:      s.log,
		StopTimeout: s.stopTimeout,
		OnStderr:    func([]byte) { s.Bump() },
		Sandbox:     s.launch.sandbox,
	})
}

// ID is the Claude session id of the conversation (after a refused resume,
// the new one's).
func (s *Session) ID() string {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.id
}

// PID is the running CLI's process id, which is also its process group id.
func (s *Session) PID() int {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.proc.PID()
}

// Events (the session's id, output, tool calls, permissions, usage and
// turn ends; closed when the CLI is gone and every goroutine of the session
// stopped), Activity (every stdout line and stderr chunk, C3) and Err (e.g.
// "claude exited: exit status 1: API Error: …"; nil while running and
// after Close) come from SessionCore.

// Send starts a turn: it writes the rendered messages as one user line. It
// fails if a turn is running (troupe never types into a busy turn, C5; the
// CLI would queue it) or the session ended. Its events follow on Events,
// ending with one EventTurnEnd.
func (s *Session) Send(ctx context.Context, in engine.Input) error {
	if err := in.Check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("send turn %s: %w", in.Turn, err)
	}
	b, err := userInput(engine.Render(in))
	if err != nil {
		return fmt.Errorf("send turn %s: %w", in.Turn, err)
	}
	var p *proc.Process
	if _, err := s.BeginTurn(ctx, in, func() error {
		s.input, s.interrupted, p = b, false, s.proc
		return nil
	}); err != nil {
		return err
	}

	if _, err := p.Stdin().Write(b); err != nil {
		s.Mu.Lock()
		if turn, _ := s.TurnLocked(); turn == in.Turn {
			s.endTurnLocked()
		}
		s.Mu.Unlock()
		return fmt.Errorf("send turn %s: write to claude: %w", in.Turn, err)
	}
	return nil
}

// Interrupt sends the CLI an interrupt control request; the running turn
// then ends with an EventTurnEnd whose Error is "interrupted". It does not
// wait for that. Without a running turn it does nothing.
func (s *Session) Interrupt(ctx context.Context) error {
	s.Mu.Lock()
	turn, _ := s.TurnLocked()
	p := s.proc
	if turn != "" {
		s.interrupted = true
	}
	s.Mu.Unlock()
	if turn == "" {
		return nil
	}
	b, err := interruptRequest(fmt.Sprintf("troupe-interrupt-%d", s.seq.Add(1)))
	if err == nil {
		_, err = p.Stdin().Write(b)
	}
	if err != nil {
		return fmt.Errorf("interrupt turn %s: %w", turn, err)
	}
	return nil
}

// Close stops the CLI by proc's escalation: close its stdin (it exits at
// end of input once idle), wait up to StopTimeout, SIGTERM its process
// group, wait again, SIGKILL the group; it always reaps it. It then waits
// for every goroutine of the session (approvals are cancelled), removes the
// session's private folder (the MCP config), and Events is closed. When ctx
// ends, Close skips the remaining waits and kills; it returns ctx's error if
// the session's goroutines (an Approver that ignores its context) have
// still not stopped. Close may be called more than once, concurrently.
func (s *Session) Close(ctx context.Context) error {
	return s.Shutdown(ctx, "close claude session", func(ctx context.Context) {
		s.Mu.Lock()
		p := s.proc // Shutdown marked the session closing: startFresh replaces it no more
		s.Mu.Unlock()
		p.Stop(ctx)
	})
}

// run is the session's lifecycle goroutine: it reads the child's stdout to
// the end, starts a fresh conversation once if the CLI refused the resume,
// and at the end records why the session ended, waits for the approvals,
// removes the private folder and closes Events.
func (s *Session) run() {
	var p *proc.Process
	for {
		s.Mu.Lock()
		p = s.proc
		s.Mu.Unlock()
		lost := s.readStdout(p)
		<-p.Done()
		if !lost {
			s.Mu.Lock()
			lost = s.resuming && strings.Contains(p.StderrTail(), lostSession)
			s.Mu.Unlock()
		}
		if !lost || !s.startFresh(p) {
			break
		}
	}
	p.Stdin().Close()
	s.Finish(func() error { return s.exitReason(p) }, func() {
		s.approvals.Wait()
		if s.tmpDir != "" {
			if err := os.RemoveAll(s.tmpDir); err != nil {
				s.log.Warn("remove the session's private folder", "err", err)
			}
		}
	})
}

// startFresh replaces a child that refused --resume (the CLI no longer has
// the conversation) by one with a new session id, reports that id, and
// sends it the running turn's input. It reports whether the session goes
// on.
func (s *Session) startFresh(old *proc.Process) bool {
	s.Mu.Lock()
	if s.ClosingLocked() {
		s.Mu.Unlock()
		return false
	}
	lostID, id := s.id, newSessionID()
	p, err := s.startChild(id, false)
	if err != nil {
		s.SetErrLocked(fmt.Errorf("start a new claude session after resume of %s failed: %w", lostID, err))
		s.Mu.Unlock()
		return false
	}
	s.proc, s.id, s.resuming = p, id, false
	input := s.input
	turn, _ := s.TurnLocked()
	if turn == "" {
		input = nil
	}
	s.Mu.Unlock()
	why := strings.TrimSpace(old.LastStderrLine())
	s.log.Warn("claude has no conversation to resume: started a new one", "lost_session", lostID, "new_session", id, "reason", why)
	s.Emit(engine.Event{Kind: engine.EventSession, SessionID: id})
	// The person sees it in the agent's log and the web UI, not only in
	// the daemon's log: the agent goes on without its earlier history.
	s.Emit(engine.Event{Kind: engine.EventNotice, Turn: turn, Text: fmt.Sprintf(
		"Claude Code could not resume conversation %s (%s): troupe started a new conversation, %s, without the earlier history", lostID, why, id)})
	if input != nil {
		if _, err := p.Stdin().Write(input); err != nil {
			s.log.Warn("send the turn to the new claude session", "err", err)
		}
	}
	return true
}

// exitReason says why the child ended on its own: its exit status and its
// last words (stderr's last line, else the last failed turn's error).
func (s *Session) exitReason(p *proc.Process) error {
	status := "exit status 0"
	if err := p.ExitErr(); err != nil {
		status = err.Error()
	}
	msg := "claude exited: " + status
	why := p.LastStderrLine()
	if why == "" {
		why = s.lastError
	}
	if why != "" {
		msg += ": " + why
	}
	return errors.New(msg)
}

// readStdout decodes the child's stdout lines until end of file. It reports
// whether the CLI refused the resume.
func (s *Session) readStdout(p *proc.Process) (lost bool) {
	r := p.Stdout()
	defer r.Close()
	var m mapper
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		s.Bump()
		l, err := parseLine(sc.Bytes())
		if err != nil {
			s.log.Warn("claude wrote a line that is not stream-json", "err", err)
			continue
		}
		if s.handle(p, &m, l) {
			lost = true
		}
	}
	if err := sc.Err(); err != nil {
		s.SetErr(fmt.Errorf("claude killed: read its output: %w", err))
		s.log.Warn("claude: read output", "err", err)
		if err := p.Signal(syscall.SIGKILL); err != nil { // it would block on a pipe nobody reads
			s.log.Warn("kill claude", "err", err)
		}
		io.Copy(io.Discard, r)
	}
	return lost
}

// handle acts on one line; it reports a refused resume.
func (s *Session) handle(p *proc.Process, m *mapper, l line) (lost bool) {
	switch l.Type {
	case "control_request":
		s.controlRequest(p, l)
	case "control_response":
		// The answer to an interrupt: the turn's result follows.
	case "result":
		return s.result(m, l)
	case "system":
		if l.Subtype == "init" {
			s.Mu.Lock()
			s.resuming = false
			s.Mu.Unlock()
		}
	default:
		evs := m.events(l)
		if len(evs) == 0 {
			return false
		}
		turn := s.CurrentTurn()
		if turn == "" {
			s.log.Debug("claude reported work outside a turn", "type", l.Type)
			return false
		}
		for _, ev := range evs {
			ev.Turn = turn
			s.Emit(ev)
		}
	}
	return false
}

// result ends the running turn with the protocol's own end (C7).
func (s *Session) result(m *mapper, l line) (lost bool) {
	s.Mu.Lock()
	if s.resuming && l.lostResume() {
		s.Mu.Unlock()
		return true
	}
	s.resuming = false
	turn, _ := s.TurnLocked()
	interrupted := s.interrupted
	if turn != "" {
		s.endTurnLocked()
	}
	usage, end := m.turnEnd(l, interrupted)
	if end.Error != "" && end.Error != "interrupted" {
		s.lastError = end.Error
	}
	s.Mu.Unlock()
	if turn == "" {
		s.log.Warn("claude ended a turn that is not running", "error", end.Error)
		return false
	}
	usage.Turn, end.Turn = turn, turn
	s.Emit(usage)
	s.Emit(end)
	return false
}

// endTurnLocked marks the session idle and cancels the turn's approvals.
// s.Mu must be held.
func (s *Session) endTurnLocked() {
	s.EndTurnLocked()
	s.input, s.interrupted = nil, false
}

// controlRequest answers a control request of the CLI: can_use_tool goes
// to the Approver in a goroutine of its own (it may wait for the person for
// hours; the reader keeps reading); anything else is refused.
func (s *Session) controlRequest(p *proc.Process, l line) {
	if l.Request == nil || l.Request.Subtype != "can_use_tool" {
		subtype := ""
		if l.Request != nil {
			subtype = l.Request.Subtype
		}
		s.log.Warn("claude sent a control request troupe does not serve", "subtype", subtype)
		b, err := errorResponse(l.RequestID, "troupe does not serve control request "+subtype)
		s.write(p, b, err)
		return
	}
	s.Mu.Lock()
	turn, ctx := s.TurnLocked()
	s.Mu.Unlock()
	r := l.Request
	title := r.Title
	if title == "" {
		name := r.DisplayName
		if name == "" {
			name = r.ToolName
		}
		title = "Claude wants to use " + name
	}
	perm := engine.Permission{ID: l.RequestID, Turn: turn, Tool: r.ToolName, Input: r.Input, Title: title}
	s.approvals.Go(func() { s.approve(ctx, p, perm) })
}

// approve asks the Approver, reports the request and its decision, and
// answers the CLI. No Approver, or no decision (an error, the turn ended),
// is a denial.
func (s *Session) approve(ctx context.Context, p *proc.Process, perm engine.Permission) {
	d := engine.Ask(ctx, s.approver, perm)
	s.Emit(engine.Event{Kind: engine.EventPermission, Turn: perm.Turn, Permission: &perm, Decision: &d})
	b, err := permissionResponse(perm.ID, perm.Input, d)
	s.write(p, b, err)
}

// write writes one line to the child's stdin; a failure means the child is
// going away, which its exit reports.
func (s *Session) write(p *proc.Process, b []byte, err error) {
	if err == nil {
		_, err = p.Stdin().Write(b)
	}
	if err != nil {
		s.log.Debug("write to claude", "err", err)
	}
}
