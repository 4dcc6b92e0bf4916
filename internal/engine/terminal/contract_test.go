package terminal

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/enginetest"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// contractREPL answers "say:X" with X, prints X for "hang:X" and then
// works until interrupted (Ctrl-C), and prints X for "die:X" and then
// kills itself.
const contractREPL = `trap 'stop=1' INT
printf 'repl> '
while IFS= read -r line; do
  case "$line" in
    *say:*) echo "${line#*say:}";;
    *hang:*) stop=; echo "${line#*hang:}"; printf 'working...'
      while [ -z "$stop" ]; do sleep 0.1; done
      printf '\r\033[K';;
    *die:*) echo "${line#*die:}"; sleep 0.5; kill -9 $$;;
  esac
  printf 'repl> '
done`

// TestGenericContract runs the engine.Session contract suite on the
// generic terminal engine driving a scripted REPL.
func TestGenericContract(t *testing.T) {
	enginetest.Run(t, enginetest.Harness{
		Start: func(t *testing.T, _ []enginetest.Turn) engine.Session {
			dir := t.TempDir()
			script := filepath.Join(dir, "repl.sh")
			if err := os.WriteFile(script, []byte(contractREPL), 0o755); err != nil {
				t.Fatal(err)
			}
			agent := troupe.AgentSpec{Name: "repl", Engine: troupe.EngineTerminal, Command: "/bin/sh", Args: []string{script},
				Options: map[string]any{"idle": "repl>", "busy": "working..."}}
			s, err := New(Options{StopTimeout: time.Second}).Start(context.Background(),
				engine.StartSpec{Key: troupe.RuntimeKey{Project: "p", Agent: "repl"}, Agent: agent, Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close(context.Background()) })
			return s
		},
		Message: func(turn enginetest.Turn) string {
			switch turn.Kind {
			case enginetest.Hang:
				return "hang:" + turn.Text
			case enginetest.Die:
				return "die:" + turn.Text
			default:
				return "say:" + turn.Text
			}
		},
		Patience: 30 * time.Second,
	})
}
