package fake

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/enginetest"
)

// TestSessionContract runs the engine.Session contract suite on the fake
// engine, its turns scripted by directives in the messages.
func TestSessionContract(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Harness{
		Start: func(t *testing.T, _ []enginetest.Turn) engine.Session {
			return startAgent(t, Options{}, engine.StartSpec{})
		},
		Message: func(turn enginetest.Turn) string {
			switch turn.Kind {
			case enginetest.Hang:
				return "!say " + turn.Text + "\n!sleep 1h"
			case enginetest.Die:
				return "!say " + turn.Text + "\n!crash"
			default:
				return "!say " + turn.Text
			}
		},
		Patience: patience,
	})
}
