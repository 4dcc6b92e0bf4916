package runtime

import (
	"fmt"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// An agent's session that stays idle (no turn in flight) for its
// idle_timeout is stopped: its child process goes, its MCP token is
// revoked, and the next message starts a new session that resumes the
// conversation (StartSpec.Resume, from Sessions) where the engine can. An
// idle_timeout of zero keeps the session. Everything here runs in the
// actor's loop.

// watchIdle arms the idle stop when the session has become idle (after a
// turn ended, or a session started with nothing to do) and disarms it while
// a turn is in flight or there is no session. The loop calls it after every
// step.
func (a *actor) watchIdle() {
	a.mu.Lock()
	live, busy := a.sess != nil, a.turn != nil
	a.mu.Unlock()
	if !live || busy {
		if !a.idleSince.IsZero() {
			a.idleStop.Stop()
			a.idleSince = time.Time{}
		}
		return
	}
	if a.idleSince.IsZero() {
		a.idleSince = time.Now()
		a.armIdleStop()
	}
}

// armIdleStop (re)arms the idle stop for what is left of the agent's
// idle_timeout since the session became idle, as the team defines it now
// (an edit applies at once); a zero idle_timeout disarms it.
func (a *actor) armIdleStop() {
	d := a.idleTimeout()
	if d <= 0 {
		a.idleStop.Stop()
		return
	}
	a.idleStop.Reset(max(d-time.Since(a.idleSince), 0))
}

// idleTimeout is the agent's idle_timeout now; zero when it keeps its
// session (or is no longer in its team: the actor stops anyway).
func (a *actor) idleTimeout() time.Duration {
	spec, _, ok := a.rt.o.Teams.Agent(a.key)
	if !ok {
		return 0
	}
	return spec.IdleTimeout
}

// stopIfIdle runs when the idle stop fires: a session idle for its whole
// idle_timeout, with nothing of the agent waiting on the person, is
// closed.
func (a *actor) stopIfIdle() {
	if a.idleSince.IsZero() {
		return // a turn started meanwhile
	}
	d := a.idleTimeout()
	if d <= 0 {
		return
	}
	if left := d - time.Since(a.idleSince); left > 0 {
		a.idleStop.Reset(left) // the timeout grew since it was armed
		return
	}
	a.mu.Lock()
	live, busy := a.sess != nil, a.turn != nil || a.life.waits > 0 || a.toolCalls > 0 || attached(a.sess)
	a.mu.Unlock()
	switch {
	case !live:
		return
	case busy:
		// A turn keeps the session; so does a permission request or a
		// troupe tool call still open, or a person attached to its
		// terminal: check again a whole timeout later.
		a.idleSince = time.Now()
		a.armIdleStop()
		return
	}
	a.closeSession()
	a.idleSince = time.Time{}
	reason := fmt.Sprintf("idle for %s: stopped; the next message starts it again", shortDuration(d))
	a.log.Info("idle session stopped", "idle_timeout", d)
	a.apply(evStop, reason)
}

// applyDefinition runs at a turn boundary once the agent's definition
// changed: a new session at the next message, unless only idle_timeout
// changed, which applies to the session as it is.
func (a *actor) applyDefinition() {
	spec, _, ok := a.rt.o.Teams.Agent(a.key)
	a.mu.Lock()
	old := a.spec
	a.mu.Unlock()
	if ok && old.IdleTimeout != spec.IdleTimeout && sameBesidesIdle(old, spec) {
		a.mu.Lock()
		a.spec = spec
		a.mu.Unlock()
		if !a.idleSince.IsZero() {
			a.armIdleStop()
		}
		return
	}
	a.closeSession()
	a.apply(evStop, "definition changed")
}

// sameBesidesIdle compares two definitions, ignoring idle_timeout and
// where they sit in the file.
func sameBesidesIdle(a, b troupe.AgentSpec) bool {
	a.Line, b.Line = 0, 0
	a.IdleTimeout, b.IdleTimeout = 0, 0
	return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b)
}

// shortDuration writes d without its zero tails: "30m", "1h", "1h30m",
// "45s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// attached reports whether a person is attached to s's terminal (a
// terminal-mode session).
func attached(s engine.Session) bool {
	ts, ok := s.(engine.TerminalSession)
	if !ok {
		return false
	}
	t := ts.Terminal()
	return t != nil && t.InUse()
}
