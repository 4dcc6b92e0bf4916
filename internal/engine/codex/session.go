package codex

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
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
	resume      string // "" for a new thread
	approver    engine.Approver
	log         *slog.Logger
	stopTimeout time.Duration
}

// Session is one long-lived Codex app-server process and its thread for
// one agent. It is safe for concurrent use; see the package doc for the
// goroutines it owns.
type Session struct {
	log      *slog.Logger
	launch   *launch
	approver engine.Approver
	proc     *proc.Process

	events chan engine.Event
	stop   chan struct{} // closed by Close: pending event sends give up
	done   chan struct{} // closed when every goroutine of the session stopped

	// ctx is the session's lifetime: approvals run under it (or under
	// their turn's); Close and the end of the session cancel it.
	ctx    context.Context
	cancel context.CancelFunc

	approvals sync.WaitGroup // approval requests in flight
	closeOnce sync.Once
	seq       atomic.Int64 // ids of troupe's requests

	act engine.ActivityMeter

	// mu guards the fields below.
	mu            sync.Mutex
	pending       map[int64]func(message) // answers awaited, by request id
	thread        string                  // the Codex thread id
	turn          troupe.TurnID           // the running turn, "" when idle
	codexTurn     string                  // the running turn's Codex id, once known
	interrupted   bool                    // Interrupt was called during the running turn
	interruptSent bool                    // turn/interrupt was written for it
	m             mapper                  // the running turn's mapping
	turnCtx       context.Context
	turnCancel    context.CancelFunc // cancels the running turn's approvals
	closing       bool               // Close was called
	ended         bool               // the child is gone
	err           error              // why the session ended on its own; nil after Close
	lastError     string             // the last failed turn's error, for the reason of a death
}

// start starts the app-server and its reader, runs the handshake
// (initialize, then thread/resume or thread/start) under ctx, and reports
// the thread id.
func start(ctx context.Context, spec sessionSpec) (*Session, error) {
	s := &Session{
		log:      spec.log,
		launch:   spec.launch,
		approver: spec.approver,
		events:   make(chan engine.Event, eventBuffer),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		pending:  make(map[int64]func(message)),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	p, err := proc.Start(proc.Spec{
		Argv:        spec.launch.argv,
		Dir:         spec.launch.dir,
		Env:         spec.launch.env,
		Logger:      spec.log,
		StopTimeout: spec.stopTimeout,
		OnStderr:    func([]byte) { s.act.Bump() },
	})
	if err != nil {
		s.cancel()
		return nil, err
	}
	s.proc = p
	go s.run()
	id, err := s.handshake(ctx, spec.resume)
	if err != nil {
		s.Close(context.Background())
		if why := p.LastStderrLine(); why != "" {
			err = fmt.Errorf("%w (codex: %s)", err, why)
		}
		return nil, err
	}
	s.mu.Lock()
	s.thread = id
	s.log = s.log.With("thread", id)
	s.mu.Unlock()
	s.events <- engine.Event{Kind: engine.EventSession, SessionID: id} // the buffer is empty
	return s, nil
}

// handshake initializes the server and starts or resumes the thread; it
// returns the thread id.
func (s *Session) handshake(ctx context.Context, resume string) (string, error) {
	init := map[string]any{"clientInfo": map[string]string{"name": "troupe", "title": "troupe", "version": "1"}}
	if _, err := s.call(ctx, "initialize", init); err != nil {
		return "", fmt.Errorf("initialize codex app-server: %w", err)
	}
	if err := s.notify("initialized", nil); err != nil {
		return "", fmt.Errorf("initialize codex app-server: %w", err)
	}
	params := map[string]any{"cwd": s.launch.dir}
	if s.launch.model != "" {
		params["model"] = s.launch.model
	}
	if s.launch.instr != "" {
		params["developerInstructions"] = s.launch.instr
	}
	if resume != "" {
		rp := map[string]any{"threadId": resume}
		for k, v := range params {
			rp[k] = v
		}
		res, err := s.call(ctx, "thread/resume", rp)
		if err == nil {
			return threadID(res)
		}
		var rerr *rpcError
		if !errors.As(err, &rerr) {
			return "", fmt.Errorf("resume codex thread %s: %w", resume, err)
		}
		s.log.Warn("codex has no thread to resume: starting a new one", "lost_thread", resume, "reason", rerr.Message)
	}
	res, err := s.call(ctx, "thread/start", params)
	if err != nil {
		return "", fmt.Errorf("start codex thread: %w", err)
	}
	return threadID(res)
}

func threadID(res json.RawMessage) (string, error) {
	var r threadResult
	if err := json.Unmarshal(res, &r); err != nil || r.Thread.ID == "" {
		return "", fmt.Errorf("read codex thread: no thread id in %.200s", res)
	}
	return r.Thread.ID, nil
}

// call sends a request and waits for its answer, ctx or the session's end.
func (s *Session) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ch := make(chan message, 1)
	if err := s.request(method, params, func(m message) { ch <- m }); err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", method, context.Cause(ctx))
	case <-s.done:
		return nil, fmt.Errorf("%s: codex app-server exited", method)
	}
}

