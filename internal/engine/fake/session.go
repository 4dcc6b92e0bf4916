package fake

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"syscall"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/proc"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// eventBuffer is the capacity of a session's Events channel.
const eventBuffer = 64

// Session is one fake agent child process. It is safe for concurrent use;
// see the package doc for the goroutines it owns.
type Session struct {
	log      *slog.Logger
	tools    engine.Tools
	approver engine.Approver // nil: every permission is denied
	proc     *proc.Process   // the child: its reaper, stderr tail and stop

	// The events, activity, Err, turn gate and Close; the running turn's
	// context cancels its tool calls. Its Mu guards the fields below.
	*engine.SessionCore

	ready chan struct{} // closed when the child said ready

	reader sync.WaitGroup // the stdout reader
	calls  sync.WaitGroup // tool calls in flight

	readErr   error // set by the stdout reader before it stops
	readyOnce sync.Once

	inBytes  int // the running turn's input, for its usage
	outBytes int // the running turn's output and thinking, for its usage
}

// start starts the child with proc (own process group, pipes, one reaper,
// stderr tail; every stderr chunk is activity) and the session's
// goroutines.
func start(spec proc.Spec, tools engine.Tools, approver engine.Approver) (*Session, error) {
	s := &Session{
		tools:       tools,
		approver:    approver,
		SessionCore: engine.NewSessionCore(eventBuffer),
		ready:       make(chan struct{}),
	}
	spec.OnStderr = func([]byte) { s.Bump() }
	p, err := proc.Start(spec)
	if err != nil {
		return nil, err
	}
	s.proc = p
	if spec.Logger == nil {
		spec.Logger = slog.New(slog.DiscardHandler)
	}
	s.log = spec.Logger.With("pid", p.PID())
	s.reader.Go(func() { s.readStdout(p.Stdout()) })
	go s.lifecycle()
	return s, nil
}

// PID is the child's process id, which is also its process group id.
func (s *Session) PID() int { return s.proc.PID() }

// Events (closed when the child is gone and every goroutine of the session
// has stopped), Activity (every stdout line and stderr chunk, C3) and Err
// (e.g. "fake agent exited: exit status 3: fake agent crashing on
// purpose"; nil while running and after Close) come from SessionCore.

// Send starts a turn with in's messages. It fails if a turn is running or
// the session ended. It does not wait for the turn: its events follow on
// Events, ending with one EventTurnEnd.
func (s *Session) Send(ctx context.Context, in engine.Input) error {
	_, err := s.BeginTurn(ctx, in, func() error {
		s.inBytes, s.outBytes = 0, 0
		for _, m := range in.Messages {
			s.inBytes += len(m.Text)
		}
		return nil
	})
	if err != nil {
		return err
	}

	f := frame{Type: typeInput, Turn: string(in.Turn), Messages: make([]wireMessage, len(in.Messages))}
	for i, m := range in.Messages {
		f.Messages[i] = wireMessage{ID: m.ID, From: string(m.From), Kind: string(m.Kind), Text: m.Text, Redelivered: m.Redelivered}
	}
	if err := s.write(f); err != nil {
		s.Mu.Lock()
		if turn, _ := s.TurnLocked(); turn == in.Turn {
			s.EndTurnLocked()
		}
		s.Mu.Unlock()
		return fmt.Errorf("send turn %s: %w", in.Turn, err)
	}
	return nil
}

// Interrupt asks the child to end the running turn now; the turn then ends
// with an EventTurnEnd whose Error is "interrupted", and its tool calls in
// flight are cancelled. It does not wait for that event. Without a running
// turn it does nothing.
func (s *Session) Interrupt(ctx context.Context) error {
	turn := s.CurrentTurn()
	if turn == "" {
		return nil
	}
	if err := s.write(frame{Type: typeInterrupt, Turn: string(turn)}); err != nil {
		return fmt.Errorf("interrupt turn %s: %w", turn, err)
	}
	return nil
}

