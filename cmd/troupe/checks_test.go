package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestCheckPassesThenFailsAfterTheAgentBreaksTheCode: a fake agent in a
// worktree of a git project; the project's check passes on its workspace,
// then fails once the agent broke the code, though the agent also rewrote
// the check in its worktree's team.toml to `true`: the approved definition
// runs (C17). Each result names the turn it checked; `troupe checks`
// lists both; the agent's inbox never hears of them.
func TestCheckPassesThenFailsAfterTheAgentBreaksTheCode(t *testing.T) {
	team := "[[agent]]\nname = \"w\"\nengine = \"fake\"\nworkspace = \"worktree\"\npermission_mode = \"bypassPermissions\"\n\n" +
		"[checks]\ntest = \"sh test.sh\"\n"
	proj := t.TempDir()
	writeTeam(t, proj, team)
	os.WriteFile(filepath.Join(proj, "add.sh"), []byte("echo $(($1 + $2))\n"), 0o644)
	os.WriteFile(filepath.Join(proj, "test.sh"), []byte("got=$(sh add.sh 2 2)\necho \"2 + 2 = $got\"\n[ \"$got\" = 4 ]\n"), 0o644)
	gitIn(t, proj, "init", "-q", "-b", "main")
	gitIn(t, proj, "add", "-A")
	gitIn(t, proj, "commit", "-q", "-m", "start")
	state := t.TempDir()
	ctx, _, cl, p := serveProject(t, state, proj, nil, 2*time.Minute)

	check := func(wantCode int) api.CheckResult {
		t.Helper()
		out, errs, code := runCLI(t, state, proj, "check", "w", "test", "--json")
		if code != wantCode {
			t.Fatalf("troupe check w test: exit %d, want %d\n%s%s", code, wantCode, out, errs)
		}
		var r api.CheckResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("troupe check --json printed %q: %v", out, err)
		}
		return r
	}
	lastTurn := func() troupe.TurnID {
		t.Helper()
		l, err := cl.AgentLog(ctx, p.ID, "w", "", 0, 1)
		if err != nil || len(l.Turns) == 0 {
			t.Fatalf("log of w: %+v, %v", l, err)
		}
		return l.Turns[0].ID
	}

	if req, err := cl.Ask(ctx, p.ID, "w", "hello", 0); err != nil || req.State != troupe.ReqAnswered {
		t.Fatalf("ask w: %+v %v", req, err)
	}
	first := lastTurn()
	passed := check(0)
	if passed.State != troupe.CheckPassed || passed.ExitCode != 0 || passed.Output != "2 + 2 = 4\n" || passed.Turn != first || passed.Command != "sh test.sh" {
		t.Fatalf("first check = %+v; want passed on turn %s", passed, first)
	}

	// The agent breaks the code, and rewrites the check in its worktree.
	breakIt := "!sh echo 'echo 5' > add.sh && sed -i 's/sh test.sh/true/' .troupe/team.toml && grep -q true .troupe/team.toml"
	if req, err := cl.Ask(ctx, p.ID, "w", breakIt, 0); err != nil || req.State != troupe.ReqAnswered {
		t.Fatalf("ask w to break the code: %+v %v", req, err)
	}
	second := lastTurn()
	failed := check(1)
	if failed.State != troupe.CheckFailed || failed.ExitCode != 1 || failed.Output != "2 + 2 = 5\n" || failed.Turn != second || second == first || failed.Command != "sh test.sh" {
		t.Fatalf("second check = %+v; want failed on turn %s, the approved command run", failed, second)
	}
	// The person's checkout is untouched: the check ran in the worktree.
	if b, _ := os.ReadFile(filepath.Join(proj, "add.sh")); !strings.Contains(string(b), "$1 + $2") {
		t.Fatalf("the project's add.sh = %q; the agent's change belongs to its worktree", b)
	}

	out := mustTroupe(t, state, proj, "checks", "w")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "failed") || !strings.Contains(lines[2], "passed") || !strings.Contains(lines[1], string(second)) {
		t.Fatalf("troupe checks w:\n%s\nwant the failed run, then the passed one", out)
	}
	var listed []api.CheckResult
	if err := listJSON(mustTroupe(t, state, proj, "checks", "--json"), "checks", &listed); err != nil || len(listed) != 2 || listed[0].ID != failed.ID {
		t.Fatalf("troupe checks --json = %+v, %v", listed, err)
	}
	msgs, err := cl.Messages(ctx, p.ID, "w", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Kind == troupe.KindTask {
			t.Fatalf("the agent's inbox got %+v; a check's end is troupe's", m)
		}
	}
}
