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
	"github.com/troupe-dev/troupe/internal/engine/proc"
	"github.com/troupe-dev/troupe/internal/troupe"
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

	events chan engine.Event
	stop   chan struct{} // closed by Close: pending event sends give up
	done   chan struct{} // closed when every goroutine of the session stopped

	// ctx is the session's lifetime: approvals run under it (or under
	// their turn's); Close and the end of the session cancel it.
	ctx    context.Context
	cancel context.CancelFunc

	approvals sync.WaitGroup // permission requests in flight
	closeOnce sync.Once
	seq       atomic.Uint64 // ids of troupe's control requests

	// mu guards the fields below.
	mu          sync.Mutex
	proc        *proc.Process // the running child; replaced once if a resume is refused
	id          string        // the Claude session id
	resuming    bool          // the child was started with --resume and has not yet shown it took
	turn        troupe.TurnID // the running turn, "" when idle
	input       []byte        // the running turn's user line, sent again to a fresh child after a refused resume
	interrupted bool          // Interrupt was called during the running turn
	turnCtx     context.Context
	turnCancel  context.CancelFunc // cancels the running turn's approvals
	closing     bool               // Close was called
	ended       bool               // the child is gone and Events closed (or closing)
	err         error              // why the session ended on its own; nil after Close
	lastError   string             // the last failed turn's error text, for the reason of a death

	act engine.ActivityMeter
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
		events:      make(chan engine.Event, eventBuffer),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	p, err := s.startChild(id, resume)
	if err != nil {
		return nil, err
	}
	s.proc, s.id, s.resuming = p, id, resume
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.events <- engine.Event{Kind: engine.EventSession, SessionID: id} // the buffer is empty
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
		OnStderr:    func([]byte) { s.act.Bump() },
	})
}

// ID is the Claude session id of the conversation (after a refused resume,
// the new one's).
func (s *Session) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// PID is the running CLI's process id, which is also its process group id.
func (s *Session) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.PID()
}

// Events reports the session's id, output, tool calls, permissions, usage
// and turn ends. It is closed when the CLI is gone and every goroutine of
// the session has stopped.
func (s *Session) Events() <-chan engine.Event { return s.events }

// Activity is the session's activity token (C3): it advances on every line
// the CLI writes to stdout and every chunk it writes to stderr.
func (s *Session) Activity() engine.Activity { return s.act.Load() }

// Err says why the session ended on its own, e.g. "claude exited: exit
// status 1: API Error: …". It is nil while the session runs and when it
// ended because of Close.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

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
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		return fmt.Errorf("send turn %s: session closed", in.Turn)
	case s.ended:
		err := s.err
		s.mu.Unlock()
		return fmt.Errorf("send turn %s: session ended: %w", in.Turn, err)
	case s.turn != "":
		running := s.turn
		s.mu.Unlock()
		return fmt.Errorf("send turn %s: turn %s still running", in.Turn, running)
	}
	s.turn, s.input, s.interrupted = in.Turn, b, false
	s.turnCtx, s.turnCancel = context.WithCancel(s.ctx)
	p := s.proc
	s.mu.Unlock()

	if _, err := p.Stdin().Write(b); err != nil {
		s.mu.Lock()
		if s.turn == in.Turn {
			s.endTurnLocked()
		}
		s.mu.Unlock()
		return fmt.Errorf("send turn %s: write to claude: %w", in.Turn, err)
	}
	return nil
}

// Interrupt sends the CLI an interrupt control request; the running turn
// then ends with an EventTurnEnd whose Error is "interrupted". It does not
// wait for that. Without a running turn it does nothing.
func (s *Session) Interrupt(ctx context.Context) error {
	s.mu.Lock()
	turn, p := s.turn, s.proc
	if turn != "" {
		s.interrupted = true
	}
	s.mu.Unlock()
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
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		p := s.proc
		s.mu.Unlock()
		close(s.stop)
		s.cancel()
		p.Stop(ctx)
	})
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close claude session: %w", context.Cause(ctx))
	}
}

