package runtime

// An agent's turns: the next one made from its inbox (C5, C14), given to its
// session, watched for silence (its turn_timeout) and ended with the
// outcome of its requests. Everything here runs in the actor's loop.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// turn is a turn in flight.
type turn struct {
	id     troupe.TurnID
	msgs   []troupe.Message
	window time.Duration      // the agent's turn_timeout: silence longer than this cuts the turn
	asks   []troupe.RequestID // asks it made through troupe's ask tool, guarded by the actor's mu (noteAsk)
	// replies are the answers given with reply to verified delegations,
	// kept for their check at the turn's end; guarded by the actor's mu.
	replies map[troupe.RequestID]string
	work    string // the workspace it ran in, "" for a turn that never reached a session
	base    string // the snapshot of work at its start (Checkpoints.Base), "" when none
	noBase  string // why there is no base ("" when there is, or when there are no checkpoints)
}

// next starts a turn when none is in flight and the inbox has mail.
func (a *actor) next(ctx context.Context) {
	if ctx.Err() != nil || a.currentTurn() != nil {
		return
	}
	if until, _ := a.limited(); !until.IsZero() {
		return // its mail waits for the limit's reset (limit.go)
	}
	if a.rt.held(a.key) {
		return // troupe checks its work (verify.go); the check's end wakes it
	}
	a.mu.Lock()
	restart := a.restart && a.sess != nil
	a.restart = false
	a.mu.Unlock()
	if restart {
		a.applyDefinition()
	}
	spec, dir, ok := a.rt.o.Teams.Agent(a.key)
	b := a.rt.budget(spec)
	// At most one turn's worth is read: the queue may be long (C14).
	pending, err := a.rt.o.Store.Pending(ctx, a.key, b.messages)
	if err != nil {
		a.log.Error("read inbox", "err", err)
		return
	}
	if len(pending) == 0 {
		a.stopWaiting()
		return
	}
	if !ok { // removed from its team, or its project is gone: the actor ends too
		if _, err := a.rt.o.Store.Expire(ctx, a.key, "no such agent in the project's team"); err != nil {
			a.log.Error("expire inbox", "err", err)
		}
		a.stop("no such agent in the project's team")
		return
	}
	// The turn's tag is drawn now, after its messages were written: none
	// of them can hold it (engine.NewTag).
	tag := engine.NewTag(pending)
	batch := a.fit(pickBatch(pending, b), b, tag)
	s := a.session()
	if s == nil {
		if a.folderGone(dir) {
			return // the mail stays queued
		}
		s, err = a.start(ctx, spec, dir)
		if errors.Is(err, errNoSlot) {
			return // the mail stays queued; a freed slot pokes the loop
		}
		if u, ok := errors.AsType[*engine.Unreachable](err); ok {
			a.unreachable(u)
			return // the mail stays queued
		}
		if err != nil {
			reason := err.Error()
			a.failBatch(ctx, batch, reason)
			a.apply(evStartFailed, reason)
			a.poke() // the rest of the inbox gets its own answer
			return
		}
	}
	id := troupe.TurnID(newID("t"))
	ids := make([]int64, len(batch))
	for i, m := range batch {
		ids[i] = m.ID
	}
	if err := a.rt.o.Store.StartTurn(ctx, a.key, ids, id); err != nil {
		a.log.Error("start turn", "err", err)
		if st, _ := a.status(); st == troupe.StateStarting {
			a.apply(evStarted, "") // the session it just started is up, with no turn
		}
		return
	}
	window := spec.TurnTimeout
	if window <= 0 {
		window = troupe.DefaultTurnTimeout
	}
	t := &turn{id: id, msgs: batch, window: window}
	a.checkpointBase(ctx, t)
	a.mu.Lock()
	a.turn = t
	a.actAt = time.Now()
	if a.cold {
		// A CLI's first turn carries the rest of its start (tools
		// loaded, its servers reached) before its first word: that is
		// not the model's silence. Bounded like a start.
		a.coldUntil = a.actAt.Add(StartTimeout)
	}
	a.mu.Unlock()
	a.idle.Reset(window)
	a.apply(evTurnStarted, "")
	a.rt.publish(a.key, events.TurnStarted{Turn: id, Messages: ids})
	a.jl.start(id, batch)
	if err := s.Send(ctx, engine.Input{Turn: id, Messages: batch, Tag: tag}); err != nil {
		a.endTurn(ctx, "", "give the turn to the agent: "+err.Error())
		a.apply(evTurnEnded, "")
		a.poke()
	}
}

// failBatch ends messages that could not be given to a turn.
func (a *actor) failBatch(ctx context.Context, batch []troupe.Message, reason string) {
	id := troupe.TurnID(newID("t"))
	ids := make([]int64, len(batch))
	for i, m := range batch {
		ids[i] = m.ID
	}
	if err := a.rt.o.Store.StartTurn(ctx, a.key, ids, id); err != nil {
		a.log.Error("fail batch", "err", err)
		return
	}
	a.mu.Lock()
	a.turn = &turn{id: id, msgs: batch}
	a.mu.Unlock()
	a.jl.start(id, batch)
	a.endTurn(ctx, "", reason)
}

// toolCall marks a troupe tool call of this agent in flight; the returned
// func ends it, which counts as activity.
func (a *actor) toolCall() (end func()) {
	a.mu.Lock()
	a.toolCalls++
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		a.toolCalls--
		a.actAt = time.Now()
		a.mu.Unlock()
	}
}

