package claude

import (
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/claude/claudetest"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// A turn the model refuses with HTTP 429 ends with Limit set, whatever the
// login; with an API key the CLI passes on no reset time, so Until is zero
// (docs/engines/claude-code.md, "Usage and rate limits"). The session goes
// on: the next turn is answered, with no Limit.
func TestCLILimitAPIKey(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{})
	drive.SessionID(t, s)
	_, end := drive.RunTurn(t, s, "t1", "busy [[limit:5s]]")
	if end.Limit == nil || !end.Limit.Until.IsZero() {
		t.Fatalf("turn end %+v, want a limit with no reset time", end)
	}
	if !strings.Contains(end.Error, "429") {
		t.Errorf("error %q, want the CLI's words (429)", end.Error)
	}
	_, end = drive.RunTurn(t, s, "t2", "[[text:FINE]]")
	if end.Limit != nil || end.Error != "" || end.Text != "FINE" {
		t.Fatalf("turn end %+v, want FINE with no limit", end)
	}
}

// With a claude.ai login the CLI says when the limit resets (its
// rate_limit_event, from the model's anthropic-ratelimit-unified-reset):
// Until is then about 5 s ahead; a 429 with no reset header gives a limit
// with Until zero.
func TestCLILimitClaudeAILogin(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for i, kv := range r.env {
		if strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") {
			r.env[i] = "CLAUDE_CODE_OAUTH_TOKEN=" + claudetest.APIKey
		}
	}
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{})
	drive.SessionID(t, s)
	before := time.Now()
	_, end := drive.RunTurn(t, s, "t1", "busy [[limit:5s]]")
	after := time.Now()
	if end.Limit == nil {
		t.Fatalf("turn end %+v, want a limit", end)
	}
	// The model's header is in whole seconds (up to 1 s early), and the
	// refusal came between before and after.
	if u := end.Limit.Until; u.Before(before.Add(3*time.Second)) || u.After(after.Add(6*time.Second)) {
		t.Errorf("limit until %v, want about 5 s after %v (turn ended %v)", u, before, after)
	}
	_, end = drive.RunTurn(t, s, "t2", "busy [[limit:5s quiet]]")
	if end.Limit == nil || !end.Limit.Until.IsZero() {
		t.Fatalf("turn end %+v, want a limit with no reset time", end)
	}
	_, end = drive.RunTurn(t, s, "t3", "[[text:FINE]]")
	if end.Limit != nil || end.Error != "" || end.Text != "FINE" {
		t.Fatalf("turn end %+v, want FINE with no limit", end)
	}
}
