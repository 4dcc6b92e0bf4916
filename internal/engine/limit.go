package engine

import "time"

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
