package acp

import (
	"regexp"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
)

// ACP has no word for a usage or rate limit: an agent that gives up on one
// fails session/prompt with its error text. OpenCode's, once its own
// retries are spent (docs/engines/codex-opencode.md, "OpenCode: usage and
// rate limits"), is the provider's message: "Internal error: Rate limit
// reached for requests. Please try again later." (code -32603, data
// {"errorName": "APIError"}).

// limitWords match an agent's error that is a usage or rate limit.
var limitWords = regexp.MustCompile(`(?i)rate[ _-]?limit|usage[ _-]?limit|too many requests|\b(?:status|http|error)[: ]+429\b`)

// retryIn matches the reset an OpenAI-style message gives: "Please try
// again in 20s", "in 1m30s", "in 450ms". Each number is bounded in length
// so that no parse can overflow.
var retryIn = regexp.MustCompile(`(?i)try again in ((?:\d{1,6}(?:\.\d{1,6})?(?:ms|h|m|s)){1,4})\b`)

// maxErrorScan bounds how much of an agent's error is searched.
const maxErrorScan = 4096

// limitOf is the Limit of a turn the agent failed with message msg: set
// when msg says the model refused it for a usage or rate limit, its Until
// now plus the wait msg names (clamped by engine.LimitUntil to a day at
// most), zero when msg names none; nil for any other failure.
func limitOf(msg string, now time.Time) *engine.Limit {
	msg = msg[:min(len(msg), maxErrorScan)]
	if !limitWords.MatchString(msg) {
		return nil
	}
	l := &engine.Limit{}
	if m := retryIn.FindStringSubmatch(msg); m != nil {
		if d, err := time.ParseDuration(m[1]); err == nil && d > 0 {
			l.Until = engine.LimitUntil(now.Add(d), now)
		}
	}
	return l
}
