package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/jsonrpc"
	"github.com/troupe-dev/troupe/internal/proc"
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

	// The events, activity, Err, turn gate and Close; approvals run under
	// the running turn's context (else the session's). Its Mu guards the
	// fields below.
	*engine.SessionCore

	approvals sync.WaitGroup // approval requests in flight
	conn      *jsonrpc.Conn  // the app-server's stdio; its reader is run's

	thread        string // the Codex thread id
	codexTurn     string // the running turn's Codex id, once known
	interrupted   bool   // Interrupt was called during the running turn
	interruptSent bool   // turn/interrupt was written for it
	m             mapper // the running turn's mapping
	lastError     string // the last failed turn's error, for the reason of a death
}

// start starts the app-server and its reader, runs the handshake
// (initialize, then thread/resume or thread/start) under ctx, and reports
// the thread id.
func start(ctx context.Context, spec sessionSpec) (*Session, error) {
	s := &Session{
		log:         spec.log,
		launch:      spec.launch,
		approver:    spec.approver,
		SessionCore: engine.NewSessionCore(eventBuffer),
	}
	p, err := proc.Start(proc.Spec{
		Argv:        spec.launch.argv,
		Dir:         spec.launch.dir,
		Env:         spec.launch.env,
		Logger:      spec.log,
		StopTimeout: spec.stopTimeout,
		OnStderr:    func([]byte) { s.Bump() },
		Sandbox:     spec.launch.sandbox,
	})
	if err != nil {
		return nil, err
	}
	s.proc = p
	s.conn = jsonrpc.New(p.Stdout(), p.Stdin(), jsonrpc.Options{
		Name:           "codex",
		Log:            spec.log,
		MaxLine:        maxLine,
		OnLine:         s.Bump,
		OnNotification: s.notification,
		OnRequest:      s.serverRequest,
		Kill:           func() error { return p.Signal(syscall.SIGKILL) },
	})
	go s.run()
	id, err := s.handshake(ctx, spec.resume)
	if err != nil {
		s.Close(context.Background())
		if why := p.LastStderrLine(); why != "" {
			err = fmt.Errorf("%w (codex: %s)", err, why)
		}
		return nil, err
	}
	s.Mu.Lock()
	s.thread = id
	s.log = s.log.With("thread", id)
	s.Mu.Unlock()
	s.Emit(engine.Event{Kind: engine.EventSession, SessionID: id}) // the buffer is empty
	return s, nil
}

