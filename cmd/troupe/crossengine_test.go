package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/engine/acp/opencodetest"
	"github.com/troupe-dev/troupe/internal/engine/claude/claudetest"
	"github.com/troupe-dev/troupe/internal/engine/codex/codextest"
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// mixedTeam has one agent on each real CLI engine.
const mixedTeam = `
[[agent]]
name = "claude"
engine = "claude"
command = %q
env = { ENABLE_TOOL_SEARCH = "false" }

[[agent]]
name = "codex"
engine = "codex"
command = %q

[[agent]]
name = "opencode"
engine = "opencode"
command = %q
allowed_tools = ["run_in_background"]
`

// mixedScript plays the three models of the cross-engine chain: the
// Claude agent asks the Codex agent, which delegates to the OpenCode agent,
// which starts a background task; each answers what it is told once its
// tool's result or its inbox's news arrives. Which model speaks is told by
// the API its CLI uses.
func mixedScript(q fakemodel.Request) fakemodel.Reply {
	call := func(name, args string) fakemodel.Reply {
		return fakemodel.Reply{Text: "calling " + name, Calls: []fakemodel.ToolCall{{Name: name, Args: []byte(args)}}}
	}
	switch q.API {
	case fakemodel.Messages: // Claude
		if q.AfterTool {
			return fakemodel.Reply{Text: "claude heard: " + q.ToolResult}
		}
		if strings.Contains(q.Prompt, "start the chain") {
			return call("mcp__troupe__ask_agent", `{"to":"codex","question":"get the checks run"}`)
		}
	case fakemodel.Responses: // Codex
		switch {
		case q.AfterTool:
			return fakemodel.Reply{Text: "codex delegated the checks to opencode"}
		case strings.Contains(q.Prompt, "result from opencode"):
			return fakemodel.Reply{Text: "codex saw opencode's result"}
		case strings.Contains(q.Prompt, "get the checks run"):
			return call("mcp__troupe__delegate", `{"to":"opencode","task":"run the checks"}`)
		}
	case fakemodel.ChatCompletions: // OpenCode
		switch {
		case q.AfterTool:
			return fakemodel.Reply{Text: "opencode started the checks"}
		case strings.Contains(q.Prompt, "background task you started has ended"):
			return fakemodel.Reply{Text: "opencode saw the checks end"}
		case strings.Contains(q.Prompt, "run the checks"):
			return call("*run_in_background", `{"command":"echo checks-$((40+2))-green"}`)
		}
	}
	return fakemodel.DefaultScript(q)
}

// mixedEnv is the daemon's environment for the three CLIs, all offline
// against model: one isolated HOME for all of them.
func mixedEnv(t testing.TB, model string, dirs ...string) []string {
	env := opencodetest.Env(t, model, map[string]any{"bash": "allow"})
	var home string
	for _, kv := range env {
		if h, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = h
		}
	}
	codexHome := filepath.Join(home, ".codex")
	tmp := filepath.Join(home, "tmp")
	for _, d := range []string{codexHome, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codextest.Config(model)), 0o600); err != nil {
		t.Fatal(err)
	}
	env = append(env, "CODEX_HOME="+codexHome, "TMPDIR="+tmp, "OPENAI_API_KEY="+codextest.APIKey)
	for _, kv := range claudetest.Env(t, claudetest.Home(t, dirs...), model) {
		if k, _, _ := strings.Cut(kv, "="); k != "HOME" && k != "PATH" && k != "LANG" {
			env = append(env, kv)
		}
	}
	return env
}

