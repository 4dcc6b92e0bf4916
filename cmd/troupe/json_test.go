package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestEveryCommandAnswersJSON runs the commands that read or change
// something with --json against one daemon, in the order a person might,
// and parses what each prints: one JSON object on stdout, and the exit
// code 0. (Which commands take --json at all is TestEveryCommandHasJSON's,
// in internal/cli.)
func TestEveryCommandAnswersJSON(t *testing.T) {
	state := t.TempDir()
	home := t.TempDir()
	proj := gitProject(t, "[[agent]]\nname = \"dev\"\nengine = \"fake\"\n\n[[agent]]\nname = \"wt\"\nengine = \"fake\"\nworkspace = \"worktree\"\nallowed_tools = [\"Bash\"]\n\n[checks]\nok = \"true\"\n")
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "CLAUDE_CONFIG_DIR=")
	d := startDaemonEnv(t, state, env, "--project", proj, "--runners", "127.0.0.1:0")
	defer d.stop(syscall.SIGTERM)
	obj := func(args ...string) map[string]any {
		t.Helper()
		out, errOut, code := runCLIEnv(t, env, state, proj, append(args, "--json")...)
		var m map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &m) != nil {
			t.Errorf("troupe %s --json: exit %d, not one JSON object:\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return m
	}
	str := func(m map[string]any, k string) string {
		t.Helper()
		s, _ := m[k].(string)
		if s == "" {
			t.Errorf("no %q in %v", k, m)
		}
		return s
	}

	for _, args := range [][]string{{"status"}, {"version"}, {"project", "list"}, {"agents"}, {"runners"},
		{"permissions"}, {"doctor"}, {"profiles"}, {"team", "diff"}, {"worktree", "list"}, {"attempts"},
		{"sessions"}, {"memory", "list"}, {"memory", "search", "anything"}, {"checks"}} {
		obj(args...)
	}
	obj("ask", "dev", "hello")
	obj("send", "dev", "hello again")
	obj("delegate", "dev", "do a thing")
	obj("inbox")
	obj("log", "dev")
	obj("check", "dev", "ok")
	obj("checkpoints", "dev")
	tk := obj("task", "run", "sleep 30")
	id := str(tk, "id")
	obj("task", "show", id)
	obj("task", "kill", id)
	obj("tasks")
	// A turn in flight, asked with a wait it outlives (exit 3, its JSON
	// still printed), then interrupted.
	waited := func(args ...string) map[string]any {
		t.Helper()
		out, errOut, code := runCLIEnv(t, env, state, proj, append(args, "--json")...)
		var m map[string]any
		if code != 3 || json.Unmarshal([]byte(out), &m) != nil {
			t.Errorf("troupe %s --json: exit %d (want 3), not one JSON object:\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return m
	}
	waited("ask", "dev", "--wait", "300ms", "!sleep 20s")
	obj("interrupt", "dev")
	// A permission request (dev may not run Bash unasked), allowed.
	waited("ask", "dev", "--wait", "300ms", "!sh echo allowed")
	var perms struct {
		Permissions []struct{ ID string }
	}
	out, _, _ := runCLIEnv(t, env, state, proj, "permissions", "--json")
	for range 50 {
		if json.Unmarshal([]byte(out), &perms); len(perms.Permissions) > 0 {
			break
		}
		out, _, _ = runCLIEnv(t, env, state, proj, "permissions", "--json")
	}
	if len(perms.Permissions) != 1 {
		t.Fatalf("permissions --json: %s", out)
	}
	obj("allow", perms.Permissions[0].ID)
	obj("reset", "dev")
	obj("memory", "edit", "n1", "--description", "a note", "--body", "text")
	obj("memory", "show", "n1")
	obj("memory", "rm", "n1")
	// The worktree agent: a turn makes its worktree, then its diff, merge,
	// reset and removal.
	obj("ask", "wt", "!sh echo hi > hi.txt") // Bash allowed to wt
	obj("diff", "wt")
	obj("merge", "wt")
	obj("worktree", "reset", "wt", "--yes")
	obj("worktree", "remove", "wt")
	obj("runner", "add", "r1", "-o", filepath.Join(t.TempDir(), "r1.creds"))
	obj("runner", "revoke", "r1")
	obj("project", "remove")
}