// handshake initializes the server and starts or resumes the thread; it
// returns the thread id.
func (s *Session) handshake(ctx context.Context, resume string) (string, error) {
	init := map[string]any{"clientInfo": map[string]string{"name": "troupe", "title": "troupe", "version": "1"}}
	if _, err := s.conn.Call(ctx, "initialize", init); err != nil {
		return "", fmt.Errorf("initialize codex app-server: %w", err)
	}
	if err := s.conn.Notify("initialized", nil); err != nil {
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
		res, err := s.conn.Call(ctx, "thread/resume", rp)
		if err == nil {
			return threadID(res)
		}
		var rerr *jsonrpc.Error
		if !errors.As(err, &rerr) {
			return "", fmt.Errorf("resume codex thread %s: %w", resume, err)
		}
		s.log.Warn("codex has no thread to resume: starting a new one", "lost_thread", resume, "reason", rerr.Message)
	}
	res, err := s.conn.Call(ctx, "thread/start", params)
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

// ID is the Codex thread id of the conversation.
func (s *Session) ID() string {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.thread
}

// PID is the app-server's process id, which is also its process group id.
func (s *Session) PID() int { return s.proc.PID() }

// Events (the thread id, output, tool calls, permissions, usage and turn
// ends; closed when the child is gone and every goroutine of the session
// stopped), Activity (every stdout line and stderr chunk, C3) and Err
// (e.g. "codex exited: signal: killed"; nil while running and after
// Close) come from SessionCore.

// Send starts a turn: turn/start with the rendered messages as one text
// input. It fails if a turn is running or the session ended. Its events
// follow on Events, ending with one EventTurnEnd.
func (s *Session) Send(ctx context.Context, in engine.Input) error {
	var thread string
	if _, err := s.BeginTurn(ctx, in, func() error {
		s.codexTurn, s.interrupted, s.interruptSent, s.m = "", false, false, mapper{}
		thread = s.thread
		return nil
	}); err != nil {
		return err
	}

	params := map[string]any{"threadId": thread, "input": []map[string]string{{"type": "text", "text": engine.Render(in)}}}
	_, err := s.conn.Go("turn/start", params, func(m jsonrpc.Message) { s.turnStarted(in.Turn, m) })
	if err != nil {
		s.Mu.Lock()
		if turn, _ := s.TurnLocked(); turn == in.Turn {
			s.endTurnLocked()
		}
		s.Mu.Unlock()
		return fmt.Errorf("send turn %s: %w", in.Turn, err)
	}
	return nil
}

// turnStarted takes turn/start's answer: the Codex turn id (and a pending
// interrupt goes out), or the server's refusal, which ends the turn.
func (s *Session) turnStarted(id troupe.TurnID, m jsonrpc.Message) {
	if m.Error != nil {
		s.Mu.Lock()
		if turn, _ := s.TurnLocked(); turn != id {
			s.Mu.Unlock()
			return
		}
		s.endTurnLocked()
		s.Mu.Unlock()
		s.Emit(engine.Event{Kind: engine.EventTurnEnd, Turn: id, Error: "codex refused the turn: " + m.Error.Message})
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
	s.Mu.Lock()
	if turn, _ := s.TurnLocked(); turn != id || codexTurn == "" {
		s.Mu.Unlock()
		return
	}
	s.codexTurn = codexTurn
	send := s.interrupted && !s.interruptSent
	if send {
		s.interruptSent = true
	}
	thread := s.thread
	s.Mu.Unlock()
	if send {
		s.sendInterrupt(thread, codexTurn)
	}
}

func (s *Session) sendInterrupt(thread, codexTurn string) error {
	_, err := s.conn.Go("turn/interrupt", map[string]string{"threadId": thread, "turnId": codexTurn}, func(m jsonrpc.Message) {
		if m.Error != nil {
			s.log.Warn("codex refused the interrupt", "err", m.Error.Message)
		}
	})
	return err
}

// Interrupt sends turn/interrupt (once the turn's Codex id is known); the
// running turn then ends with an EventTurnEnd whose Error is
// "interrupted". It does not wait for that. Without a running turn it does
// nothing.
func (s *Session) Interrupt(ctx context.Context) error {
	s.Mu.Lock()
	turn, _ := s.TurnLocked()
	codexTurn, thread := s.codexTurn, s.thread
	send := false
	if turn != "" {
		s.interrupted = true
		send = codexTurn != "" && !s.interruptSent
		if send {
			s.interruptSent = true
		}
	}
	s.Mu.Unlock()
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
	return s.Shutdown(ctx, "close codex session", s.proc.Stop)
}

// run is the session's reader goroutine: it reads the child's stdout to
// the end (the connection's Run), then records why the session ended,
// waits for the approvals and closes Events.
func (s *Session) run() {
	p := s.proc
	if err := s.conn.Run(); err != nil {
		s.SetErr(fmt.Errorf("codex killed: %w", err))
		s.log.Warn("codex: read output", "err", err)
	}
	p.Stdout().Close()
	<-p.Done()
	p.Stdin().Close()
	s.Finish(func() error { return s.exitReason(p) }, s.approvals.Wait)
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

// notification acts on one notification of the server.
func (s *Session) notification(method string, params json.RawMessage) {
	switch method {
	case "turn/started":
		var r turnResult
		if json.Unmarshal(params, &r) == nil {
			s.setCodexTurn(s.CurrentTurn(), r.Turn.ID)
		}
	case "turn/completed":
		s.turnCompleted(params)
	default:
		s.Mu.Lock()
		turn, _ := s.TurnLocked()
		var evs []engine.Event
		if turn != "" {
			evs = s.m.events(method, params)
		}
		s.Mu.Unlock()
		for _, ev := range evs {
			ev.Turn = turn
			s.Emit(ev)
		}
	}
}

// turnCompleted ends the running turn with the protocol's own end (C7).
func (s *Session) turnCompleted(params json.RawMessage) {
	var r turnResult
	json.Unmarshal(params, &r)
	s.Mu.Lock()
	turn, _ := s.TurnLocked()
	if turn == "" || (s.codexTurn != "" && r.Turn.ID != "" && r.Turn.ID != s.codexTurn) {
		s.Mu.Unlock()
		s.log.Debug("codex completed a turn that is not running", "codex_turn", r.Turn.ID)
		return
	}
	end := s.m.turnEnd(params, s.interrupted)
	if end.Error != "" && end.Error != interrupted {
		s.lastError = end.Error
	}
	s.endTurnLocked()
	s.Mu.Unlock()
	end.Turn = turn
	s.Emit(end)
}

// endTurnLocked marks the session idle and cancels the turn's approvals.
// s.Mu must be held.
func (s *Session) endTurnLocked() {
	s.EndTurnLocked()
	s.codexTurn, s.interrupted, s.interruptSent = "", false, false
}

// approvalParams are the params of the approval requests.
type approvalParams struct {
	ItemID  string  `json:"itemId"`
	Command *string `json:"command"`
	Cwd     *string `json:"cwd"`
	Reason  *string `json:"reason"`
}

// serverRequest takes a request of the server: approvals go to the
// Approver in a goroutine of their own (it may wait for the person for
// hours; the reader keeps reading); anything else it leaves to the
// connection to refuse.
func (s *Session) serverRequest(id json.RawMessage, method string, params json.RawMessage) bool {
	var tool string
	switch method {
	case "item/commandExecution/requestApproval":
		tool = toolShell
	case "item/fileChange/requestApproval":
		tool = toolPatch
	default:
		return false
	}
	var p approvalParams
	json.Unmarshal(params, &p)
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
	s.Mu.Lock()
	turn, ctx := s.TurnLocked()
	s.Mu.Unlock()
	perm := engine.Permission{ID: string(id), Turn: turn, Tool: tool, Input: rawOrEmpty(params), Title: title}
	s.approvals.Go(func() { s.approve(ctx, id, perm) })
	return true
}

// approve asks the Approver, reports the request and its decision, and
// answers the server: accept or decline. No Approver, or no decision (an
// error, the turn ended), is a denial.
func (s *Session) approve(ctx context.Context, id json.RawMessage, perm engine.Permission) {
	d := engine.Ask(ctx, s.approver, perm)
	s.Emit(engine.Event{Kind: engine.EventPermission, Turn: perm.Turn, Permission: &perm, Decision: &d})
	decision := "decline"
	if d.Allow {
		decision = "accept"
	}
	// A failure means the child is going away, which its exit reports.
	if err := s.conn.Reply(id, map[string]string{"decision": decision}); err != nil {
		s.log.Debug("answer codex", "err", err)
	}
}
