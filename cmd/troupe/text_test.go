package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/api"
)

// TestBinaryInboxOutputToAPipeIsRaw: what an agent (here the person, by
// send) wrote is printed as it is when stdout is not a terminal, and with
// --raw; the terminal path (shown as \xNN) is covered in internal/cli with
// the terminal decision injected.
func TestBinaryInboxOutputToAPipeIsRaw(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, "[[agent]]\nname = \"dev\"\nengine = \"fake\"\n")
	startDaemon(t, state)
	if out := mustTroupe(t, state, proj, "project", "add"); !strings.Contains(out, "(1 agent)") {
		t.Fatalf("project add said %q, want (1 agent)", out)
	}
	const hostile = "look\x1b]0;pwned\x07 \x1b[2J here"
	mustTroupe(t, state, proj, "send", "dev", hostile)
	for _, args := range [][]string{{"inbox", "dev"}, {"--raw", "inbox", "dev"}} {
		if out := mustTroupe(t, state, proj, args...); !strings.Contains(out, hostile) {
			t.Errorf("troupe %v to a pipe: %q, want the text as it is", args, out)
		}
	}
}

// TestBinaryProjectListJSONHasTeamStatus: project list --json says whether
// each team loaded, with its agent count and error.
func TestBinaryProjectListJSONHasTeamStatus(t *testing.T) {
	state, good, bad := t.TempDir(), t.TempDir(), t.TempDir()
	writeTeam(t, good, twoAgents)
	writeTeam(t, bad, "[[agent]]\nname = \"a\"\nengine = \"nope\"\n")
	startDaemon(t, state)
	mustTroupe(t, state, good, "project", "add")
	mustTroupe(t, state, bad, "project", "add")
	var ps []api.Project
	if err := listJSON(mustTroupe(t, state, good, "project", "list", "--json"), "projects", &ps); err != nil || len(ps) != 2 {
		t.Fatalf("project list --json: %v %+v", err, ps)
	}
	for _, p := range ps {
		switch p.Path {
		case good:
			if p.Team != "ok" || p.Agents != 2 || p.TeamError != "" {
				t.Errorf("good project: %+v", p)
			}
		case bad:
			if p.Team != "error" || p.TeamError == "" {
				t.Errorf("bad project: %+v", p)
			}
		}
	}
}

// TestBinaryServeBeyondLoopbackNeedsAllowRemote: `troupe serve --addr
// 0.0.0.0:…` refuses to start without --allow-remote, saying what to pass.
func TestBinaryServeBeyondLoopbackNeedsAllowRemote(t *testing.T) {
	state := t.TempDir()
	_, errs, code := runCLI(t, state, t.TempDir(), "serve", "--addr", "0.0.0.0:0")
	if code == 0 || !strings.Contains(errs, "listening on 0.0.0.0 exposes your agents beyond this machine: pass --allow-remote and --public-name HOST if you mean it") {
		t.Fatalf("serve on 0.0.0.0: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(state, "addr")); err == nil {
		t.Error("an addr file was written by a daemon that refused to start")
	}
}

// TestBinaryServeAllowRemote: with --allow-remote and --public-name the
// daemon listens on every interface; its login link names the public
// name, and the CLI on this machine reaches it through 127.0.0.1.
func TestBinaryServeAllowRemote(t *testing.T) {
	state := t.TempDir()
	d := startDaemon(t, state, "--addr", "0.0.0.0:0", "--allow-remote", "--public-name", "box.example")
	if !strings.HasPrefix(d.login, "http://box.example:") {
		t.Errorf("login link %q, want it on the public name", d.login)
	}
	addr, _ := os.ReadFile(filepath.Join(state, "addr"))
	if !strings.HasPrefix(string(addr), "127.0.0.1:") {
		t.Errorf("addr file %q, want 127.0.0.1:PORT", addr)
	}
	if out := mustTroupe(t, state, t.TempDir(), "status", "--login"); !strings.Contains(out, "web UI: http://box.example:") {
		t.Errorf("status --login: %q", out)
	}
}