// request writes a request whose answer goes to then (called by the
// reader, which it must not block).
func (s *Session) request(method string, params any, then func(message)) error {
	id := s.seq.Add(1)
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	s.mu.Lock()
	s.pending[id] = then
	s.mu.Unlock()
	if err := s.write(message{ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: raw}); err != nil {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return err
	}
	return nil
}

// notify writes a notification.
func (s *Session) notify(method string, params any) error {
	m := message{Method: method}
	if params != nil {
		raw, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("encode %s: %w", method, err)
		}
		m.Params = raw
	}
	return s.write(m)
}

// write writes one message to the child's stdin.
func (s *Session) write(m message) error {
	b, err := encode(m)
	if err != nil {
		return err
	}
	if _, err := s.proc.Stdin().Write(b); err != nil {
		return fmt.Errorf("write to codex: %w", err)
	}
	return nil
}

// ID is the Codex thread id of the conversation.
func (s *Session) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.thread
}

// PID is the app-server's process id, which is also its process group id.
func (s *Session) PID() int { return s.proc.PID() }

// Events reports the thread id, output, tool calls, permissions, usage and
// turn ends. It is closed when the child is gone and every goroutine of
// the session has stopped.
func (s *Session) Events() <-chan engine.Event { return s.events }

// Activity is the session's activity token (C3): it advances on every line
// the app-server writes to stdout and every chunk it writes to stderr.
func (s *Session) Activity() engine.Activity { return s.act.Load() }

// Err says why the session ended on its own, e.g. "codex exited: signal:
// killed". It is nil while the session runs and when Close ended it.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Send starts a turn: turn/start with the rendered messages as one text
// input. It fails if a turn is running or the session ended. Its events
// follow on Events, ending with one EventTurnEnd.
func (s *Session) Send(ctx context.Context, in engine.Input) error {
	if err := in.Check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
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
	s.turn, s.codexTurn, s.interrupted, s.interruptSent, s.m = in.Turn, "", false, false, mapper{}
	s.turnCtx, s.turnCancel = context.WithCancel(s.ctx)
	thread := s.thread
	s.mu.Unlock()

	params := map[string]any{"threadId": thread, "input": []map[string]string{{"type": "text", "text": engine.Render(in)}}}
	err := s.request("turn/start", params, func(m message) { s.turnStarted(in.Turn, m) })
	if err != nil {
		s.mu.Lock()
		if s.turn == in.Turn {
			s.endTurnLocked()
		}
		s.mu.Unlock()
		return fmt.Errorf("send turn %s: %w", in.Turn, err)
	}
	return nil
}

// turnStarted takes turn/start's answer: the Codex turn id (and a pending
// interrupt goes out), or the server's refusal, which ends the turn.
func (s *Session) turnStarted(id troupe.TurnID, m message) {
	if m.Error != nil {
		s.mu.Lock()
		if s.turn != id {
			s.mu.Unlock()
			return
		}
		s.endTurnLocked()
		s.mu.Unlock()
		s.emit(engine.Event{Kind: engine.EventTurnEnd, Turn: id, Error: "codex refused the turn: " + m.Error.Message})
		return
	}
	var r turnResult
	if json.Unmarshal(m.Result, &r) == nil {
		s.setCodexTurn(id, r.Turn.ID)
	}
}

