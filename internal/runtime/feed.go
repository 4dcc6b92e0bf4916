package runtime

// What an agent's session reports, turned into the feed's events, the
// journal's entries and the lifecycle's. Runs in the actor's loop.

import (
	"context"
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// handle acts on one event of the session: the turn's end ends the turn;
// the engine's session id is kept for the next start (StartSpec.Resume);
// everything else is published for the person to watch, clipped
// (events.MaxText).
func (a *actor) handle(ctx context.Context, ev engine.Event) {
	a.jl.event(ev)
	a.mu.Lock()
	if ev.Kind != engine.EventSession {
		a.cold, a.coldUntil = false, time.Time{}
	}
	// Every event of the engine is activity, recorded under the lock that
	// ends the cold window it may close: a watchdog reading the actor
	// between the two would see neither (and cut a cold turn that had
	// just answered).
	a.actAt = time.Now()
	a.mu.Unlock()
	switch {
	case ev.Kind == engine.EventToolCall && ev.Tool != nil:
		a.toolStarted(ev.Tool, time.Now())
	case ev.Kind == engine.EventToolResult && ev.Tool != nil:
		a.toolEnded(ev.Tool.ID, time.Now())
	}
	switch ev.Kind {
	case engine.EventOutput, engine.EventThinking, engine.EventNotice, engine.EventToolCall, engine.EventToolResult, engine.EventUsage:
		if e, ok := activity(ev, time.Now(), feedClip); ok {
			a.rt.publish(a.key, events.AgentActivity{Turn: ev.Turn, Event: e})
		}
	case engine.EventSession:
		if ev.SessionID != "" {
			a.mu.Lock()
			eng := a.engine
			a.mu.Unlock()
			if err := a.rt.o.Sessions.SetSessionID(ctx, a.key, eng, ev.SessionID); err != nil {
				a.log.Error("store session id", "session", ev.SessionID, "err", err)
			}
			e, _ := activity(ev, time.Now(), feedClip)
			a.rt.publish(a.key, events.AgentActivity{Turn: ev.Turn, Event: e})
		}
	case engine.EventPermission:
		// A request that went through the session's Approver is on the
		// feed already (pending, then decided); the engine's echo of it is
		// not published again.
		if p, d := ev.Permission, ev.Decision; p != nil && d != nil && !a.echoed(p.ID) {
			in, cut := events.Clip(string(p.Input))
			st := troupe.PermDenied
			if d.Allow {
				st = troupe.PermAllowed
			}
			a.rt.publish(a.key, events.AgentPermission{Turn: ev.Turn, ID: p.ID, Tool: p.Tool, Title: p.Title,
				Input: in, Cut: cut, State: st, Allow: d.Allow, Reason: d.Reason})
		}
	case engine.EventBlocked:
		// A terminal agent's unknown dialog waits on the person, like a
		// permission request: blocked (never idle), not silent.
		if ev.Text != "" {
			text, _ := events.Clip(ev.Text)
			a.apply(evBlockSeen, text)
			return
		}
		a.mu.Lock()
		if a.life.blocked {
			a.actAt = time.Now() // the block's end is news: the window counts from here
		}
		a.mu.Unlock()
		a.apply(evBlockCleared, "")
	case engine.EventTurnEnd:
		t := a.currentTurn()
		if t == nil || ev.Turn != t.id {
			a.log.Warn("end of a turn not in flight", "turn", ev.Turn)
			return
		}
		a.tellOOM(ev.Turn)
		if ev.Limit != nil {
			a.limitTurn(ctx, ev)
			return
		}
		if ev.Error == "" {
			a.limitN = 0
		}
		a.endTurn(ctx, ev.Text, ev.Error)
		// A turn the engine failed (its model refused, was unreachable,
		// ...) leaves the agent failed with the engine's own words until
		// its next turn; an interrupted one is the person's doing.
		if ev.Error != "" && ev.Error != "interrupted" {
			a.apply(evTurnFailed, ev.Error)
		} else {
			a.apply(evTurnEnded, "")
		}
	default:
		a.log.Debug("event of an unknown kind", "kind", ev.Kind)
	}
}

// tellOOM puts a notice in the agent's log (troupe log) when the OOM
// killer killed processes of its sandbox's cgroup since the last look:
// its engine's commands end with a bare "Killed", which says nothing of
// the memory cap.
func (a *actor) tellOOM(turn troupe.TurnID) {
	a.mu.Lock()
	n := a.cg.OOMKills()
	killed := n - a.ooms
	if n < a.ooms {
		killed = 0
	}
	a.ooms = n
	a.mu.Unlock()
	if killed == 0 {
		return
	}
	text := fmt.Sprintf("out of memory: the OOM killer killed %d of the agent's processes at its memory cap (sandbox.memory in .troupe/team.toml)", killed)
	a.log.Warn("agent's processes killed at its memory cap", "killed", killed)
	ev := engine.Event{Kind: engine.EventNotice, Turn: turn, Text: text}
	a.jl.event(ev)
	if e, ok := activity(ev, time.Now(), feedClip); ok {
		a.rt.publish(a.key, events.AgentActivity{Turn: turn, Event: e})
	}
}

// feedClip cuts a text of the feed at events.MaxText, saying its size when
// it cut.
func feedClip(s string) (string, bool, int) {
	t, cut := events.Clip(s)
	if !cut {
		return t, false, 0
	}
	return t, true, len(s)
}

// echoed reports whether the session's Approver published the decision of
// the engine's permission request id.
func (a *actor) echoed(engineID string) bool {
	a.mu.Lock()
	ap := a.appr
	a.mu.Unlock()
	return engineID != "" && ap != nil && ap.echo(engineID)
}
