package runtime

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestC15_TroupeToolsPassTheGate: troupe's own tools that run a command
// pass the same decision as an engine's (permission.Decide, then the
// person), whoever calls them: default asks and runs only once allowed,
// a denial runs nothing, bypassPermissions and allowed_tools run at once,
// plan refuses; the whole input waits with the request. Talk tools are
// never asked.
func TestC15_TroupeToolsPassTheGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int32
		run := tool.Tool{Spec: tool.Spec{Name: "run", Schema: json.RawMessage(`{"type":"object"}`)}, Class: permission.Command,
			Title: tool.ArgTitle("wants to run:", "command"),
			Handle: func(context.Context, tool.Caller, json.RawMessage) (string, error) {
				ran.Add(1)
				return "ran", nil
			}}
		mode := func(name, m string, allowed ...string) troupe.AgentSpec {
			s := spec(name, 10*time.Minute)
			s.PermissionMode, s.AllowedTools = m, allowed
			return s
		}
		teams := staticTeams{p1: {spec("lead", 10*time.Minute), mode("dflt", ""), mode("bypass", permission.Bypass),
			mode("granted", permission.Default, "run"), mode("planner", permission.Plan), mode("edits", permission.AcceptEdits)}}
		h := newHarnessOn(t, teams, Options{Tools: []tool.Tool{run}})
		long := strings.Repeat("x", 10000)
		ask := askAsync(t.Context(), h, key(p1, "dflt"), `tool run {"command":"rm -rf / #`+long+`"}`)
		synctest.Wait()
		ps := h.rt.Permissions(p1)
		if len(ps) != 1 || ps[0].Tool != "run" || !ps[0].Cut || ps[0].Size < 10000 || !strings.HasPrefix(ps[0].Title, "wants to run: rm -rf /") {
			t.Fatalf("pending = %+v, want dflt's run, its input cut in the listing", ps)
		}
		whole, size, err := h.rt.PermissionInput(ps[0].ID, 0, 0)
		if err != nil || size != ps[0].Size || !strings.HasSuffix(whole, long+`"}`) {
			t.Fatalf("PermissionInput = %d bytes of %d, %v; want the whole input", len(whole), size, err)
		}
		if part, _, _ := h.rt.PermissionInput(ps[0].ID, size-3, 100); part != `x"}` {
			t.Errorf("the input's last page = %q", part)
		}
		h.rt.Decide(t.Context(), ps[0].ID, false, "no")
		if req := ask.wait(t); !strings.Contains(req.Answer, "run was not allowed: the person denied it: no") || ran.Load() != 0 {
			t.Fatalf("denied: answer %q, ran %d times; want a tool error and nothing run", req.Answer, ran.Load())
		}
		ask = askAsync(t.Context(), h, key(p1, "dflt"), `tool run {"command":"make"}`)
		synctest.Wait()
		h.rt.Decide(t.Context(), h.rt.Permissions(p1)[0].ID, true, "")
		if req := ask.wait(t); req.Answer != "ran" || ran.Load() != 1 {
			t.Fatalf("allowed: answer %q, ran %d", req.Answer, ran.Load())
		}
		for _, c := range []struct{ agent, want string }{
			{"bypass", "ran"}, {"granted", "ran"},
			{"planner", `tool error: run was not allowed: the agent is in permission_mode "plan"`},
			{"lead", "echo"}, // a talk: never asked (the memEngine's echo)
		} {
			text := `tool run {"command":"make"}`
			if c.agent == "lead" {
				text = "hello"
			}
			req, err := h.rt.Ask(t.Context(), key(p1, c.agent), troupe.Person, text, 0)
			if err != nil || !strings.HasPrefix(req.Answer, c.want) {
				t.Errorf("%s: %q, %v; want %q", c.agent, req.Answer, err, c.want)
			}
		}
		if n := len(h.rt.Permissions(p1)); n != 0 {
			t.Errorf("%d requests pending; bypass, allowed_tools and plan settle at once", n)
		}
		// acceptEdits: a command still asks.
		ask = askAsync(t.Context(), h, key(p1, "edits"), `tool run {"command":"make"}`)
		synctest.Wait()
		if ps := h.rt.Permissions(p1); len(ps) != 1 || ps[0].Agent != "edits" {
			t.Fatalf("acceptEdits: pending %+v, want the command asked", ps)
		}
		h.rt.Decide(t.Context(), h.rt.Permissions(p1)[0].ID, true, "")
		ask.wait(t)
	})
}

// TestC15_EngineAskingAboutTroupeTool: an engine that asks about one of
// troupe's tools by its MCP name (Claude Code's mcp__troupe__<tool>) is
// let through at once: the call itself passes the gate, so the person is
// asked once.
func TestC15_EngineAskingAboutTroupeTool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "perm mcp__troupe__run_in_background", 0)
		if err != nil || req.Answer != "mcp__troupe__run_in_background:true" {
			t.Fatalf("ask = %+v, %v", req, err)
		}
	})
}

// TestC15_RequestNamesTheFileALinkLeadsTo: an engine's request to edit a
// path that is a symbolic link says which file it changes.
func TestC15_RequestNamesTheFileALinkLeadsTo(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".troupe"), 0o755)
	os.WriteFile(filepath.Join(dir, ".troupe", "team.toml"), nil, 0o644)
	os.Symlink(".troupe/team.toml", filepath.Join(dir, "notes.md"))
	os.Symlink(".troupe", filepath.Join(dir, "cfg"))
	for _, c := range []struct{ input, want string }{
		{`{"file_path":"` + filepath.Join(dir, "notes.md") + `"}`, "the file changed is .troupe/team.toml"},
		{`{"file_path":"cfg/new.toml"}`, "the file changed is .troupe/new.toml"},
		{`{"path":"plain.txt"}`, ""},
		{`{"file_path":"` + filepath.Join(dir, ".troupe", "team.toml") + `"}`, ""},
		{`{"command":"ls"}`, ""},
	} {
		got := resolvedTitle("Edit", json.RawMessage(c.input), dir)
		if c.want == "" && got != "Edit" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.input, got, c.want)
		}
	}
}