// setCodexTurn records the running turn's Codex id and sends an interrupt
// asked for before it was known.
func (s *Session) setCodexTurn(id troupe.TurnID, codexTurn string) {
	s.mu.Lock()
	if s.turn != id || codexTurn == "" {
		s.mu.Unlock()
		return
	}
	s.codexTurn = codexTurn
	send := s.interrupted && !s.interruptSent
	if send {
		s.interruptSent = true
	}
	thread := s.thread
	s.mu.Unlock()
	if send {
		s.sendInterrupt(thread, codexTurn)
	}
}

func (s *Session) sendInterrupt(thread, codexTurn string) error {
	return s.request("turn/interrupt", map[string]string{"threadId": thread, "turnId": codexTurn}, func(m message) {
		if m.Error != nil {
			s.log.Warn("codex refused the interrupt", "err", m.Error.Message)
		}
	})
}

// Interrupt sends turn/interrupt (once the turn's Codex id is known); the
// running turn then ends with an EventTurnEnd whose Error is
// "interrupted". It does not wait for that. Without a running turn it does
// nothing.
func (s *Session) Interrupt(ctx context.Context) error {
	s.mu.Lock()
	turn, codexTurn, thread := s.turn, s.codexTurn, s.thread
	send := false
	if turn != "" {
		s.interrupted = true
		send = codexTurn != "" && !s.interruptSent
		if send {
			s.interruptSent = true
		}
	}
	s.mu.Unlock()
	if !send {
		return nil
	}
	if err := s.sendInterrupt(thread, codexTurn); err != nil {
		return fmt.Errorf("interrupt turn %s: %w", turn, err)
	}
	return nil
}

// Close stops the app-server by proc's escalation (close its stdin, on
// which it exits; SIGTERM, SIGKILL to its group, each wait bounded) and
// waits for every goroutine of the session (approvals are cancelled);
// Events is then closed. When ctx ends, Close skips the remaining waits
// and kills; it returns ctx's error if the session's goroutines have still
// not stopped. Close may be called more than once, concurrently.
func (s *Session) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		close(s.stop)
		s.cancel()
		s.proc.Stop(ctx)
	})
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close codex session: %w", context.Cause(ctx))
	}
}

// run is the session's reader goroutine: it reads the child's stdout to
// the end, then records why the session ended, waits for the approvals and
// closes Events.
func (s *Session) run() {
	p := s.proc
	s.read(p)
	<-p.Done()
	p.Stdin().Close()
	s.mu.Lock()
	s.ended = true
	if !s.closing && s.err == nil {
		s.err = s.exitReason(p)
	}
	if s.turn != "" {
		s.endTurnLocked() // no turn end is invented: Events just closes
	}
	s.pending = map[int64]func(message){}
	s.mu.Unlock()
	s.cancel()
	s.approvals.Wait()
	close(s.events)
	close(s.done)
}

// exitReason says why the child ended on its own: its exit status and its
// last words (stderr's last line, else the last failed turn's error).
func (s *Session) exitReason(p *proc.Process) error {
	status := "exit status 0"
	if err := p.ExitErr(); err != nil {
		status = err.Error()
	}
	msg := "codex exited: " + status
	why := p.LastStderrLine()
	if why == "" {
		why = s.lastError
	}
	if why != "" {
		msg += ": " + why
	}
	return errors.New(msg)
}

// read decodes the child's stdout lines until end of file.
func (s *Session) read(p *proc.Process) {
	r := p.Stdout()
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		s.act.Bump()
		m, err := parseMessage(sc.Bytes())
		if err != nil {
			s.log.Warn("codex wrote a line that is not JSON-RPC", "err", err)
			continue
		}
		s.handle(m)
	}
	if err := sc.Err(); err != nil {
		s.mu.Lock()
		s.err = fmt.Errorf("codex killed: read its output: %w", err)
		s.mu.Unlock()
		s.log.Warn("codex: read output", "err", err)
		if err := p.Signal(syscall.SIGKILL); err != nil { // it would block on a pipe nobody reads
			s.log.Warn("kill codex", "err", err)
		}
		io.Copy(io.Discard, r)
	}
}

