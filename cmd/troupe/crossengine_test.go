package main

import (
	"context"
	"fmt"
	"maps"
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
	logTeamOnFailure(t, cl, model, d, ps...)

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

// askerTeam is an OpenCode agent whose own MCP client cuts a tool call
// after %[3]s (tool_timeout: OpenCode's experimental.mcp_timeout) and a
// Claude agent whose inactivity window is %[4]s.
const askerTeam = `
[[agent]]
name = "opencode"
engine = "opencode"
command = %[2]q

[agent.opencode]
tool_timeout = %[3]q

[[agent]]
name = "claude"
engine = "claude"
command = %[1]q
turn_timeout = %[4]q
env = { ENABLE_TOOL_SEARCH = "false" }
`

// TestC4_OpenCodeAskerWaitsOnALongClaudeTurn is the seed's asker on a long
// turn, with real CLIs: the OpenCode agent asks the Claude agent, whose
// model streams for 30 s, far past OpenCode's 15 s tool-call limit and
// three times Claude's 10 s window. The ask_agent call returns a request id
// before OpenCode's limit (no tool timeout in OpenCode), OpenCode's turn
// goes on and ends; Claude's turn is not cut; its answer then comes to
// OpenCode's inbox as a reply, wakes it, and its next turn's prompt holds
// the answer. No message fails.
func TestC4_OpenCodeAskerWaitsOnALongClaudeTurn(t *testing.T) {
	const (
		toolLimit = 15 * time.Second
		window    = "10s"
		question  = "how deep is the well?"
		answer    = "the well is forty-two fathoms deep"
		goesOn    = "opencode goes on while claude thinks"
		readIt    = "opencode read claude's answer"
	)
	bins := []string{claudetest.Bin(t), opencodetest.Bin(t)}
	// When OpenCode's model called ask_agent, and when it was given the
	// tool's result.
	var mu sync.Mutex
	var called, resulted time.Time
	script := func(q fakemodel.Request) fakemodel.Reply {
		switch q.API {
		case fakemodel.Messages: // Claude: a long answer, streamed
			if !q.AfterTool && strings.Contains(q.Prompt, question) {
				return fakemodel.Reply{Text: answer, Slow: fakemodel.Pace{Total: 30 * time.Second, Every: 2 * time.Second}}
			}
		case fakemodel.ChatCompletions: // OpenCode
			switch {
			case q.AfterTool:
				mu.Lock()
				resulted = time.Now()
				mu.Unlock()
				return fakemodel.Reply{Text: goesOn}
			case strings.Contains(q.Prompt, answer):
				return fakemodel.Reply{Text: readIt}
			case strings.Contains(q.Prompt, "consult claude"):
				mu.Lock()
				called = time.Now()
				mu.Unlock()
				return fakemodel.Reply{Calls: []fakemodel.ToolCall{{Name: "*ask_agent", Args: []byte(`{"to":"claude","question":"` + question + `"}`)}}}
			}
		}
		return fakemodel.DefaultScript(q)
	}
	model := fakemodel.New(fakemodel.Options{Script: script})
	if err := model.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	r := &claudeRig{t: t, model: model, state: t.TempDir(), proj: filepath.Join(t.TempDir(), "app")}
	writeTeam(t, r.proj, fmt.Sprintf(askerTeam, bins[0], bins[1], toolLimit.String(), window))
	r.env = mixedEnv(t, model.URL(), r.proj)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r.ctx = ctx
	r.start()
	t.Cleanup(func() {
		r.d.stop(syscall.SIGTERM)
		waitNoProcessIn(t, r.proj)
	})
	cl, p := r.cl, r.p
	logTeamOnFailure(t, cl, model, r.d, p)

	// The person's ask ends with OpenCode's first turn, which got a
	// request id from ask_agent and went on.
	first := r.ask("opencode", "please consult claude about the well")
	if first.State != troupe.ReqAnswered || first.Answer != goesOn {
		t.Fatalf("the person's ask of opencode = %s %q %q; want answered %q", first.State, first.Answer, first.Error, goesOn)
	}
	var result string
	for _, q := range model.Requests() {
		if q.API == fakemodel.ChatCompletions && q.Side == "" && q.AfterTool {
			result = q.ToolResult
		}
	}
	_, id, ok := strings.Cut(result, "claude has not answered yet (request ")
	id, _, _ = strings.Cut(id, ")")
	if !ok || id == "" {
		t.Fatalf("OpenCode's ask_agent result = %q; want a request id, not a tool timeout", result)
	}
	mu.Lock()
	took := resulted.Sub(called)
	mu.Unlock()
	if took <= 0 || took >= toolLimit {
		t.Errorf("OpenCode got ask_agent's result %v after its model called it; want it within its %v limit", took, toolLimit)
	}

	// Claude's answer comes to OpenCode's inbox and wakes it.
	waitFor(t, ctx, cl, "claude's answer to wake opencode", func() bool {
		ms, _ := allMessages(ctx, cl, p, "")
		var woke bool
		for _, m := range ms {
			if m.State == troupe.MsgFailed || m.State == troupe.MsgExpired {
				return true // will not be delivered: the checks below say which
			}
			woke = woke || m.Kind == troupe.KindReply && m.To == "opencode" && m.State == troupe.MsgDelivered
		}
		return woke
	})
	req, err := cl.Request(ctx, p, troupe.RequestID(id), 0)
	if err != nil {
		t.Fatal(err)
	}
	if req.State != troupe.ReqAnswered || req.Answer != answer || req.From != "opencode" || req.To != "claude" || !req.Detached {
		t.Errorf("request %s = %+v; want opencode's ask of claude answered %q, detached", id, req, answer)
	}
	// The scenario holds: Claude's turn outlasted OpenCode's limit, and
	// its answer came after OpenCode's turn had ended.
	if long := req.DoneAt.Sub(req.CreatedAt); long <= toolLimit {
		t.Errorf("claude answered in %v, not past OpenCode's %v limit: the test did not make a long turn", long, toolLimit)
	}
	if !req.DoneAt.After(first.DoneAt) {
		t.Errorf("claude answered at %v, before opencode's turn ended at %v", req.DoneAt, first.DoneAt)
	}

	ms, err := allMessages(ctx, cl, p, "")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, m := range ms {
		kinds[fmt.Sprintf("%s %s->%s", m.Kind, m.From, m.To)]++
		if m.State != troupe.MsgDelivered {
			t.Errorf("message %d (%s %s->%s) ended %s (%s)", m.ID, m.Kind, m.From, m.To, m.State, m.Reason)
		}
		if m.Kind == troupe.KindAsk && m.To == "claude" && (m.Text != question || m.Request != req.ID) {
			t.Errorf("the ask of claude: %q for request %s; want %q for %s", m.Text, m.Request, question, req.ID)
		}
		if m.Kind == troupe.KindReply && m.To == "opencode" && (m.Text != answer || m.Request != req.ID) {
			t.Errorf("the reply to opencode: %q for request %s; want %q for %s", m.Text, m.Request, answer, req.ID)
		}
	}
	want := map[string]int{
		"ask " + string(troupe.Person) + "->opencode": 1,
		"ask opencode->claude":                        1,
		"reply claude->opencode":                      1,
		"reply opencode->" + string(troupe.Person):    1,
	}
	if !maps.Equal(kinds, want) {
		t.Errorf("messages %v; want %v", kinds, want)
	}
	// OpenCode's turn on the reply saw Claude's answer.
	var seen bool
	for _, q := range model.Requests() {
		seen = seen || q.API == fakemodel.ChatCompletions && q.Side == "" && !q.AfterTool && strings.Contains(q.Prompt, answer)
	}
	if !seen {
		t.Errorf("no OpenCode model request after the reply holds claude's answer %q", answer)
	}
	for _, a := range []troupe.AgentID{"opencode", "claude"} {
		if ag := r.agent(a); ag.State == troupe.StateFailed {
			t.Errorf("agent %s is %s: %s", a, ag.State, ag.Reason)
		}
	}
}

// logTeamOnFailure logs, when t has failed, each project's messages,
// agents and tasks, the model's requests and the daemon's log. It is a
// cleanup: register it after the daemon's stop so that it runs first.
func logTeamOnFailure(t testing.TB, cl *client.Client, model *fakemodel.Server, d *daemon, ps ...troupe.ProjectID) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, p := range ps {
			ms, err := allMessages(ctx, cl, p, "")
			t.Logf("project %s: %d messages (%v)", p, len(ms), err)
			for _, m := range ms {
				t.Logf("  #%d %s %s->%s %s %q %q", m.ID, m.Kind, m.From, m.To, m.State, m.Reason, cut(m.Text, 120))
			}
			as, _ := cl.Agents(ctx, p)
			for _, a := range as {
				t.Logf("  agent %s: %s %q", a.Name, a.State, a.Reason)
			}
			ts, _ := cl.Tasks(ctx, p)
			for _, tk := range ts {
				t.Logf("  task %s: %s %q", tk.ID, tk.State, tk.Reason)
			}
		}
		for _, q := range model.Requests() {
			t.Logf("model: %s side=%q afterTool=%v prompt=%q result=%q", q.API, q.Side, q.AfterTool, cut(q.Prompt, 100), cut(q.ToolResult, 100))
		}
		t.Logf("daemon log:\n%s", d.logs.String())
	})
}

// cut shortens s to n bytes for a log line.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
