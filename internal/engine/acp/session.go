package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/proc"
	"github.com/troupe-dev/troupe/internal/sandbox"
)

var _ engine.Session = (*Session)(nil)

// eventBuffer is the capacity of a session's Events channel.
const eventBuffer = 64

// errNoApprover is the reason of a denial when the session has no Approver.
var errNoApprover = errors.New("no one to approve: troupe denies")

// errGone is the error of a call whose answer the agent will never give.
var errGone = errors.New("the agent exited")

// sessionSpec is what start needs.
type sessionSpec struct {
	name        string
	argv        []string
	dir         string
	env         []string
	instr       string
	resume      string
	mcp         engine.MCPAccess
	approver    engine.Approver
	log         *slog.Logger
	stopTimeout time.Duration
	sandbox     *sandbox.Policy // the agent process's; nil: none
}

// Session is one ACP agent process and one of its sessions. It is safe for
// concurrent use; see the package doc for the goroutines it owns.
type Session struct {
	name     string
	log      *slog.Logger
	approver engine.Approver
	proc     *proc.Process

	// The events, activity, Err, turn gate and Close; approvals run under
	// the running turn's context (else the session's). Its Mu guards the
	// fields below.
	*engine.SessionCore

	gone chan struct{} // closed when stdout ended: calls waiting give up

	approvals sync.WaitGroup
	wmu       sync.Mutex // serialises lines to the child's stdin

	nextID      int64
	pending     map[int64]chan message // calls waiting for their answer
	id          string                 // the ACP session id
	instr       string                 // instructions still to give (the first prompt of a new session)
	promptID    int64                  // the running turn's session/prompt request
	interrupted bool
	lastError   string
}

// start starts the child, its reader, and the protocol's handshake.
func start(ctx context.Context, spec sessionSpec) (*Session, error) {
	s := &Session{
		name:        spec.name,
		log:         spec.log,
		approver:    spec.approver,
		SessionCore: engine.NewSessionCore(eventBuffer),
		gone:        make(chan struct{}),
		pending:     map[int64]chan message{},
	}
	p, err := proc.Start(proc.Spec{
		Argv:        spec.argv,
		Dir:         spec.dir,
		Env:         spec.env,
		Logger:      spec.log,
		StopTimeout: spec.stopTimeout,
		OnStderr:    func([]byte) { s.Bump() },
		Sandbox:     spec.sandbox,
	})
	if err != nil {
		return nil, err
	}
	s.proc = p
	go s.run()
	if err := s.handshake(ctx, spec); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 2*spec.stopTimeout+time.Second)
		defer cancel()
		s.Close(cctx)
		if tail := p.LastStderrLine(); tail != "" {
			err = fmt.Errorf("%w (%s said: %s)", err, s.name, tail)
		}
		return nil, err
	}
	return s, nil
}

// handshake initializes the protocol and opens the session (load or new),
// then reports its id.
func (s *Session) handshake(ctx context.Context, spec sessionSpec) error {
	raw, err := s.call(ctx, "initialize", initializeParams())
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var init initializeResult
	if err := json.Unmarshal(raw, &init); err != nil {
		return fmt.Errorf("decode initialize answer: %w", err)
	}
	servers := []mcpServer{}
	if spec.mcp.URL != "" {
		if init.AgentCapabilities.MCPCapabilities.HTTP {
			servers = append(servers, mcpServer{Type: "http", Name: MCPServerName, URL: spec.mcp.URL,
				Headers: []httpHeader{{Name: "Authorization", Value: "Bearer " + spec.mcp.Token}}})
		} else {
			s.log.Warn("the agent takes no HTTP MCP server: it runs without troupe's tools")
		}
	}
	id := ""
	if spec.resume != "" {
		if !init.AgentCapabilities.LoadSession {
			s.log.Warn("the agent cannot load sessions: starting a new one", "lost_session", spec.resume)
		} else if _, err := s.call(ctx, "session/load", sessionParams{SessionID: spec.resume, CWD: spec.dir, MCPServers: servers}); err != nil {
			if ctx.Err() != nil || isGone(s.gone) {
				return fmt.Errorf("load session %s: %w", spec.resume, err)
			}
			s.log.Warn("the agent could not load the session: starting a new one", "lost_session", spec.resume, "err", err)
		} else {
			id = spec.resume
		}
	}
	if id == "" {
		raw, err := s.call(ctx, "session/new", sessionParams{CWD: spec.dir, MCPServers: servers})
		if err != nil {
			return fmt.Errorf("new session: %w", err)
		}
		var res newSessionResult
		if err := json.Unmarshal(raw, &res); err != nil || res.SessionID == "" {
			return fmt.Errorf("new session: no session id in %s", clipRaw(raw))
		}
		id = res.SessionID
		s.Mu.Lock()
		s.instr = spec.instr // a loaded session has had them
		s.Mu.Unlock()
	}
	s.Mu.Lock()
	s.id = id
	s.Mu.Unlock()
	s.Emit(engine.Event{Kind: engine.EventSession, SessionID: id})
	return nil
}

