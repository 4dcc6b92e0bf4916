package runtime

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// actor owns one agent: its session, its turns and its inbox delivery. Its
// loop is the only goroutine that starts turns or changes the session, so at
// most one turn is in flight (C5's wake budget).
type actor struct {
	rt     *Runtime
	key    troupe.RuntimeKey
	log    *slog.Logger
	pokeC  chan struct{} // wake-ups, coalesced (capacity 1)
	ctlC   chan ctl      // the person's commands (reset, interrupt), run by the loop
	quit   chan struct{} // closed by stop
	exited chan struct{} // closed when the loop has returned
	once   sync.Once
	idle   *time.Timer // the turn inactivity watchdog; used by the loop only
	jl     turnLog     // the journal of its turns; used by the loop only
	// retry tries again to start a session whose project folder was gone,
	// after retryIn (doubling from firstRetry to maxRetry); armed tells
	// whether it is pending. Used by the loop only.
	retry   *time.Timer
	retryIn time.Duration
	armed   bool
	// idleStop stops a session left without a turn for the agent's
	// idle_timeout; idleSince is when it became idle (zero while a turn is
	// in flight or there is no session). Used by the loop only.
	idleStop  *time.Timer
	idleSince time.Time
	// limitT ends a usage limit (limit.go); limitN counts the limits in a
	// row (a turn that ends otherwise resets it). Used by the loop only.
	limitT *time.Timer
	limitN int

	// mu guards the fields below; the loop writes them, others read
	// (but life's permission waits and toolCalls, which the goroutines of
	// the requests and calls count).
	mu         sync.Mutex
	life       lifecycle // its state and the facts it follows from: moved by apply only (lifecycle.go)
	quitReason string
	sess       engine.Session
	appr       *approver // the session's permission flow
	token      string    // the session's MCP token; "" when none
	unclaim    func()    // ends the session's claim on the conversation it resumed; nil when none
	turn       *turn
	actAt      time.Time         // last activity seen by the actor itself (turn starts, tool results)
	toolCalls  int               // troupe tool calls of this agent in flight
	flights    map[string]flight // the engine's own tool calls in flight, by the engine's call id (flight.go)
	cold       bool              // its session has not reported a turn's event yet
	coldUntil  time.Time         // while a cold session's first turn waits for its first event, at most StartTimeout
	restart    bool              // the definition changed: new session at the next boundary
	engine     troupe.Engine     // the session's engine, recorded with its conversation id
	slot       bool              // it holds one of the runtime's session slots (slots.go)

	limitUntil time.Time     // while limited: when its mail may run again (limit.go)
	limitC     chan struct{} // closed, and replaced, each time it becomes limited

	spec troupe.AgentSpec // the definition the session started with
	cg   cgroup.Group     // the session's sandbox's cgroup (its caps); zero: none
	ooms uint64           // the cgroup's OOM kills already told of
}

func newActor(r *Runtime, k troupe.RuntimeKey) *actor {
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	idleStop := time.NewTimer(time.Hour)
	idleStop.Stop()
	limitT := time.NewTimer(time.Hour)
	limitT.Stop()
	return &actor{rt: r, key: k, log: r.log.With("project", k.Project, "agent", k.Agent),
		pokeC: make(chan struct{}, 1), ctlC: make(chan ctl), quit: make(chan struct{}), exited: make(chan struct{}),
		life: lifecycle{state: troupe.StateStopped}, idle: idle, retry: retry, idleStop: idleStop,
		limitT: limitT, limitC: make(chan struct{}), jl: turnLog{w: r.jw, key: k}}
}

func (a *actor) poke() {
	select {
	case a.pokeC <- struct{}{}:
	default:
	}
}

func (a *actor) stop(reason string) {
	a.once.Do(func() {
		a.mu.Lock()
		a.quitReason = reason
		a.mu.Unlock()
		close(a.quit)
	})
}

func (a *actor) restartAtBoundary() {
	a.mu.Lock()
	a.restart = true
	a.mu.Unlock()
	a.poke()
}

func (a *actor) status() (troupe.AgentState, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.life.state, a.life.reason
}