// handle acts on one message.
func (s *Session) handle(m message) {
	switch {
	case m.Method == "":
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		s.mu.Lock()
		then := s.pending[id]
		delete(s.pending, id)
		s.mu.Unlock()
		if err != nil || then == nil {
			s.log.Debug("codex answered a request troupe did not send", "id", string(m.ID))
			return
		}
		then(m)
	case m.ID != nil:
		s.serverRequest(m)
	case m.Method == "turn/started":
		var r turnResult
		if json.Unmarshal(m.Params, &r) == nil {
			s.mu.Lock()
			turn := s.turn
			s.mu.Unlock()
			s.setCodexTurn(turn, r.Turn.ID)
		}
	case m.Method == "turn/completed":
		s.turnCompleted(m.Params)
	default:
		s.mu.Lock()
		turn := s.turn
		var evs []engine.Event
		if turn != "" {
			evs = s.m.events(m.Method, m.Params)
		}
		s.mu.Unlock()
		for _, ev := range evs {
			ev.Turn = turn
			s.emit(ev)
		}
	}
}

// turnCompleted ends the running turn with the protocol's own end (C7).
func (s *Session) turnCompleted(params json.RawMessage) {
	var r turnResult
	json.Unmarshal(params, &r)
	s.mu.Lock()
	turn := s.turn
	if turn == "" || (s.codexTurn != "" && r.Turn.ID != "" && r.Turn.ID != s.codexTurn) {
		s.mu.Unlock()
		s.log.Debug("codex completed a turn that is not running", "codex_turn", r.Turn.ID)
		return
	}
	end := s.m.turnEnd(params, s.interrupted)
	if end.Error != "" && end.Error != interrupted {
		s.lastError = end.Error
	}
	s.endTurnLocked()
	s.mu.Unlock()
	end.Turn = turn
	s.emit(end)
}

// endTurnLocked marks the session idle and cancels the turn's approvals.
// s.mu must be held.
func (s *Session) endTurnLocked() {
	s.turn, s.codexTurn, s.interrupted, s.interruptSent = "", "", false, false
	if s.turnCancel != nil {
		s.turnCancel()
		s.turnCancel, s.turnCtx = nil, nil
	}
}

// approvalParams are the params of the approval requests.
type approvalParams struct {
	ItemID  string  `json:"itemId"`
	Command *string `json:"command"`
	Cwd     *string `json:"cwd"`
	Reason  *string `json:"reason"`
}

// serverRequest answers a request of the server: approvals go to the
// Approver in a goroutine of their own (it may wait for the person for
// hours; the reader keeps reading); anything else is refused.
func (s *Session) serverRequest(m message) {
	var tool string
	switch m.Method {
	case "item/commandExecution/requestApproval":
		tool = toolShell
	case "item/fileChange/requestApproval":
		tool = toolPatch
	default:
		s.log.Warn("codex sent a request troupe does not serve", "method", m.Method)
		s.answer(message{ID: m.ID, Error: &rpcError{Code: -32601, Message: "troupe does not serve " + m.Method}})
		return
	}
	var p approvalParams
	json.Unmarshal(m.Params, &p)
	title := "Codex wants to change files"
	if tool == toolShell {
		title = "Codex wants to run a command"
		if p.Command != nil && *p.Command != "" {
			title = "Codex wants to run: " + *p.Command
		}
	}
	if p.Reason != nil && *p.Reason != "" {
		title += " (" + *p.Reason + ")"
	}
	s.mu.Lock()
	turn, ctx := s.turn, s.turnCtx
	s.mu.Unlock()
	if ctx == nil {
		ctx = s.ctx
	}
	perm := engine.Permission{ID: string(m.ID), Turn: turn, Tool: tool, Input: rawOrEmpty(m.Params), Title: title}
	id := m.ID
	s.approvals.Go(func() { s.approve(ctx, id, perm) })
}

// errNoApprover is the reason of a denial when the session has no Approver.
var errNoApprover = errors.New("no approver: troupe denies what it cannot ask about")

// approve asks the Approver, reports the request and its decision, and
// answers the server: accept or decline. No Approver, or no decision (an
// error, the turn ended), is a denial.
func (s *Session) approve(ctx context.Context, id json.RawMessage, perm engine.Permission) {
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
	decision := "decline"
	if d.Allow {
		decision = "accept"
	}
	s.answer(message{ID: id, Result: json.RawMessage(`{"decision":"` + decision + `"}`)})
}

// answer writes a response; a failure means the child is going away,
// which its exit reports.
func (s *Session) answer(m message) {
	if err := s.write(m); err != nil {
		s.log.Debug("answer codex", "err", err)
	}
}

// emit hands an event to the consumer, waiting for room unless closing.
func (s *Session) emit(ev engine.Event) {
	select {
	case s.events <- ev:
	case <-s.stop:
	}
}
