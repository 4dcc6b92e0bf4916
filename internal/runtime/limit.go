package runtime

// Usage limits (an engine's account hit its plan's limit, or HTTP 429):
// a state, not a failure. The turn that hit one gives its messages back to
// the inbox, the session closes, and the agent stays limited until the
// reset; then its mail starts a session that resumes the conversation
// and runs them again. An ask to a limited agent returns at once,
// detached, saying until when (its answer comes later as a reply).

import (
	"context"
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Bounds of a limit's wait: an engine's reset time is clamped to
// [minLimitWait, engine.MaxLimitWait] from now (a model's output can
// claim any date; the engines clamp it too); without one, the wait starts at firstLimitBackoff and doubles
// with each limit in a row, up to maxLimitBackoff. A limit that comes back
// right after its reset (the reset time was wrong) waits at least that
// backoff too.
const (
	minLimitWait      = time.Second
	firstLimitBackoff = time.Minute
	maxLimitBackoff   = 30 * time.Minute
)

// limitBackoff is the wait after n limits in a row (n ≥ 1).
func limitBackoff(n int) time.Duration {
	d := firstLimitBackoff
	for i := 1; i < n && d < maxLimitBackoff; i++ {
		d *= 2
	}
	return min(d, maxLimitBackoff)
}

// limitWait is how long the agent waits after its n-th limit in a row,
// whose engine said it resets at until (zero: it did not say), and why.
func limitWait(now, until time.Time, n int) (time.Duration, string) {
	if until.IsZero() {
		return limitBackoff(n), fmt.Sprintf("its engine gave no reset time: troupe retries after %v, doubling up to %v", limitBackoff(n), maxLimitBackoff)
	}
	d := min(max(until.Sub(now), minLimitWait), engine.MaxLimitWait)
	why := "its engine's reset time"
	if until.Sub(now) > engine.MaxLimitWait {
		why = fmt.Sprintf("its engine's reset time was over %v away: troupe retries after %v", engine.MaxLimitWait, engine.MaxLimitWait)
	}
	if n > 1 && d < limitBackoff(n-1) {
		d = limitBackoff(n - 1)
		why = fmt.Sprintf("limit %d in a row: troupe waits %v past the reset time its engine gave", n, d)
	}
	return d, why
}

// limitTurn ends the turn in flight on its engine's usage limit ev.Limit:
// its messages go back to the inbox (their requests stay pending), the
// session closes (the next one resumes the conversation), and the agent
// is limited until the reset; asks waiting on the turn return at once.
func (a *actor) limitTurn(ctx context.Context, ev engine.Event) {
	if u := ev.Limit.Unreachable; u != nil {
		a.finishTurnQueued(ctx, u.Error())
		a.closeSession()
		a.unreachable(u)
		return
	}
	now := time.Now()
	a.limitN++
	wait, why := limitWait(now, ev.Limit.Until, a.limitN)
	until := now.Add(wait)
	reason := fmt.Sprintf("limited until %s (%s): %s", until.UTC().Format("2006-01-02 15:04:05 UTC"), why, ev.Error)
	a.log.Warn("usage limit", "until", until, "in_a_row", a.limitN, "engine_said", ev.Error)
	a.finishTurnQueued(ctx, reason)
	a.mu.Lock()
	a.limitUntil = until
	close(a.limitC) // asks waiting on it return now
	a.limitC = make(chan struct{})
	a.mu.Unlock()
	a.apply(evLimited, reason)
	a.closeSession()
	a.limitT.Reset(wait)
}

// UnreachableRetry is how often troupe tries again to start an agent
// whose runner could not be reached while its mail waits.
const UnreachableRetry = 5 * time.Second

// unreachable marks the agent's runner unreachable (u): its mail waits,
// asks to it return at once, and its next start is tried after
// UnreachableRetry (the timer of limits).
func (a *actor) unreachable(u *engine.Unreachable) {
	a.log.Warn("runner unreachable", "runner", u.Runner, "since", u.Since)
	a.mu.Lock()
	a.limitUntil = time.Now().Add(UnreachableRetry)
	close(a.limitC)
	a.limitC = make(chan struct{})
	a.mu.Unlock()
	a.apply(evUnreachable, u.Error())
	a.limitT.Reset(UnreachableRetry)
}

// limitEnded runs when the limit's timer fires: the agent's mail may run
// again (the loop's next starts a session for it). The end is activity,
// recorded with it: the asks' watchdogs, which counted the limit as
// activity, count their window from here.
func (a *actor) limitEnded() {
	a.clearLimit()
	a.apply(evLimitEnded, "")
}

// clearLimit ends the limit's wait: by its timer, or by the person's
// restart (which retries now). Used by the loop only.
func (a *actor) clearLimit() {
	a.limitT.Stop()
	a.mu.Lock()
	a.limitUntil = time.Time{}
	a.actAt = time.Now()
	a.mu.Unlock()
}

// limited reports until when the agent is limited (zero when it is not),
// and a channel closed the next time it becomes limited.
func (a *actor) limited() (until time.Time, next <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limitUntil, a.limitC
}

// finishTurnQueued ends the turn in flight with its messages back in the
// inbox, with reason, and its requests left pending.
func (a *actor) finishTurnQueued(ctx context.Context, reason string) {
	ctx = context.WithoutCancel(ctx)
	t := a.takeTurn()
	a.detachAsks(ctx, t)
	a.checkpointEnd(ctx, t)
	a.jl.end(t.id, "", reason)
	if _, err := a.rt.o.Store.EndTurn(ctx, a.key, t.id, troupe.MsgQueued, reason, nil); err != nil {
		a.log.Error("end turn", "turn", t.id, "err", err)
	}
	a.rt.publish(a.key, events.TurnEnded{Turn: t.id, Error: reason})
}

// limitedTarget is until when the actor of k is limited, and a channel
// closed the next time it becomes limited; zero and nil without an
// actor.
func (r *Runtime) limitedTarget(k troupe.RuntimeKey) (time.Time, <-chan struct{}) {
	if a := r.actor(k); a != nil {
		return a.limited()
	}
	return time.Time{}, nil
}
