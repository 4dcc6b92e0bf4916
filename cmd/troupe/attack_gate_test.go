package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Attacks on the permission gate (issue 19, C15), each through the binary
// with an openai agent in permission_mode "default" on the fake model:
// what its mode says the person must approve does not happen without the
// person.

// TestAttackGateRunInBackgroundWaitsOnThePerson: troupe's own
// run_in_background is a command like run_command: in the default mode
// it waits on the person and a denial runs nothing (it ran at once before).
func TestAttackGateRunInBackgroundWaitsOnThePerson(t *testing.T) {
	r := newOpenAIRig(t, nil, "default", nil)
	perm, done := r.askAndWaitPermission("x", `[[tool:run_in_background {"command":"echo pwned > bg-proof.txt"}]]`)
	if perm.Tool != "run_in_background" || !strings.Contains(perm.Title, "echo pwned > bg-proof.txt") {
		t.Fatalf("request = %+v, want run_in_background naming the command", perm)
	}
	if out := mustTroupe(t, r.state, r.proj, "permissions", string(perm.ID)); !strings.Contains(out, `"command":"echo pwned > bg-proof.txt"`) {
		t.Errorf("troupe permissions ID does not show the whole input:\n%s", out)
	}
	mustTroupe(t, r.state, r.proj, "deny", string(perm.ID), "--reason", "not now")
	req := <-done
	if !strings.Contains(req.Answer, "run_in_background was not allowed: the person denied it: not now") {
		t.Fatalf("answer = %q, want the denial as a tool error", req.Answer)
	}
	if ts, _ := r.cl.Tasks(r.ctx, r.p); len(ts) != 0 {
		t.Errorf("tasks after the denial: %+v", ts)
	}
	if _, err := os.Stat(filepath.Join(r.proj, "bg-proof.txt")); err == nil {
		t.Error("the denied command ran")
	}
}

// TestAttackGateWriteThroughALink: a write through a symbolic link is
// asked about as the file it changes (the team file), and a write through
// a link into .git is refused before anything is made there.
func TestAttackGateWriteThroughALink(t *testing.T) {
	r := newOpenAIRig(t, nil, "default", func(dir string) {
		os.Symlink(".troupe/team.toml", filepath.Join(dir, "notes.txt"))
		os.MkdirAll(filepath.Join(dir, ".git"), 0o755)
		os.Symlink(".git", filepath.Join(dir, "g"))
	})
	team, _ := os.ReadFile(filepath.Join(r.proj, ".troupe", "team.toml"))
	if got := r.answer("x", `[[tool:write_file {"path":"g/index.lock","content":"x"}]]`); !strings.Contains(got, ".git") {
		t.Errorf("write through a link into .git: %q, want refused naming .git", got)
	}
	if ents, _ := os.ReadDir(filepath.Join(r.proj, ".git")); len(ents) != 0 {
		t.Errorf(".git holds %v after the refused write", ents)
	}
	perm, done := r.askAndWaitPermission("x", `[[tool:write_file {"path":"notes.txt","content":"[[agent]]"}]]`)
	if !strings.Contains(perm.Title, ".troupe/team.toml") || !strings.Contains(perm.Title, "notes.txt") {
		t.Errorf("title = %q, want the file it changes (.troupe/team.toml) and the link asked", perm.Title)
	}
	mustTroupe(t, r.state, r.proj, "deny", string(perm.ID))
	<-done
	if now, _ := os.ReadFile(filepath.Join(r.proj, ".troupe", "team.toml")); !bytes.Equal(now, team) {
		t.Error("the team file changed after a denied write")
	}
}

// TestAttackGatePersonsTaskIsNotTheAgents: an agent can neither read nor
// kill the person's task (it could before, by id).
func TestAttackGatePersonsTaskIsNotTheAgents(t *testing.T) {
	r := newOpenAIRig(t, nil, "bypassPermissions", nil)
	out := mustTroupe(t, r.state, r.proj, "task", "run", "echo secret-output; sleep 60")
	ts, err := r.cl.Tasks(r.ctx, r.p)
	if err != nil || len(ts) != 1 {
		t.Fatalf("tasks = %+v, %v (task run said %q)", ts, err, out)
	}
	id := string(ts[0].ID)
	for _, call := range []string{
		`[[tool:task_output {"task_id":"` + id + `"}]]`,
		`[[tool:task_kill {"task_id":"` + id + `"}]]`,
		`[[tool:task_status {"task_id":"` + id + `"}]]`,
	} {
		if got := r.answer("x", call); !strings.Contains(got, "not found among your tasks") || strings.Contains(got, "secret-output") {
			t.Errorf("%s: %q, want not found", call, got)
		}
	}
	if got := r.answer("x", `[[tool:task_status {}]]`); strings.Contains(got, id) {
		t.Errorf("task_status lists the person's task: %q", got)
	}
	if ts, _ := r.cl.Tasks(r.ctx, r.p); len(ts) != 1 || ts[0].State != "running" {
		t.Errorf("the person's task after the agent's kill: %+v", ts)
	}
	st, err := r.cl.Status(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustTroupe(t, r.state, r.proj, "task", "kill", id)
	// Its supervisor writes into the state dir until it ends: wait for
	// the task's end before the test's folders go.
	_, err = r.cl.Events(r.ctx, st.LastEvent, nil, func(ev events.Event) error {
		if ev.Type == "task.ended" {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("waiting for the person's task to end: %v", err)
	}
}

// TestAttackGateClaudeTroupeToolAsks: the pinned Claude Code in its
// default mode calls troupe's run_in_background (Claude lets every
// mcp__troupe tool through): troupe's gate puts it before the person, and
// a denial runs nothing.
func TestAttackGateClaudeTroupeToolAsks(t *testing.T) {
	r := newClaudeRigWith(t, func(bin string) string {
		return fmt.Sprintf("[[agent]]\nname = \"claude\"\nengine = \"claude\"\ncommand = %q\nenv = { ENABLE_TOOL_SEARCH = \"false\" }\n", bin)
	})
	perm, done := r.askAndWaitPermission("claude", `[[tool:mcp__troupe__run_in_background {"command":"echo pwned > claude-proof.txt"}]]`)
	if perm.Tool != "run_in_background" || !strings.Contains(perm.Title, "claude-proof.txt") {
		t.Fatalf("request = %+v", perm)
	}
	mustTroupe(t, r.state, r.proj, "deny", string(perm.ID))
	<-done
	if _, err := os.Stat(filepath.Join(r.proj, "claude-proof.txt")); err == nil {
		t.Error("the denied command ran")
	}
	if ts, _ := r.cl.Tasks(r.ctx, r.p); len(ts) != 0 {
		t.Errorf("tasks after the denial: %+v", ts)
	}
}

// askAndWaitPermission asks agent text as the person, without waiting for
// the answer, and returns the one permission request the turn makes and
// the channel the ask's end comes on.
func (r *claudeRig) askAndWaitPermission(agent troupe.AgentID, text string) (troupe.Permission, <-chan troupe.Request) {
	r.t.Helper()
	done := make(chan troupe.Request, 1)
	go func() {
		req, _ := r.cl.Ask(r.ctx, r.p, agent, text, 0)
		done <- req
	}()
	var perm troupe.Permission
	waitFor(r.t, r.ctx, r.cl, string(agent)+"'s permission request", func() bool {
		ps, _ := r.cl.Permissions(r.ctx, r.p)
		if len(ps) == 1 {
			perm = ps[0]
		}
		return perm.ID != ""
	})
	return perm, done
}