func isGone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// call sends a request and waits for its answer.
func (s *Session) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ch := make(chan message, 1)
	s.Mu.Lock()
	if s.EndedLocked() {
		s.Mu.Unlock()
		return nil, errGone
	}
	s.nextID++
	id := s.nextID
	s.pending[id] = ch
	s.Mu.Unlock()
	defer func() {
		s.Mu.Lock()
		delete(s.pending, id)
		s.Mu.Unlock()
	}()
	b, err := encodeRequest(id, method, params)
	if err != nil {
		return nil, err
	}
	if err := s.write(b); err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-s.gone:
		return nil, errGone
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// write writes one line to the child's stdin.
func (s *Session) write(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.proc.Stdin().Write(b); err != nil {
		return fmt.Errorf("write to %s: %w", s.name, err)
	}
	return nil
}

// ID is the ACP session id.
func (s *Session) ID() string {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.id
}

// PID is the child's process id (and process group id).
func (s *Session) PID() int { return s.proc.PID() }

// Events (the session's id, output, thinking, tool calls, permissions,
// usage and turn ends; closed when the child is gone and every goroutine
// of the session stopped), Activity (every stdout line and stderr chunk,
// C3) and Err (why the session ended on its own; nil while it runs and
// after Close) come from SessionCore.

// Send starts a turn: one session/prompt request whose text is
// engine.Render of the messages (after the agent's instructions, as a
// block of their own, on the first turn of a new session). Its answer ends
// the turn (C7).
func (s *Session) Send(ctx context.Context, in engine.Input) error {
	var b []byte
	if _, err := s.BeginTurn(ctx, in, func() error {
		var prompt []contentBlock
		if s.instr != "" {
			prompt = append(prompt, contentBlock{Type: "text", Text: s.instr})
		}
		prompt = append(prompt, contentBlock{Type: "text", Text: engine.Render(in)})
		s.nextID++
		id := s.nextID
		var err error
		if b, err = encodeRequest(id, "session/prompt", promptParams{SessionID: s.id, Prompt: prompt}); err != nil {
			return err
		}
		s.instr = ""
		s.promptID, s.interrupted = id, false
		return nil
	}); err != nil {
		return err
	}
	if err := s.write(b); err != nil {
		s.Mu.Lock()
		if turn, _ := s.TurnLocked(); turn == in.Turn {
			s.endTurnLocked()
		}
		s.Mu.Unlock()
		return fmt.Errorf("send turn %s: %w", in.Turn, err)
	}
	return nil
}

// Interrupt sends session/cancel and cancels the turn's pending
// permission requests (answered "cancelled"); the agent then answers the
// prompt with stopReason "cancelled", and the turn ends "interrupted". It
// does not wait. Without a running turn it does nothing.
func (s *Session) Interrupt(ctx context.Context) error {
	s.Mu.Lock()
	turn, _ := s.TurnLocked()
	id := s.id
	if turn != "" {
		s.interrupted = true
		s.CancelTurnLocked()
	}
	s.Mu.Unlock()
	if turn == "" {
		return nil
	}
	b, err := encodeNotification("session/cancel", map[string]string{"sessionId": id})
	if err == nil {
		err = s.write(b)
	}
	if err != nil {
		return fmt.Errorf("interrupt turn %s: %w", turn, err)
	}
	return nil
}

// Close stops the child by proc's escalation (close stdin, SIGTERM to its
// group, SIGKILL), reaps it, waits for every goroutine of the session, and
// Events is closed. When ctx ends it returns ctx's error if goroutines
// (an Approver ignoring its context) have not stopped.
func (s *Session) Close(ctx context.Context) error {
	return s.Shutdown(ctx, "close "+s.name+" session", s.proc.Stop)
}

// run is the session's lifecycle goroutine: it reads the child's stdout to
// the end, then records why the session ended, waits for the approvals
// and closes Events.
func (s *Session) run() {
	p := s.proc
	s.read(p)
	close(s.gone)
	<-p.Done()
	p.Stdin().Close()
	s.Finish(func() error { return s.exitReason(p) }, s.approvals.Wait)
}

// exitReason says why the child ended on its own.
func (s *Session) exitReason(p *proc.Process) error {
	status := "exit status 0"
	if err := p.ExitErr(); err != nil {
		status = err.Error()
	}
	msg := s.name + " exited: " + status
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
	var m mapper
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		s.Bump()
		msg, err := parseMessage(sc.Bytes())
		if err != nil {
			s.log.Warn(s.name+" wrote a line that is not JSON-RPC", "err", err)
			continue
		}
		s.handle(&m, msg)
	}
	if err := sc.Err(); err != nil {
		s.SetErr(fmt.Errorf("%s killed: read its output: %w", s.name, err))
		if err := p.Signal(syscall.SIGKILL); err != nil {
			s.log.Warn("kill "+s.name, "err", err)
		}
		io.Copy(io.Discard, r)
	}
}

