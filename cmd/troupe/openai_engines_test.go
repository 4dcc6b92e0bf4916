package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine/acp/opencodetest"
	"github.com/troupe-dev/troupe/internal/engine/codex/codextest"
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// engineTeam is one agent "x" on the engine under test, beside a scripted
// helper.
const engineTeam = `
[[agent]]
name = "x"
engine = %q
command = %q
turn_timeout = "%s"

[[agent]]
name = "helper"
engine = "fake"

[agent.fake]
respond = "!say helper knows: {text}"
`

// newEngineRig is a claudeRig whose agent "x" runs on engine (codex or
// opencode, the real pinned CLI) against the fake model.
func newEngineRig(t *testing.T, eng, bin, window string) *claudeRig {
	return newEngineRigTB(t, eng, bin, window)
}

// newEngineRigTB is newEngineRig for tests and benchmarks.
func newEngineRigTB(t testing.TB, eng, bin, window string) *claudeRig {
	t.Helper()
	return newEngineRigTeam(t, fmt.Sprintf(engineTeam, eng, bin, window))
}

// newEngineRigTeam is newEngineRigTB with the team file team.
func newEngineRigTeam(t testing.TB, team string) *claudeRig {
	t.Helper()
	model := fakemodel.New(fakemodel.Options{})
	if err := model.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	r := &claudeRig{t: t, model: model, state: t.TempDir(), proj: filepath.Join(t.TempDir(), "app")}
	writeTeam(t, r.proj, team)
	r.env = mixedEnv(t, model.URL(), r.proj)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx
	r.start()
	t.Cleanup(func() {
		r.d.stop(syscall.SIGTERM)
		waitNoProcessIn(t, r.proj)
	})
	return r
}

// openaiEngines are the engines on OpenAI-style model APIs, with the tool
// name their CLI gives troupe's ask_agent.
func openaiEngines(t *testing.T) []struct{ name, bin, askTool string } {
	return []struct{ name, bin, askTool string }{
		{"codex", codextest.Bin(t), "mcp__troupe__ask_agent"},
		{"opencode", opencodetest.Bin(t), "*ask_agent"},
	}
}

// TestC4_CodexAndOpenCodeSlowModelsAreNeverCutSilentOnesAre is the seed's
// first incident, for real: a Codex agent and an OpenCode agent whose model
// streams for over two 6 s windows are answered; one that goes silent gets no
// reply after one window.
func TestC4_CodexAndOpenCodeSlowModelsAreNeverCutSilentOnesAre(t *testing.T) {
	for _, e := range openaiEngines(t) {
		t.Run(e.name, func(t *testing.T) {
			// A window of 6s: a CLI on a loaded 2-core machine can be
			// quiet for 2s between its prompt and its model request.
			r := newEngineRig(t, e.name, e.bin, "6s")
			r.answer("x", "[[text:warm]]") // the CLI's start is not the model's silence
			if got := r.answer("x", "[[text:steady]] [[slow:15s every 500ms]]"); !strings.HasPrefix(got, "steady") {
				t.Fatalf("slow model: answer %q", got)
			}
			req := r.ask("x", "[[silent:1h]]")
			if req.State != troupe.ReqNoReply || !strings.Contains(req.Error, "6s") {
				t.Fatalf("silent model: %s %q, want no_reply after the 6s window", req.State, req.Error)
			}
		})
	}
}

// TestCodexAndOpenCodeWorkWithTheTeamAndResume: each asks a fake teammate
// through troupe's MCP tool and gets its answer, is asked by the person,
// and after a SIGKILL of the daemon continues the same thread or session:
// the model is sent the earlier exchange.
func TestCodexAndOpenCodeWorkWithTheTeamAndResume(t *testing.T) {
	for _, e := range openaiEngines(t) {
		t.Run(e.name, func(t *testing.T) {
			r := newEngineRig(t, e.name, e.bin, "2m")
			got := r.answer("x", "remember the word heliotrope [[tool:"+e.askTool+` {"to":"helper","question":"is it green?"}]]`)
			// Codex prefixes an MCP result with its wall time; the answer is
			// what the model said after the tool's result.
			if !strings.HasPrefix(got, "TOOL_RESULT_SEEN: ") || !strings.HasSuffix(got, "helper knows: is it green?") {
				t.Fatalf("ask of the helper through %s: %q", e.askTool, got)
			}
			sid := r.agent("x").SessionID
			if sid == "" {
				t.Fatal("no session id stored for the agent")
			}
			r.d.stop(syscall.SIGKILL)
			r.start()
			if got := r.agent("x").SessionID; got != sid {
				t.Fatalf("after the restart the session is %q, want %q", got, sid)
			}
			if got := r.answer("x", "which word? [[text:heliotrope]]"); got != "heliotrope" {
				t.Fatalf("answer after the restart: %q", got)
			}
			q := r.waitPrompt("which word?")
			var body []byte
			switch q.API {
			case fakemodel.Responses:
				body, _ = json.Marshal(q.Body["input"])
			default:
				body, _ = json.Marshal(q.Body["messages"])
			}
			if !strings.Contains(string(body), "remember the word heliotrope") {
				t.Errorf("the model was not sent the earlier exchange: %.300s", body)
			}
			if r.agent("x").SessionID != sid {
				t.Errorf("the session changed after the resumed turn")
			}
		})
	}
}

// TestCodexAndOpenCodeModelFailures: a model that answers 500, then one
// that is gone. Codex (retries off in its provider config) ends the turn
// with its own error; OpenCode retries for ever in silence, so troupe's
// inactivity window cuts the turn. Either way the asker gets a clear
// error within the window and, while the model is there, the next message
// works.
func TestCodexAndOpenCodeModelFailures(t *testing.T) {
	for _, e := range openaiEngines(t) {
		t.Run(e.name, func(t *testing.T) {
			r := newEngineRig(t, e.name, e.bin, "8s")
			r.answer("x", "[[text:warm]]")
			start := time.Now()
			req := r.ask("x", "[[error:500]]")
			switch e.name {
			case "codex":
				// Codex words a 500 its own way ("We're currently
				// experiencing high demand…"): the asker gets those words.
				if req.State != troupe.ReqFailed || !strings.Contains(req.Error, "x could not answer: ") || strings.Contains(req.Error, "no reply") {
					t.Fatalf("model 500: %s %q, want failed with Codex's error", req.State, req.Error)
				}
			default:
				if req.State != troupe.ReqNoReply || !strings.Contains(req.Error, "8s") {
					t.Fatalf("model 500: %s %q, want no reply after the 8s window", req.State, req.Error)
				}
			}
			if took := time.Since(start); took > time.Minute {
				t.Errorf("the failure came after %v, far past the 8s window", took)
			}
			r.waitState("x", troupe.StateFailed)
			if got := r.answer("x", "[[text:back]]"); got != "back" {
				t.Fatalf("after the failure: %q", got)
			}
			r.model.Close()
			req = r.ask("x", "anyone there?")
			if req.State == troupe.ReqAnswered || req.Error == "" {
				t.Fatalf("model gone: %s %q, want an error", req.State, req.Error)
			}
		})
	}
}
