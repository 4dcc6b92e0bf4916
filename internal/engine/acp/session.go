package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/jsonrpc"
	"github.com/troupe-dev/troupe/internal/proc"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

var _ engine.Session = (*Session)(nil)

// eventBuffer is the capacity of a session's Events channel.
const eventBuffer = 64

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

	approvals sync.WaitGroup
	conn      *jsonrpc.Conn // the agent's stdio; its reader is run's
	m         mapper        // the running turn's mapping; only the reader touches it

	id          string // the ACP session id
	instr       string // instructions still to give (the first prompt of a new session)
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
	s.conn = jsonrpc.New(p.Stdout(), p.Stdin(), jsonrpc.Options{
		Name:           spec.name,
		Log:            spec.log,
		MaxLine:        maxLine,
		OnLine:         s.Bump,
		OnNotification: s.notification,
		OnRequest:      s.request,
		Kill:           func() error { return p.Signal(syscall.SIGKILL) },
	})
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
	raw, err := s.conn.Call(ctx, "initialize", initializeParams())
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
		} else if _, err := s.conn.Call(ctx, "session/load", sessionParams{SessionID: spec.resume, CWD: spec.dir, MCPServers: servers}); err != nil {
			if ctx.Err() != nil || errors.Is(err, jsonrpc.ErrClosed) {
				return fmt.Errorf("load session %s: %w", spec.resume, err)
			}
			s.log.Warn("the agent could not load the session: starting a new one", "lost_session", spec.resume, "err", err)
		} else {
			id = spec.resume
		}
	}
	if id == "" {
		raw, err := s.conn.Call(ctx, "session/new", sessionParams{CWD: spec.dir, MCPServers: servers})
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
	var params promptParams
	if _, err := s.BeginTurn(ctx, in, func() error {
		if s.instr != "" {
			params.Prompt = append(params.Prompt, contentBlock{Type: "text", Text: s.instr})
		}
		params.Prompt = append(params.Prompt, contentBlock{Type: "text", Text: engine.Render(in)})
		params.SessionID = s.id
		s.instr = ""
		s.interrupted = false
		return nil
	}); err != nil {
		return err
	}
	if _, err := s.conn.Go("session/prompt", params, func(m jsonrpc.Message) { s.promptAnswered(in.Turn, m) }); err != nil {
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
	if err := s.conn.Notify("session/cancel", map[string]string{"sessionId": id}); err != nil {
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
// the end (the connection's Run), then records why the session ended,
// waits for the approvals and closes Events.
func (s *Session) run() {
	p := s.proc
	if err := s.conn.Run(); err != nil {
		s.SetErr(fmt.Errorf("%s killed: %w", s.name, err))
	}
	p.Stdout().Close()
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

// notification acts on one notification of the agent (on the reader).
func (s *Session) notification(method string, params json.RawMessage) {
	if method != "session/update" {
		return
	}
	var u updateParams
	if err := json.Unmarshal(params, &u); err != nil {
		s.log.Warn("decode session/update", "err", err)
		return
	}
	turn := s.CurrentTurn()
	if turn == "" {
		return // a loaded session's history, or work between turns
	}
	for _, ev := range s.m.events(u.Update) {
		ev.Turn = turn
		s.Emit(ev)
	}
}

// promptAnswered takes the answer to turn's session/prompt (on the
// reader): it ends the turn (C7).
func (s *Session) promptAnswered(turn troupe.TurnID, msg jsonrpc.Message) {
	s.Mu.Lock()
	if cur, _ := s.TurnLocked(); cur == "" || cur != turn {
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
	usage, end := s.m.turnEnd(res, rerr, interrupted)
	s.m.reset()
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

// request takes a request of the agent (on the reader): permissions go
// to the Approver in a goroutine of their own; troupe serves nothing else
// (no file system, no terminal: it did not offer them), which the
// connection refuses.
func (s *Session) request(id json.RawMessage, method string, params json.RawMessage) bool {
	if method != "session/request_permission" {
		return false
	}
	var p permissionParams
	if err := json.Unmarshal(params, &p); err != nil {
		s.log.Warn("decode session/request_permission", "err", err)
	}
	tool := s.m.toolName(p.ToolCall.ToolCallID)
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
	perm := engine.Permission{ID: string(id), Turn: turn, Tool: tool, Input: p.ToolCall.RawInput, Title: title}
	opts := p.Options
	s.approvals.Go(func() { s.approve(ctx, id, opts, perm) })
	return true
}

// approve asks the Approver, reports the request and its decision, and
// answers the agent with the option that matches it. No Approver, or no
// decision, is a denial; a cancelled turn answers "cancelled".
func (s *Session) approve(ctx context.Context, id json.RawMessage, opts []permissionOption, perm engine.Permission) {
	d := engine.Ask(ctx, s.approver, perm)
	s.Emit(engine.Event{Kind: engine.EventPermission, Turn: perm.Turn, Permission: &perm, Decision: &d})
	if err := s.conn.Reply(id, permissionOutcome(opts, d, ctx.Err() != nil)); err != nil {
		s.log.Debug("answer a permission request", "err", err)
	}
}

// endTurnLocked marks the session idle and cancels the turn's approvals.
// s.Mu must be held.
func (s *Session) endTurnLocked() {
	s.EndTurnLocked()
	s.interrupted = false
}

// clip shortens a raw message for an error.
func clipRaw(b []byte) string {
	s, _ := clip.Ellipsis(string(b), 200)
	return s
}
