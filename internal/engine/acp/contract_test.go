package acp

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/enginetest"
)

// TestSessionContract runs the engine.Session contract suite on the real
// OpenCode over ACP, its turns scripted by fake-model markers:
//
//   - Answer: [[text:X]].
//   - Hang: the answer streams in two chunks an hour apart; the text is
//     padded so the first chunk, sent at once, is exactly the turn's text.
//   - Die: the model has OpenCode's bash tool (allowed by default) run
//     `kill -9 $PPID` (the shell's parent is OpenCode) after the turn's
//     text: a real crash mid-turn, no answer to the prompt.
func TestSessionContract(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Harness{
		Start: func(t *testing.T, _ []enginetest.Turn) engine.Session {
			r := newRig(t, nil)
			s := r.start(t, engine.StartSpec{})
			drive.SessionID(t, s)
			return s
		},
		Message: func(turn enginetest.Turn) string {
			switch turn.Kind {
			case enginetest.Hang:
				pad := strings.Repeat(".", len([]rune(turn.Text)))
				return "[[text:" + turn.Text + pad + "]] [[slow:1h every 1h]]"
			case enginetest.Die:
				return `[[text:` + turn.Text + `]] [[tool:bash {"command":"kill -9 $PPID","description":"die"}]]`
			default:
				return "[[text:" + turn.Text + "]]"
			}
		},
		Patience: patience,
	})
}