// handle acts on one message of the agent.
func (s *Session) handle(m *mapper, msg message) {
	switch {
	case msg.isResponse():
		s.response(m, msg)
	case msg.isNotification():
		if msg.Method != "session/update" {
			return
		}
		var u updateParams
		if err := json.Unmarshal(msg.Params, &u); err != nil {
			s.log.Warn("decode session/update", "err", err)
			return
		}
		turn := s.CurrentTurn()
		if turn == "" {
			return // a loaded session's history, or work between turns
		}
		for _, ev := range m.events(u.Update) {
			ev.Turn = turn
			s.Emit(ev)
		}
	case msg.isRequest():
		s.request(m, msg)
	}
}

// response delivers an answer: the running prompt's ends the turn.
func (s *Session) response(m *mapper, msg message) {
	id, ok := msg.intID()
	if !ok {
		return
	}
	s.Mu.Lock()
	if ch, ok := s.pending[id]; ok {
		s.Mu.Unlock()
		ch <- msg // buffered, one answer per id
		return
	}
	turn, _ := s.TurnLocked()
	if turn == "" || id != s.promptID {
		s.Mu.Unlock()
		return
	}
	interrupted := s.interrupted
	s.endTurnLocked()
	var res *promptResult
	var rerr error
	if msg.Error != nil {
		rerr = msg.Error
	} else {
		res = &promptResult{}
		if err := json.Unmarshal(msg.Result, res); err != nil {
			res, rerr = nil, fmt.Errorf("decode the agent's end of turn: %w", err)
		}
	}
	usage, end := m.turnEnd(res, rerr, interrupted)
	m.reset()
	if end.Error != "" && end.Error != "interrupted" {
		s.lastError = end.Error
	}
	s.Mu.Unlock()
	if usage != nil {
		usage.Turn = turn
		s.Emit(*usage)
	}
	end.Turn = turn
	s.Emit(end)
}

// request answers a request of the agent: permissions go to the Approver
// in a goroutine of their own; troupe serves nothing else (no file system,
// no terminal: it did not offer them).
func (s *Session) request(m *mapper, msg message) {
	if msg.Method != "session/request_permission" {
		b, err := encodeError(msg.ID, codeMethodNotFound, "troupe does not serve "+msg.Method)
		if err == nil {
			err = s.write(b)
		}
		if err != nil {
			s.log.Debug("answer "+msg.Method, "err", err)
		}
		return
	}
	var p permissionParams
	if err := json.Unmarshal(msg.Params, &p); err != nil {
		s.log.Warn("decode session/request_permission", "err", err)
	}
	tool := m.toolName(p.ToolCall.ToolCallID)
	if tool == "" {
		tool = p.ToolCall.Title
	}
	if tool == "" {
		tool = p.ToolCall.Kind
	}
	title := p.ToolCall.Title
	if title == "" || title == tool {
		title = s.name + " wants to use " + tool
	}
	s.Mu.Lock()
	turn, ctx := s.TurnLocked()
	s.Mu.Unlock()
	perm := engine.Permission{ID: string(msg.ID), Turn: turn, Tool: tool, Input: p.ToolCall.RawInput, Title: title}
	id, opts := msg.ID, p.Options
	s.approvals.Go(func() { s.approve(ctx, id, opts, perm) })
}

// approve asks the Approver, reports the request and its decision, and
// answers the agent with the option that matches it. No Approver, or no
// decision, is a denial; a cancelled turn answers "cancelled".
func (s *Session) approve(ctx context.Context, id json.RawMessage, opts []permissionOption, perm engine.Permission) {
	var d engine.Decision
	if s.approver == nil {
		d = engine.Decision{Reason: errNoApprover.Error()}
	} else {
		var err error
		if d, err = s.approver.Approve(ctx, perm); err != nil {
			d = engine.Decision{Reason: "not approved: " + err.Error()}
		}
	}
	s.Emit(engine.Event{Kind: engine.EventPermission, Turn: perm.Turn, Permission: &perm, Decision: &d})
	b, err := encodeResult(id, permissionOutcome(opts, d, ctx.Err() != nil))
	if err == nil {
		err = s.write(b)
	}
	if err != nil {
		s.log.Debug("answer a permission request", "err", err)
	}
}

// endTurnLocked marks the session idle and cancels the turn's approvals.
// s.Mu must be held.
func (s *Session) endTurnLocked() {
	s.EndTurnLocked()
	s.promptID, s.interrupted = 0, false
}

// clip shortens a raw message for an error.
func clipRaw(b []byte) string {
	s, _ := clip.Ellipsis(string(b), 200)
	return s
}