// Close stops the child by escalation: close its stdin (the fake agent
// exits at end of input), wait up to StopTimeout, SIGTERM its process
// group, wait again, SIGKILL the group; it always reaps the child. It then
// waits for every goroutine of the session and Events is closed. When ctx
// ends, Close skips the remaining waits and kills; it returns ctx's error
// if the session's goroutines (a tool call that ignores its context) have
// still not stopped. Close may be called more than once, concurrently.
func (s *Session) Close(ctx context.Context) error {
	return s.Shutdown(ctx, "close fake agent", s.proc.Stop)
}

// write sends one frame, one line, to the child's stdin.
func (s *Session) write(f frame) error {
	b, err := encode(f)
	if err != nil {
		return err
	}
	if _, err := s.proc.Stdin().Write(b); err != nil {
		return fmt.Errorf("write to fake agent: %w", err)
	}
	return nil
}

// lifecycle ends the session once the child is gone: it records why,
// cancels and waits for the tool calls, and closes Events.
func (s *Session) lifecycle() {
	s.reader.Wait()
	<-s.proc.Done()
	s.proc.Stdin().Close()
	s.Finish(s.exitReason, s.calls.Wait)
}

// exitReason says why the child ended on its own.
func (s *Session) exitReason() error {
	status := "exit status 0"
	if err := s.proc.ExitErr(); err != nil {
		status = err.Error()
	}
	msg := "fake agent exited: " + status
	if s.readErr != nil {
		msg = fmt.Sprintf("fake agent killed: %v (%s)", s.readErr, status)
	}
	if line := s.proc.LastStderrLine(); line != "" {
		msg += ": " + line
	}
	return errors.New(msg)
}

// readStdout decodes the child's protocol lines until end of output.
func (s *Session) readStdout(r io.ReadCloser) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		s.Bump()
		f, err := decode(sc.Bytes())
		if err != nil {
			s.log.Warn("fake agent wrote a bad line", "err", err)
			continue
		}
		s.handle(f)
	}
	if err := sc.Err(); err != nil {
		s.readErr = fmt.Errorf("read output: %w", err)
		s.log.Warn("fake agent: read output", "err", err)
		if err := s.proc.Signal(syscall.SIGKILL); err != nil { // it would block on a pipe nobody reads
			s.log.Warn("kill fake agent", "err", err)
		}
		io.Copy(io.Discard, r)
	}
}

// handle acts on one frame from the child.
func (s *Session) handle(f frame) {
	turn := troupe.TurnID(f.Turn)
	switch f.Type {
	case typeReady:
		s.readyOnce.Do(func() { close(s.ready) })
	case typeOutput, typeThinking:
		s.Mu.Lock()
		s.outBytes += len(f.Text)
		s.Mu.Unlock()
		kind := engine.EventOutput
		if f.Type == typeThinking {
			kind = engine.EventThinking
		}
		s.Emit(engine.Event{Kind: kind, Turn: turn, Text: f.Text})
	case typeToolUse:
		s.Emit(engine.Event{Kind: engine.EventToolCall, Turn: turn, Tool: &engine.ToolUse{ID: callID(f.ID), Name: f.Tool, Input: f.Args}})
	case typeToolDone:
		s.Emit(engine.Event{Kind: engine.EventToolResult, Turn: turn, Tool: toolResult(f.ID, f.Result, f.Error)})
	case typeToolCall, typePermission:
		s.Mu.Lock()
		running, ctx := s.TurnLocked()
		current := running == turn
		s.Mu.Unlock()
		if !current {
			// Unreachable with a well-behaved child; answer so it never hangs.
			s.log.Warn("fake agent asked for a turn that is not running", "turn", turn, "type", f.Type, "tool", f.Tool)
			if err := s.write(frame{Type: answerType(f.Type), Turn: f.Turn, ID: f.ID, Error: "turn " + f.Turn + " is not running",
				Reason: "turn " + f.Turn + " is not running"}); err != nil {
				s.log.Debug("write answer", "tool", f.Tool, "err", err)
			}
			return
		}
		if f.Type == typePermission {
			s.calls.Go(func() { s.permission(ctx, f) })
			return
		}
		s.Emit(engine.Event{Kind: engine.EventToolCall, Turn: turn, Tool: &engine.ToolUse{ID: callID(f.ID), Name: f.Tool, Input: f.Args}})
		s.calls.Go(func() { s.call(ctx, f) })
	case typeTurnEnd:
		s.Mu.Lock()
		running, _ := s.TurnLocked()
		current := running == turn
		in, out := s.inBytes, s.outBytes+len(f.Text)
		if current {
			s.EndTurnLocked()
		}
		s.Mu.Unlock()
		if !current {
			s.log.Warn("fake agent ended a turn that is not running", "turn", turn)
			return
		}
		s.Emit(engine.Event{Kind: engine.EventUsage, Turn: turn, Usage: usage(in, out)})
		s.Emit(engine.Event{Kind: engine.EventTurnEnd, Turn: turn, Text: f.Text, Error: f.Error})
	default:
		s.log.Warn("fake agent wrote an unexpected frame", "type", f.Type)
	}
}

