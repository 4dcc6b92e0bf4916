package acp

import (
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/enginetest"
)

// OpenCode retries HTTP 429 itself, 5 times (docs/engines/codex-opencode.md,
// "OpenCode: usage and rate limits"): a limit whose retry-after is short
// is waited out inside the turn, which then ends answered, with no Limit;
// one with no reset header is given up on after about a minute of backoff,
// and that turn ends with Limit set and Until zero. The session goes on.
func TestCLILimit(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	s := r.start(t, engine.StartSpec{})
	drive.SessionID(t, s)

	start := time.Now()
	_, end := drive.RunTurn(t, s, "t1", "[[limit:5s]] [[text:WAITED]]")
	if end.Limit != nil || end.Error != "" || end.Text != "WAITED" {
		t.Fatalf("turn end %+v, want WAITED with no limit (OpenCode waits out a retry-after)", end)
	}
	if took := time.Since(start); took < 4*time.Second {
		t.Errorf("the turn took %v, less than the retry-after", took)
	}

	// OpenCode's backoff without a retry-after: 2, 4, 8, 16, 30 s (+25%).
	slow := enginetest.Drive{Patience: 3 * time.Minute}
	_, end = slow.RunTurn(t, s, "t2", "[[limit:600s quiet]]")
	if end.Limit == nil || !end.Limit.Until.IsZero() {
		t.Fatalf("turn end %+v, want a limit with no reset time", end)
	}
	if !strings.Contains(end.Error, "Rate limit reached") {
		t.Errorf("error %q, want OpenCode's words", end.Error)
	}

	_, end = drive.RunTurn(t, s, "t3", "[[text:FINE]]")
	if end.Limit != nil || end.Error != "" || end.Text != "FINE" {
		t.Fatalf("turn end %+v, want FINE with no limit", end)
	}
}
