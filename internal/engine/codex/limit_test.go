package codex

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// A turn the model refuses with HTTP 429 ends with Limit set, Until zero:
// Codex passes on no reset time, with the provider's retry-after or
// without (docs/engines/codex-opencode.md, "Codex: usage and rate
// limits"). The session goes on: the next turn is answered, with no Limit.
func TestCLILimit(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{})
	drive.SessionID(t, s)
	for i, prompt := range []string{"busy [[limit:5s]]", "busy [[limit:5s quiet]]"} {
		_, end := drive.RunTurn(t, s, troupe.TurnID("t"+string(rune('1'+i))), prompt)
		if end.Limit == nil || !end.Limit.Until.IsZero() {
			t.Fatalf("%s: turn end %+v, want a limit with no reset time", prompt, end)
		}
		if !strings.Contains(end.Error, "429") {
			t.Errorf("%s: error %q, want Codex's words (429)", prompt, end.Error)
		}
	}
	_, end := drive.RunTurn(t, s, "t3", "[[text:FINE]]")
	if end.Limit != nil || end.Error != "" || end.Text != "FINE" {
		t.Fatalf("turn end %+v, want FINE with no limit", end)
	}
}
