package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine/acp/opencodetest"
	"github.com/troupe-dev/troupe/internal/engine/codex/codextest"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// quietTeam is one agent "x" on an engine under test, with a short
// turn_timeout, whose commands run without asking (OpenCode takes no
// permission_mode: its own configuration runs bash without asking).
const quietTeam = `
[[agent]]
name = "x"
engine = %q
command = %q
turn_timeout = "5s"
%s
env = { ENABLE_TOOL_SEARCH = "false" }
`

const bypass = `permission_mode = "bypassPermissions"`

// TestQuietCommandIsWorkForEveryCLI (C3, issue 22): with each pinned CLI,
// a shell command of the engine's own that prints nothing for over two of
// the agent's 5 s windows is work, not silence: the ask is answered with
// its output. (A window of 5 s: a CLI on a loaded 2-core machine can be
// quiet for 2 s before its model request.)
func TestQuietCommandIsWorkForEveryCLI(t *testing.T) {
	for _, c := range []struct {
		engine, call string
	}{
		{"claude", `[[tool:Bash {"command":"sleep 11; echo slept","timeout":60000}]]`},
		{"codex", `[[tool:exec_command {"cmd":"sleep 11; echo slept","yield_time_ms":30000}]]`},
		{"opencode", `[[tool:bash {"command":"sleep 11; echo slept","description":"sleeps"}]]`},
	} {
		t.Run(c.engine, func(t *testing.T) {
			var r *claudeRig
			switch c.engine {
			case "claude":
				r = newClaudeRigWith(t, func(bin string) string { return fmt.Sprintf(quietTeam, "claude", bin, bypass) })
			case "codex":
				r = newEngineRigTeam(t, fmt.Sprintf(quietTeam, "codex", codextest.Bin(t), bypass))
			case "opencode":
				r = newEngineRigTeam(t, fmt.Sprintf(quietTeam, "opencode", opencodetest.Bin(t), ""))
			}
			r.answer("x", "[[text:warm]]") // the CLI's start is not the model's silence
			req := r.ask("x", "run it "+c.call)
			if req.State != troupe.ReqAnswered || !strings.Contains(req.Answer, "slept") {
				t.Fatalf("quiet command: %s %q (%s), want answered with its output", req.State, req.Answer, req.Error)
			}
		})
	}
}
