package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// ResetReason ends the turn a reset cuts, and its asks.
const ResetReason = "reset by the person"

// Reset gives k a new conversation: its stored conversation id is
// forgotten and its live session, if any, is closed now. A turn in flight
// ends failed with ResetReason, and so do its asks; its permission
// requests are denied. Mail still queued starts a new session.
func (r *Runtime) Reset(ctx context.Context, k troupe.RuntimeKey) error {
	if err := r.checkTarget(k, troupe.Person); err != nil {
		return err
	}
	if a := r.actor(k); a != nil {
		err := a.do(ctx, a.reset)
		if !errors.Is(err, errActorGone) {
			return err
		}
	}
	if err := r.o.Sessions.ClearSessionID(ctx, k); err != nil {
		return fmt.Errorf("reset %s: %w", k.Agent, err)
	}
	return nil
}

// reset runs in the actor's loop: the session is closed first, so no
// event of it can store its id again after the id is cleared.
func (a *actor) reset(ctx context.Context) error {
	t := a.currentTurn()
	a.closeSession()
	if t != nil {
		a.endTurn(ctx, "", ResetReason)
	}
	a.apply(evStop, ResetReason)
	if err := a.rt.o.Sessions.ClearSessionID(ctx, a.key); err != nil {
		return fmt.Errorf("reset %s: %w", a.key.Agent, err)
	}
	a.log.Info("conversation reset")
	return nil
}

// Interrupt asks the engine to stop k's turn in flight (Session.Interrupt);
// the turn then ends with the error "interrupted", and so do its asks. Its
// permission requests are denied at once. No turn in flight is
// troupe.ErrConflict.
func (r *Runtime) Interrupt(ctx context.Context, k troupe.RuntimeKey) error {
	if err := r.checkTarget(k, troupe.Person); err != nil {
		return err
	}
	a := r.actor(k)
	if a == nil {
		return noTurn(k)
	}
	err := a.do(ctx, a.interrupt)
	if errors.Is(err, errActorGone) {
		return noTurn(k)
	}
	return err
}

func noTurn(k troupe.RuntimeKey) error {
	return fmt.Errorf("%s has no turn in flight: %w", k.Agent, troupe.ErrConflict)
}

// interrupt runs in the actor's loop.
func (a *actor) interrupt(ctx context.Context) error {
	t, s := a.currentTurn(), a.session()
	if t == nil || s == nil {
		return noTurn(a.key)
	}
	// The engine first (it ends the turn, and may stop waiting in Approve
	// itself), then the requests it left waiting.
	err := s.Interrupt(ctx)
	a.rt.dropPermissions(func(pp *pendingPerm) bool { return pp.perm.Key() == a.key }, "the person interrupted the turn")
	if err != nil {
		return fmt.Errorf("interrupt %s: %w", a.key.Agent, err)
	}
	a.log.Info("turn interrupted", "turn", t.id)
	return nil
}

// RestartReason ends the turn a restart cuts, and its asks.
const RestartReason = "restarted by the person"

// Restart closes k's live session, if any, and keeps its conversation: the
// next session resumes it (StartSpec.Resume). A turn in flight ends failed
// with RestartReason, and so do its asks; its permission requests are
// denied. The agent is then stopped (a failed agent too); its next message,
// or mail still queued, starts the new session. For an agent stuck or
// failed whose conversation is worth keeping (Reset forgets it), or
// limited whose limit the person knows is over: its mail runs now.
func (r *Runtime) Restart(ctx context.Context, k troupe.RuntimeKey) error {
	if err := r.checkTarget(k, troupe.Person); err != nil {
		return err
	}
	a := r.actor(k)
	if a == nil {
		return nil // no session: the next message starts one anyway
	}
	if err := a.do(ctx, a.restartSession); !errors.Is(err, errActorGone) {
		return err
	}
	return nil
}

// restartSession runs in the actor's loop. A limited agent's wait ends:
// its mail runs now (limit.go).
func (a *actor) restartSession(ctx context.Context) error {
	t := a.currentTurn()
	a.closeSession()
	if t != nil {
		a.endTurn(ctx, "", RestartReason)
	}
	if until, _ := a.limited(); !until.IsZero() {
		a.clearLimit()
		a.log.Info("the person ended the usage limit's wait", "until", until)
	}
	a.apply(evStop, RestartReason)
	a.log.Info("session restarted by the person")
	return nil
}

// busyTurn is the error of WhileIdle for an agent in a turn: it says to
// wait, or to interrupt the turn.
func busyTurn(k troupe.RuntimeKey, t troupe.TurnID) error {
	return fmt.Errorf("%s is in a turn (%s): wait for it to end, or stop it with troupe interrupt %s: %w", k.Agent, t, k.Agent, troupe.ErrConflict)
}

// WhileIdle runs fn in agent k's actor loop, which alone starts its
// turns, when no turn is in flight: no turn starts while fn runs (a
// rewind of its files). A turn in flight is troupe.ErrConflict, fn not
// run. An agent of the team without an actor gets one (not poked: fn
// runs first, then its mail, if any, as usual). An agent no longer in
// the team, with no actor left, has no turn to start: fn runs here.
func (r *Runtime) WhileIdle(ctx context.Context, k troupe.RuntimeKey, fn func(ctx context.Context) error) error {
	// An actor that ends between its lookup and the command (stopped,
	// removed) is looked up again: a few times at most.
	for range 3 {
		a, err := r.holdActor(k)
		if err != nil {
			return err
		}
		if a == nil {
			return fn(context.WithoutCancel(ctx))
		}
		err = a.do(ctx, func(ctx context.Context) error {
			if t := a.currentTurn(); t != nil {
				return busyTurn(k, t.id)
			}
			return fn(ctx)
		})
		if !errors.Is(err, errActorGone) {
			return err
		}
	}
	return fmt.Errorf("reach %s: its actor keeps stopping; try again: %w", k.Agent, troupe.ErrConflict)
}

// holdActor is k's actor, made (and its loop started, not poked) when k
// is in the team and has none; nil when k has none and is not in the
// team.
func (r *Runtime) holdActor(k troupe.RuntimeKey) (*actor, error) {
	_, _, inTeam := r.o.Teams.Agent(k)
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.actors[k]; ok {
		return a, nil
	}
	if !inTeam {
		return nil, nil
	}
	if r.stopped || r.ctx == nil {
		return nil, fmt.Errorf("reach %s: the daemon is stopping: %w", k.Agent, troupe.ErrConflict)
	}
	return r.newLoop(k), nil
}
