package engine

import (
	"fmt"
	"time"
)

// MaxLimitWait bounds how far ahead a limit's reset time may be: the reset
// comes from the engine's output (a CLI's line, a provider's header), which
// troupe does not trust (C14). A reset further than this is cut to it.
const MaxLimitWait = 24 * time.Hour

// LimitUntil is the reset time of a limit an engine reported, clamped to
// [now, now+MaxLimitWait]: a reset in the past means "now" (the limit may
// already be over), one years away is cut to a day. The zero time (the
// engine said nothing of the reset) stays zero.
func LimitUntil(reset, now time.Time) time.Time {
	switch {
	case reset.IsZero():
		return time.Time{}
	case reset.Before(now):
		return now
	case reset.After(now.Add(MaxLimitWait)):
		return now.Add(MaxLimitWait)
	}
	return reset
}

// Unreachable is why an agent's session cannot start, or stopped: the
// machine it runs on (a runner) cannot be reached. It is not the agent's
// failure: its mail waits until the machine is back. A session reports it
// as its Err, or on the end of the turn in flight (Limit.Unreachable).
type Unreachable struct {
	Runner string
	Since  time.Time // when it was last heard from
}

func (u *Unreachable) Error() string {
	if u.Since.IsZero() {
		return fmt.Sprintf("unreachable (runner %s, not connected since the daemon started)", u.Runner)
	}
	return fmt.Sprintf("unreachable (runner %s, since %s)", u.Runner, u.Since.UTC().Format("2006-01-02 15:04:05 UTC"))
}
