package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine/claude/claudetest"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// runnerClaudeTeam is a Claude agent placed on runner r1, a local
// scripted lead that asks it what it is asked, and a local scripted
// helper the Claude agent can ask through troupe's MCP tools.
const runnerClaudeTeam = `
[[agent]]
name = "lead"
engine = "fake"

[agent.fake]
respond = """
!ask claude-coder {text}
!say lead got: {result}
"""

[[agent]]
name = "helper"
engine = "fake"

[agent.fake]
respond = "!say helper knows: {text}"

[[agent]]
name = "claude-coder"
engine = "claude"
command = %q
runner = "r1"
turn_timeout = "2m"
env = { ENABLE_TOOL_SEARCH = "false" }
`

// TestRunnerClaudeAskedByLocalAgent: the pinned Claude Code CLI, on the
// fake model, runs on a runner (its own process, HOME and root) and is
// asked through ask_agent by a local agent; the model's answer comes back
// to the asker. Only the runner reaches the model (the daemon's
// environment points the CLI at a closed port), the CLI works in the
// runner's clone, and its MCP call to troupe crosses the link: it asks a
// local teammate, whose inbox on the daemon holds the question. Its
// permission request waits on the person at the daemon; allowed, its
// shell runs in the runner's worktree.
func TestRunnerClaudeAskedByLocalAgent(t *testing.T) {
	bin := claudetest.Bin(t)
	model := startModel(t)
	state := t.TempDir()
	proj := gitProject(t, fmt.Sprintf(runnerClaudeTeam, bin))
	// The daemon's Claude environment leads nowhere: a Claude turn run on
	// the daemon's machine would fail with "Connection refused".
	daemonEnv := claudetest.Env(t, claudetest.Home(t), "http://127.0.0.1:1")
	ctx, d, cl, p := serveProject(t, state, proj, daemonEnv, 4*time.Minute, "--runners", "127.0.0.1:0")
	creds := filepath.Join(t.TempDir(), "r1.creds")
	r := startRunnerEnv(t, state, "r1", creds, claudetest.Env(t, claudetest.Home(t), model.URL()))
	work := filepath.Join(r.root, string(p.ID), "repo", "troupe", "worktrees", "claude-coder")
	// The daemon stops first (it closes its sessions through the runner),
	// then the runner, then nothing may still run in the runner's worktree.
	t.Cleanup(func() {
		d.stop(syscall.SIGTERM)
		r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Errorf("runner did not stop within 30s of SIGTERM:\n%s", r.logs.String())
		}
		waitNoProcessIn(t, work)
	})

	ask := func(text string) string {
		t.Helper()
		res, err := cl.Ask(ctx, p.ID, "lead", text, 0)
		if err != nil || res.State != troupe.ReqAnswered {
			t.Fatalf("ask lead %q: %+v, %v\ndaemon:\n%s\nrunner:\n%s", text, res, err, d.logs.String(), r.logs.String())
		}
		return res.Answer
	}

	if got := ask("[[text:pong from the runner]]"); got != "lead got: pong from the runner" {
		t.Fatalf("lead's answer = %q, want the model's answer through claude-coder", got)
	}
	var seen bool
	for _, q := range model.Requests() {
		if q.Side == "" && strings.Contains(q.Prompt, "pong from the runner") {
			seen = true
			if body, _ := json.Marshal(q.Body); !strings.Contains(string(body), work) {
				t.Errorf("the CLI's model request does not name its working directory, the runner's worktree %s: %.600s", work, body)
			}
		}
	}
	if !seen {
		t.Fatal("the model was never asked the lead's question")
	}
	if as, err := cl.Agents(ctx, p.ID); err != nil {
		t.Fatal(err)
	} else {
		for _, a := range as {
			if a.Name == "claude-coder" && (a.Runner != "r1" || a.SessionID == "") {
				t.Errorf("claude-coder: runner %q, session %q; want r1 and the CLI's session", a.Runner, a.SessionID)
			}
		}
	}

	// The Claude agent's own ask_agent: from the CLI to the runner's local
	// endpoint, over the link to the daemon, where helper answers.
	got := ask(`[[tool:mcp__troupe__ask_agent {"to":"helper","question":"is the build green?"}]]`)
	if got != "lead got: TOOL_RESULT_SEEN: helper knows: is the build green?" {
		t.Fatalf("lead's answer = %q, want helper's answer through claude-coder's MCP call", got)
	}
	// A tool it may not use waits on the person, on the daemon; allowed
	// there, it runs on the runner, in the runner's worktree, and the file
	// it makes comes back to the daemon's worktree of the agent. (A
	// command that writes: Claude Code runs some read-only ones, like a
	// bare pwd, without asking.)
	answer := make(chan string, 1)
	go func() {
		res, err := cl.Ask(ctx, p.ID, "lead", `[[tool:Bash {"command":"touch made-on-runner.txt && pwd"}]]`, 0)
		if err != nil {
			res.Error = err.Error()
		}
		answer <- res.Answer + res.Error
	}()
	waitAgent(t, cl, p.ID, "claude-coder", troupe.StateWaiting)
	ps, err := cl.Permissions(ctx, p.ID)
	if err != nil || len(ps) != 1 || ps[0].Tool != "Bash" || ps[0].Agent != "claude-coder" {
		t.Fatalf("permissions = %+v, %v; want claude-coder's one Bash request", ps, err)
	}
	if _, err := cl.Allow(ctx, ps[0].ID); err != nil {
		t.Fatal(err)
	}
	if got := <-answer; got != "lead got: TOOL_RESULT_SEEN: "+work {
		t.Errorf("lead's answer = %q, want the shell's pwd on the runner, %s", got, work)
	}
	if !fileExists(filepath.Join(work, "made-on-runner.txt")) {
		t.Error("the allowed command's file is not in the runner's worktree")
	}
	if diff, err := cl.Diff(ctx, p.ID, "claude-coder", true); err != nil || !strings.Contains(diff.Diff, "made-on-runner.txt") {
		t.Errorf("claude-coder's diff on the daemon = %q, %v; want the file made on the runner", diff.Diff, err)
	}

	msgs, err := cl.Messages(ctx, p.ID, "helper", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var asked bool
	for _, m := range msgs {
		asked = asked || m.From == "claude-coder" && m.Kind == troupe.KindAsk && m.Text == "is the build green?"
	}
	if !asked {
		t.Errorf("helper's inbox on the daemon has no ask from claude-coder: %+v", msgs)
	}
}