// TestCrossEngineTeamAndItsCopy: a Claude agent asks a Codex agent, which
// delegates to an OpenCode agent, which runs a background task; the answer
// comes back to Claude, the delegation's result wakes Codex, the task's end
// wakes OpenCode. A cp -r copy of the project runs the same chain at the
// same time: each project sees its own chain only (C1).
func TestCrossEngineTeamAndItsCopy(t *testing.T) {
	bins := []string{claudetest.Bin(t), codextest.Bin(t), opencodetest.Bin(t)}
	model := fakemodel.New(fakemodel.Options{Script: mixedScript})
	if err := model.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	state := t.TempDir()
	projA := filepath.Join(t.TempDir(), "app")
	projB := filepath.Join(t.TempDir(), "app-copy")
	writeTeam(t, projA, fmt.Sprintf(mixedTeam, bins[0], bins[1], bins[2]))
	copyDir(t, projA, projB)
	d := startDaemonEnv(t, state, mixedEnv(t, model.URL(), projA, projB), "--project", projA, "--project", projB)
	t.Cleanup(func() {
		d.stop(syscall.SIGTERM)
		waitNoProcessIn(t, projA, projB)
	})
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var ps []troupe.ProjectID
	for _, dir := range []string{projA, projB} {
		p, err := cl.ResolveProject(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p.ID)
	}
	// A failure shows what each project's inboxes hold, what the model was
	// asked, and the daemon's log: a chain of three CLIs has many places
	// to stall.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		for _, p := range ps {
			ms, err := allMessages(dctx, cl, p, "")
			t.Logf("project %s: %d messages (%v)", p, len(ms), err)
			for _, m := range ms {
				t.Logf("  #%d %s %s->%s %s %q %q", m.ID, m.Kind, m.From, m.To, m.State, m.Reason, cut(m.Text, 120))
			}
			as, _ := cl.Agents(dctx, p)
			for _, a := range as {
				t.Logf("  agent %s: %s %q", a.Name, a.State, a.Reason)
			}
			ts, _ := cl.Tasks(dctx, p)
			for _, tk := range ts {
				t.Logf("  task %s: %s %q", tk.ID, tk.State, tk.Reason)
			}
		}
		for _, q := range model.Requests() {
			t.Logf("model: %s side=%q afterTool=%v prompt=%q", q.API, q.Side, q.AfterTool, cut(q.Prompt, 100))
		}
		t.Logf("daemon log:\n%s", d.logs.String())
	})

	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() {
			req, err := cl.Ask(ctx, p, "claude", "start the chain", 0)
			want := "claude heard: codex delegated the checks to opencode"
			if err != nil || req.State != troupe.ReqAnswered || req.Answer != want {
				t.Errorf("project %s: ask = %s %q %q, %v; want %q", p, req.State, req.Answer, req.Error, err, want)
			}
		})
	}
	wg.Wait()
	// The wakes: opencode's turn on its task's end, codex's on the
	// delegation's result, in each project.
	for _, p := range ps {
		waitFor(t, ctx, cl, "the wakes of "+string(p), func() bool {
			ms, _ := allMessages(ctx, cl, p, "")
			var taskEnd, result, failed bool
			for _, m := range ms {
				taskEnd = taskEnd || m.Kind == troupe.KindTask && m.To == "opencode" && m.State == troupe.MsgDelivered
				result = result || m.Kind == troupe.KindResult && m.To == "codex" && m.State == troupe.MsgDelivered
				failed = failed || m.State == troupe.MsgFailed || m.State == troupe.MsgExpired
			}
			// A failed message will not be delivered: stop waiting, the
			// checks below say which.
			return failed || taskEnd && result
		})
	}
	for _, p := range ps {
		ms, err := allMessages(ctx, cl, p, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Project != p {
				t.Errorf("project %s shows a message of %s: %+v", p, m.Project, m)
			}
			if m.Kind == troupe.KindTask && !strings.Contains(m.Text, "checks-42-green") {
				t.Errorf("the task's completion in %s: %q", p, m.Text)
			}
			if m.State != troupe.MsgDelivered {
				t.Errorf("message %d in %s ended %s (%s)", m.ID, p, m.State, m.Reason)
			}
		}
	}
	// Every engine spoke to the model, for both projects.
	seen := map[fakemodel.API]int{}
	for _, q := range model.Requests() {
		if q.Side == "" {
			seen[q.API]++
		}
	}
	for _, api := range []fakemodel.API{fakemodel.Messages, fakemodel.Responses, fakemodel.ChatCompletions} {
		if seen[api] < 2 {
			t.Errorf("the model got %d %s requests, want some from each project", seen[api], api)
		}
	}
}

// cut shortens s to n bytes for a log line.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
