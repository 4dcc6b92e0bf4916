package fakemodel

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// maxLimits bounds the limits the server remembers; past it the oldest
// are forgotten (their next request starts a new limit).
const maxLimits = 1024

// limitEntry is one limit (Limit.Key): when it resets.
type limitEntry struct {
	key   string
	reset time.Time
}

// limit says whether a request under l is refused now, and for how long
// still: the first request naming l starts it, and it lasts l.Reset; one
// after the reset is let through.
func (s *Server) limit(l Limit) (left time.Duration, limited bool) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.limits {
		if e.key == l.Key {
			left = e.reset.Sub(now)
			return left, left > 0
		}
	}
	if len(s.limits) >= maxLimits {
		s.limits = s.limits[1:]
	}
	s.limits = append(s.limits, limitEntry{key: l.Key, reset: now.Add(l.Reset)})
	return l.Reset, true
}

// writeLimit answers HTTP 429 as the request's provider does for a usage
// or rate limit lasting left, with its reset headers unless quiet:
// Anthropic's retry-after and unified rate-limit headers, OpenAI's
// retry-after and x-ratelimit-reset-requests.
func writeLimit(w http.ResponseWriter, api API, left time.Duration, quiet bool) {
	secs := int(math.Ceil(left.Seconds()))
	h := w.Header()
	if !quiet {
		h.Set("retry-after", strconv.Itoa(secs))
	}
	if api == Responses || api == ChatCompletions {
		msg := "Rate limit reached for requests. Please try again later."
		if !quiet {
			h.Set("x-ratelimit-reset-requests", fmt.Sprintf("%ds", secs))
			msg = fmt.Sprintf("Rate limit reached for requests. Please try again in %ds.", secs)
		}
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
			"message": msg, "type": "requests", "param": nil, "code": "rate_limit_exceeded"}})
		return
	}
	h.Set("anthropic-ratelimit-unified-status", "rejected")
	if !quiet {
		reset := time.Now().Add(left)
		h.Set("anthropic-ratelimit-unified-reset", strconv.FormatInt(reset.Unix(), 10))
		h.Set("anthropic-ratelimit-requests-reset", reset.UTC().Format(time.RFC3339))
	}
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"type": "error", "error": map[string]any{
		"type": "rate_limit_error", "message": "This request would exceed your account's rate limit. Please try again later."}})
}