// activity is the agent's activity: its session's output, its turn starts,
// and its troupe tool calls. A tool call in flight (an ask of a teammate
// that is working, a task start) counts as activity now: the agent waits,
// it is not silent; the wait has its own watchdog. So does a permission
// request waiting on the person: the agent is blocked on the person, not
// silent, and the person sees it waiting (state waiting, `troupe
// permissions`). Neither the turn watchdog nor an ask's inactivity window
// cuts it for that; an ask's ceiling (4 h by default) still does, and an
// asking agent whose tool call limit comes first gets a request id and
// carries on (C4).
func (a *actor) activity() engine.Activity {
	a.mu.Lock()
	act := engine.Activity{At: a.actAt}
	now := time.Now()
	if a.toolCalls > 0 || a.life.occupied() || now.Before(a.coldUntil) {
		act.At = now
	} else if f := a.flightActivity(now); f.After(act.At) {
		act.At = f
	}
	s := a.sess
	a.mu.Unlock()
	if s != nil {
		sa := s.Activity()
		act.Count = sa.Count
		if sa.At.After(act.At) {
			act.At = sa.At
		}
	}
	return act
}

func (a *actor) currentTurn() *turn {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.turn
}

// apply moves the agent's lifecycle by one event (lifecycle.next) and
// publishes its state when that changed. An event the table refuses is a
// bug: logged, and the state stays as it was.
func (a *actor) apply(kind lifeKind, reason string) {
	a.mu.Lock()
	old := a.life
	n, err := old.next(lifeEvent{kind: kind, reason: reason}, a.turn != nil)
	a.life = n
	a.mu.Unlock()
	if err != nil {
		a.log.Error("agent state: a bug", "err", err)
		return
	}
	if n.state != old.state || n.reason != old.reason {
		a.rt.publish(a.key, events.AgentState{State: n.state, Reason: n.reason})
	}
}

func (a *actor) session() engine.Session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sess
}

// waitOnPerson marks a permission request of the agent that waits on the
// person (reason: "asks to use Bash"); the returned func ends the wait.
// The agent is waiting while one does, then busy again (idle if its turn
// ended meanwhile): evPermWait, evPermDone.
func (a *actor) waitOnPerson(reason string) (done func()) {
	a.apply(evPermWait, reason)
	return func() {
		a.mu.Lock()
		a.actAt = time.Now() // the person's answer is news: the window counts from here
		a.mu.Unlock()
		a.apply(evPermDone, "")
	}
}

// ctl is a command for the actor's loop: fn runs there, its error is sent
// on done (capacity 1).
type ctl struct {
	fn   func(ctx context.Context) error
	done chan error
}

// errActorGone: the actor's loop returned before it took a command.
var errActorGone = errors.New("actor gone")

// do runs fn in the actor's loop, which owns the session, and returns its
// error; errActorGone when the loop has ended.
func (a *actor) do(ctx context.Context, fn func(ctx context.Context) error) error {
	c := ctl{fn: fn, done: make(chan error, 1)}
	select {
	case a.ctlC <- c:
	case <-a.exited:
		return errActorGone
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run is the actor's loop. When ctx ends (the daemon stops) a turn in
// flight is left in the store as in_turn, so the next daemon redelivers it.
func (a *actor) run(ctx context.Context) {
	defer close(a.exited)
	defer a.rt.slots.forget(a)
	defer a.closeSession()
	for {
		var evs <-chan engine.Event
		if s := a.session(); s != nil {
			evs = s.Events()
		}
		select {
		case <-ctx.Done():
			return
		case <-a.quit:
			a.mu.Lock()
			reason := a.quitReason
			a.mu.Unlock()
			if a.currentTurn() != nil {
				a.endTurn(ctx, "", "agent stopped: "+reason)
			}
			a.apply(evStop, reason)
			return
		case <-a.pokeC:
		case c := <-a.ctlC:
			c.done <- c.fn(ctx)
		case <-a.idle.C:
			a.checkIdle(ctx)
		case <-a.retry.C:
			a.armed = false // next tries again
		case <-a.idleStop.C:
			a.stopIfIdle()
		case <-a.limitT.C:
			a.limitEnded()
		case ev, ok := <-evs:
			if !ok {
				a.sessionEnded(ctx)
			} else {
				a.handle(ctx, ev)
			}
		}
		a.yieldIfIdle()
		a.next(ctx)
		a.watchIdle()
	}
}
