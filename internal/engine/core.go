package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// SessionCore is the lifecycle every engine session shares, whatever its
// protocol: the Events channel and emit, the activity meter, why the
// session ended, the turn gate (one turn at a time, each with a context
// cancelled when it ends), Close once, and the end that closes Events. An
// engine's Session embeds a *SessionCore and keeps only its protocol.
//
// Mu guards the core's state; an engine may guard its own turn state with
// it too, so that state changes with the turn in one step. Methods named
// …Locked need Mu held; the others take it.
type SessionCore struct {
	Mu sync.Mutex

	events chan Event
	stop   chan struct{} // closed by Shutdown: pending emits give up
	done   chan struct{} // closed by Finish, after Events

	// ctx is the session's lifetime: Shutdown and Finish cancel it; every
	// turn's context derives from it.
	ctx    context.Context
	cancel context.CancelFunc

	closeOnce sync.Once
	act       ActivityMeter

	// Guarded by Mu.
	turn       troupe.TurnID // the running turn, "" when idle
	turnCtx    context.Context
	turnCancel context.CancelFunc
	closing    bool  // Shutdown was called
	ended      bool  // the session ended (Finish)
	err        error // why the session ended on its own; nil after Close
}

// NewSessionCore makes a running core whose Events channel holds buffer
// events.
func NewSessionCore(buffer int) *SessionCore {
	c := &SessionCore{
		events: make(chan Event, buffer),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// Events is Session.Events: closed by Finish.
func (c *SessionCore) Events() <-chan Event { return c.events }

// Activity is Session.Activity.
func (c *SessionCore) Activity() Activity { return c.act.Load() }

// Bump advances the activity token: call it on every output of any kind.
func (c *SessionCore) Bump() { c.act.Bump() }

// Err is Session.Err: why the session ended on its own.
func (c *SessionCore) Err() error {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return c.err
}

// SetErrLocked records why the session ends (the first cause Finish keeps).
func (c *SessionCore) SetErrLocked(err error) { c.err = err }

// SetErr is SetErrLocked taking Mu.
func (c *SessionCore) SetErr(err error) {
	c.Mu.Lock()
	c.err = err
	c.Mu.Unlock()
}

// ClosingLocked says whether Close was called.
func (c *SessionCore) ClosingLocked() bool { return c.closing }

// Context is the session's lifetime, cancelled by Close and by its end.
func (c *SessionCore) Context() context.Context { return c.ctx }

// Done is closed once the session ended and Events is closed.
func (c *SessionCore) Done() <-chan struct{} { return c.done }

// Emit hands an event to the consumer, waiting for room unless closing.
func (c *SessionCore) Emit(ev Event) {
	select {
	case c.events <- ev:
	case <-c.stop:
	}
}

// BeginTurn is the gate of Send: it checks in and ctx, refuses when the
// session is closed, ended or busy, and else marks in.Turn running and
// returns its context. setup, if not nil, runs with Mu held once the
// checks passed (the engine's own turn state); its error refuses the turn.
func (c *SessionCore) BeginTurn(ctx context.Context, in Input, setup func() error) (context.Context, error) {
	if err := in.Check(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("send turn %s: %w", in.Turn, err)
	}
	c.Mu.Lock()
	defer c.Mu.Unlock()
	switch {
	case c.closing:
		return nil, fmt.Errorf("send turn %s: session closed", in.Turn)
	case c.ended:
		return nil, fmt.Errorf("send turn %s: session ended: %w", in.Turn, c.err)
	case c.turn != "":
		return nil, fmt.Errorf("send turn %s: turn %s still running", in.Turn, c.turn)
	}
	if setup != nil {
		if err := setup(); err != nil {
			return nil, fmt.Errorf("send turn %s: %w", in.Turn, err)
		}
	}
	c.turn = in.Turn
	c.turnCtx, c.turnCancel = context.WithCancel(c.ctx)
	return c.turnCtx, nil
}

// CurrentTurn is the running turn, "" when idle.
func (c *SessionCore) CurrentTurn() troupe.TurnID {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return c.turn
}

// TurnLocked is the running turn ("" when idle) and its context (the
// session's when idle).
func (c *SessionCore) TurnLocked() (troupe.TurnID, context.Context) {
	if c.turnCtx == nil {
		return c.turn, c.ctx
	}
	return c.turn, c.turnCtx
}

// EndTurnLocked marks the session idle and cancels the turn's context.
func (c *SessionCore) EndTurnLocked() {
	c.turn = ""
	if c.turnCancel != nil {
		c.turnCancel()
		c.turnCancel, c.turnCtx = nil, nil
	}
}

// CancelTurnLocked cancels the running turn's context; the turn goes on
// until EndTurnLocked.
func (c *SessionCore) CancelTurnLocked() {
	if c.turnCancel != nil {
		c.turnCancel()
	}
}

// Shutdown is the body of Session.Close: the first call marks the session
// closing, makes pending emits give up, cancels its context and runs stop
// (the child's escalation); every call then waits for Finish or ctx, whose
// error it returns as "<what>: cause".
func (c *SessionCore) Shutdown(ctx context.Context, what string, stop func(context.Context)) error {
	c.closeOnce.Do(func() {
		c.Mu.Lock()
		c.closing = true
		c.Mu.Unlock()
		close(c.stop)
		c.cancel()
		stop(ctx)
	})
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", what, context.Cause(ctx))
	}
}

// Finish ends the session once its child is gone: with Mu held it marks
// the session ended, records reason() unless Close was called or a cause
// is already set, and ends the running turn (no turn end is invented:
// Events just closes). It then cancels the session's context, runs wait
// (the engine's goroutines, its clean-up), and closes Events and Done.
func (c *SessionCore) Finish(reason func() error, wait func()) {
	c.Mu.Lock()
	c.ended = true
	if !c.closing && c.err == nil {
		c.err = reason()
	}
	if c.turn != "" {
		c.EndTurnLocked()
	}
	c.Mu.Unlock()
	c.cancel()
	if wait != nil {
		wait()
	}
	close(c.events)
	close(c.done)
}

// EndedLocked says whether the session ended.
func (c *SessionCore) EndedLocked() bool { return c.ended }