// checkIdle runs when the turn watchdog fires: a turn whose session made no
// output for a whole turn_timeout is cut (engines can hang or retry forever
// when their model is unreachable): its session is closed, its messages
// fail with the reason, and the next message starts a new session.
// Activity since the timer was armed re-arms it for the rest of the window.
func (a *actor) checkIdle(ctx context.Context) {
	t := a.currentTurn()
	if t == nil {
		return
	}
	if quiet := time.Since(a.activity().At); quiet < t.window {
		a.idle.Reset(t.window - quiet)
		return
	}
	last := a.rt.lastActivity(a.key, time.Time{})
	reason := fmt.Sprintf("no output for %v (the agent's turn_timeout): troupe cut the turn and stopped the session", t.window)
	a.mu.Lock()
	cold := a.cold
	a.mu.Unlock()
	if cold {
		reason = fmt.Sprintf("no output for %v since the first turn of its new session began (the bound of a session's start): troupe cut the turn and stopped the session", StartTimeout)
	}
	a.log.Warn("turn cut", "turn", t.id, "reason", reason)
	a.closeSession()
	// Its asks end as the ask watchdog would end them (C4): no reply.
	a.finishTurn(ctx, "", reason, troupe.ReqNoReply, fmt.Sprintf(
		"no reply from %s: no activity for its whole inactivity window of %v (its turn_timeout); last activity %s; troupe cut the turn",
		a.key.Agent, t.window, last))
	a.apply(evTurnCut, reason)
}

// endTurn records the end of the turn in flight and the outcome of the
// requests it handled: the final text answers its asks and delegations
// (unless the agent already answered with reply).
func (a *actor) endTurn(ctx context.Context, text, errText string) {
	a.finishTurn(ctx, text, errText, troupe.ReqFailed, fmt.Sprintf("%s could not answer: %s", a.key.Agent, errText))
}

// maxTurnAsks bounds the asks a turn remembers (detachAsks); past it an
// ask is not remembered, and the cut is logged.
const maxTurnAsks = 1024

// noteAsk remembers that the turn in flight asked request id through
// troupe's ask tool (detachAsks).
func (a *actor) noteAsk(id troupe.RequestID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.turn == nil:
	case len(a.turn.asks) >= maxTurnAsks:
		a.log.Warn("ask not remembered by its turn: too many", "request", id)
	default:
		a.turn.asks = append(a.turn.asks, id)
	}
}

// detachAsks detaches the asks of turn t still waited on when it ends: a
// turn ends after its tool calls return, so such a wait is one the
// engine's client gave up on (its own tool-call limit was shorter than
// troupe was told, or the turn was interrupted) and nobody will read its
// answer. Detached, the answer comes to the agent's inbox as a reply
// instead of going to a call nobody reads (C4).
func (a *actor) detachAsks(ctx context.Context, t *turn) {
	for _, id := range t.asks {
		if !a.rt.waits.waiting(a.key.Project, id) {
			continue
		}
		if _, err := a.rt.o.Store.Detach(ctx, id); err != nil {
			a.log.Error("detach an abandoned ask", "request", id, "err", err)
			continue
		}
		a.log.Warn("an ask outlived its asker's turn: detached, its answer will come to the asker's inbox", "request", id)
	}
}

// takeTurn takes the turn in flight from the actor: its watchdog, its
// engine's calls in flight and its permission requests end with it.
func (a *actor) takeTurn() *turn {
	a.mu.Lock()
	t := a.turn
	a.turn, a.coldUntil = nil, time.Time{}
	a.clearFlights()
	a.mu.Unlock()
	a.idle.Stop()
	a.rt.dropPermissions(func(pp *pendingPerm) bool { return pp.perm.Key() == a.key && pp.perm.Turn == t.id },
		"the turn ended before the person decided")
	return t
}

// finishTurn is endTurn with the outcome a failed turn gives its requests.
func (a *actor) finishTurn(ctx context.Context, text, errText string, failState troupe.RequestState, failMsg string) {
	ctx = context.WithoutCancel(ctx)
	t := a.takeTurn()
	a.detachAsks(ctx, t)
	a.checkpointEnd(ctx, t)
	a.jl.end(t.id, text, errText)
	state := troupe.MsgDelivered
	if errText != "" {
		state = troupe.MsgFailed
	}
	a.mu.Lock()
	replies := t.replies // a reply tool call may still end (its client gave up on it)
	t.replies = nil
	a.mu.Unlock()
	var results []inbox.RequestResult
	for _, m := range t.msgs {
		if m.Request == "" || (m.Kind != troupe.KindAsk && m.Kind != troupe.KindDelegate) {
			continue
		}
		if errText == "" {
			answer := text
			if r, ok := replies[m.Request]; ok {
				answer = r
			}
			// A verified delegation's answer waits for troupe's check
			// (Check; verify.go).
			results = append(results, inbox.RequestResult{ID: m.Request, State: troupe.ReqAnswered,
				Answer: a.rt.capAnswer(a.key.Project, m.Request, answer), Check: true})
		} else {
			results = append(results, inbox.RequestResult{ID: m.Request, State: failState, Error: failMsg})
		}
	}
	finished, err := a.rt.o.Store.EndTurn(ctx, a.key, t.id, state, errText, results)
	if err != nil {
		a.log.Error("end turn", "turn", t.id, "err", err)
	}
	for _, f := range finished {
		if f.Request.Checking {
			a.rt.startVerify(f.Request, t.id)
			continue
		}
		a.rt.finished(f)
	}
	a.rt.publish(a.key, events.TurnEnded{Turn: t.id, Error: errText})
}