// answerType is the frame type that answers a request of type t.
func answerType(t string) string {
	if t == typePermission {
		return typeDecision
	}
	return typeToolResult
}

// callID is the engine id of the child's tool call or permission request id.
func callID(id int64) string { return "fake-" + strconv.FormatInt(id, 10) }

func toolResult(id int64, result, errText string) *engine.ToolUse {
	t := &engine.ToolUse{ID: callID(id), Output: result}
	if errText != "" {
		t.Output, t.IsError = errText, true
	}
	return t
}

// usage is a plausible usage for a turn given in bytes of input and out
// bytes of output: about 4 bytes a token, a fixed prompt of 500 tokens, and
// a price of $3 per million input and $15 per million output tokens.
func usage(in, out int) *engine.Usage {
	u := &engine.Usage{InputTokens: int64(500 + in/4), OutputTokens: int64(1 + out/4)}
	u.CostUSD = float64(u.InputTokens)*3e-6 + float64(u.OutputTokens)*15e-6
	return u
}

// permission asks the session's Approver (none: denied), reports the
// request and its decision, and answers the child.
func (s *Session) permission(ctx context.Context, f frame) {
	p := engine.Permission{ID: callID(f.ID), Turn: troupe.TurnID(f.Turn), Tool: f.Tool, Input: f.Args}
	d := engine.Ask(ctx, s.approver, p)
	if ctx.Err() != nil {
		return // the turn ended or the session closed: nobody waits for it
	}
	s.Emit(engine.Event{Kind: engine.EventPermission, Turn: p.Turn, Permission: &p, Decision: &d})
	if err := s.write(frame{Type: typeDecision, Turn: f.Turn, ID: f.ID, Allow: d.Allow, Reason: d.Reason}); err != nil {
		s.log.Debug("write decision", "tool", f.Tool, "err", err)
	}
}

// call runs one tool call and writes its result back to the child.
func (s *Session) call(ctx context.Context, f frame) {
	res := frame{Type: typeToolResult, Turn: f.Turn, ID: f.ID}
	if s.tools == nil {
		res.Error = "no tools"
	} else {
		out, err := s.tools.Call(ctx, f.Tool, f.Args)
		res.Result = out
		if err != nil {
			res.Error = err.Error()
			if res.Error == "" {
				res.Error = "tool failed"
			}
		}
	}
	if ctx.Err() != nil {
		return // the turn ended or the session closed: nobody waits for it
	}
	s.Emit(engine.Event{Kind: engine.EventToolResult, Turn: troupe.TurnID(f.Turn), Tool: toolResult(f.ID, res.Result, res.Error)})
	if err := s.write(res); err != nil {
		s.log.Debug("write tool result", "tool", f.Tool, "err", err)
	}
}
