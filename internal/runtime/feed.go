package runtime

// What an agent's session reports, turned into the feed's events, the
// journal's entries and the lifecycle's. Runs in the actor's loop.

import (
	"context"
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
	if ev.Kind != engine.EventSession {
		a.mu.Lock()
		a.cold, a.coldUntil = false, time.Time{}
		a.mu.Unlock()
	}
	switch ev.Kind {
	case engine.EventOutput:
		text, cut := events.Clip(ev.Text)
		a.rt.publish(a.key, events.AgentOutput{Turn: ev.Turn, Text: text, Cut: cut})
	case engine.EventThinking:
		text, cut := events.Clip(ev.Text)
		a.rt.publish(a.key, events.AgentThinking{Turn: ev.Turn, Text: text, Cut: cut})
	case engine.EventToolCall:
		if ev.Tool != nil {
			in, cut := events.Clip(string(ev.Tool.Input))
			a.rt.publish(a.key, events.AgentToolCall{Turn: ev.Turn, ID: ev.Tool.ID, Name: ev.Tool.Name, Input: in, Cut: cut})
		}
	case engine.EventToolResult:
		if ev.Tool != nil {
			out, cut := events.Clip(ev.Tool.Output)
			a.rt.publish(a.key, events.AgentToolResult{Turn: ev.Turn, ID: ev.Tool.ID, Output: out, IsError: ev.Tool.IsError, Cut: cut})
		}
	case engine.EventUsage:
		if u := ev.Usage; u != nil {
			a.rt.publish(a.key, events.AgentUsage{Turn: ev.Turn, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
				CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, CostUSD: u.CostUSD})
		}
	case engine.EventSession:
		if ev.SessionID != "" {
			a.mu.Lock()
			eng := a.engine
			a.mu.Unlock()
			if err := a.rt.o.Sessions.SetSessionID(ctx, a.key, eng, ev.SessionID); err != nil {
				a.log.Error("store session id", "session", ev.SessionID, "err", err)
			}
			a.rt.publish(a.key, events.AgentSession{SessionID: ev.SessionID})
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

// echoed reports whether the session's Approver published the decision of
// the engine's permission request id.
func (a *actor) echoed(engineID string) bool {
	a.mu.Lock()
	ap := a.appr
	a.mu.Unlock()
	return engineID != "" && ap != nil && ap.echo(engineID)
}
