package codex

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/enginetest"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestSessionContract runs the engine.Session contract suite on the real
// CLI, its turns scripted by fake-model markers in the messages:
//
//   - Answer: [[text:X]].
//   - Hang: the answer streams in two chunks an hour apart
//     ([[slow:1h every 1h]]); the text is padded so the first chunk, sent
//     at once, is exactly the turn's text. The turn then waits on the model
//     until interrupted or closed.
//   - Die: the model has Codex's own shell run `kill -9 $PPID` (the
//     shell's parent is the app-server), after a message with the turn's
//     text: a real crash mid-turn, no turn/completed. The test config runs
//     commands without approval.
func TestSessionContract(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Harness{
		Start: func(t *testing.T, _ []enginetest.Turn) engine.Session {
			r := newRig(t)
			s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{})
			drive.SessionID(t, s) // the suite reads only outputs and turn ends
			return s
		},
		Message: func(turn enginetest.Turn) string {
			switch turn.Kind {
			case enginetest.Hang:
				pad := strings.Repeat(".", len([]rune(turn.Text)))
				return "[[text:" + turn.Text + pad + "]] [[slow:1h every 1h]]"
			case enginetest.Die:
				return `[[text:` + turn.Text + `]] [[tool:exec_command {"cmd":"kill -9 $PPID"}]]`
			default:
				return "[[text:" + turn.Text + "]]"
			}
		},
		Patience: patience,
	})
}