// run is the session's lifecycle goroutine: it reads the child's stdout to
// the end, starts a fresh conversation once if the CLI refused the resume,
// and at the end records why the session ended, waits for the approvals,
// removes the private folder and closes Events.
func (s *Session) run() {
	var p *proc.Process
	for {
		s.mu.Lock()
		p = s.proc
		s.mu.Unlock()
		lost := s.readStdout(p)
		<-p.Done()
		if !lost {
			s.mu.Lock()
			lost = s.resuming && strings.Contains(p.StderrTail(), lostSession)
			s.mu.Unlock()
		}
		if !lost || !s.startFresh(p) {
			break
		}
	}
	p.Stdin().Close()
	s.mu.Lock()
	s.ended = true
	if !s.closing && s.err == nil {
		s.err = s.exitReason(p)
	}
	if s.turn != "" {
		s.endTurnLocked() // no turn end is invented: Events just closes
	}
	s.mu.Unlock()
	s.cancel()
	s.approvals.Wait()
	if s.tmpDir != "" {
		if err := os.RemoveAll(s.tmpDir); err != nil {
			s.log.Warn("remove the session's private folder", "err", err)
		}
	}
	close(s.events)
	close(s.done)
}

// startFresh replaces a child that refused --resume (the CLI no longer has
// the conversation) by one with a new session id, reports that id, and
// sends it the running turn's input. It reports whether the session goes
// on.
func (s *Session) startFresh(old *proc.Process) bool {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return false
	}
	lostID, id := s.id, newSessionID()
	p, err := s.startChild(id, false)
	if err != nil {
		s.err = fmt.Errorf("start a new claude session after resume of %s failed: %w", lostID, err)
		s.mu.Unlock()
		return false
	}
	s.proc, s.id, s.resuming = p, id, false
	input := s.input
	if s.turn == "" {
		input = nil
	}
	s.mu.Unlock()
	s.log.Warn("claude has no conversation to resume: started a new one", "lost_session", lostID, "new_session", id,
		"reason", strings.TrimSpace(old.LastStderrLine()))
	s.emit(engine.Event{Kind: engine.EventSession, SessionID: id})
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
		s.act.Bump()
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
		s.mu.Lock()
		s.err = fmt.Errorf("claude killed: read its output: %w", err)
		s.mu.Unlock()
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
			s.mu.Lock()
			s.resuming = false
			s.mu.Unlock()
		}
	default:
		evs := m.events(l)
		if len(evs) == 0 {
			return false
		}
		s.mu.Lock()
		turn := s.turn
		s.mu.Unlock()
		if turn == "" {
			s.log.Debug("claude reported work outside a turn", "type", l.Type)
			return false
		}
		for _, ev := range evs {
			ev.Turn = turn
			s.emit(ev)
		}
	}
	return false
}

// result ends the running turn with the protocol's own end (C7).
func (s *Session) result(m *mapper, l line) (lost bool) {
	s.mu.Lock()
	if s.resuming && l.lostResume() {
		s.mu.Unlock()
		return true
	}
	s.resuming = false
	turn, interrupted := s.turn, s.interrupted
	if turn != "" {
		s.endTurnLocked()
	}
	usage, end := m.turnEnd(l, interrupted)
	if end.Error != "" && end.Error != "interrupted" {
		s.lastError = end.Error
	}
	s.mu.Unlock()
	if turn == "" {
		s.log.Warn("claude ended a turn that is not running", "error", end.Error)
		return false
	}
	usage.Turn, end.Turn = turn, turn
	s.emit(usage)
	s.emit(end)
	return false
}

// endTurnLocked marks the session idle and cancels the turn's approvals.
// s.mu must be held.
func (s *Session) endTurnLocked() {
	s.turn, s.input, s.interrupted = "", nil, false
	if s.turnCancel != nil {
		s.turnCancel()
		s.turnCancel, s.turnCtx = nil, nil
	}
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
	s.mu.Lock()
	turn, ctx := s.turn, s.turnCtx
	s.mu.Unlock()
	if ctx == nil {
		ctx = s.ctx
	}
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
	var d engine.Decision
	if s.approver == nil {
		d = engine.Decision{Reason: errNoApprover.Error()}
	} else {
		var err error
		if d, err = s.approver.Approve(ctx, perm); err != nil {
			d = engine.Decision{Reason: "not approved: " + err.Error()}
		}
	}
	s.emit(engine.Event{Kind: engine.EventPermission, Turn: perm.Turn, Permission: &perm, Decision: &d})
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

// emit hands an event to the consumer, waiting for room unless closing.
func (s *Session) emit(ev engine.Event) {
	select {
	case s.events <- ev:
	case <-s.stop:
	}
}
