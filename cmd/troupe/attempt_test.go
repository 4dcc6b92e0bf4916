package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/attempt"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// attemptDemo copies examples/attempt-demo into a git repository of one
// commit, extra appended to its team, and returns its folder.
func attemptDemo(t testing.TB, extra string) string {
	t.Helper()
	proj := filepath.Join(t.TempDir(), "demo")
	copyDir(t, "../../examples/attempt-demo", proj)
	os.Remove(filepath.Join(proj, "run.sh")) // as run.sh does
	team, err := os.ReadFile(filepath.Join(proj, ".troupe", "team.toml"))
	if err != nil {
		t.Fatal(err)
	}
	writeTeam(t, proj, string(team)+extra)
	gitIn(t, proj, "init", "-q", "-b", "main")
	gitIn(t, proj, "add", "-A")
	gitIn(t, proj, "commit", "-q", "-m", "start")
	return proj
}

func attemptJSON(t testing.TB, out string) api.Attempt {
	t.Helper()
	var a api.Attempt
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("attempt --json printed %q: %v", out, err)
	}
	return a
}

// TestAttemptRanksThreeAgentsByTheCheck: the attempt demo's three fake
// agents get the same task from the project's HEAD: fixer makes `sh
// test.sh` pass, breaker changes add.sh and still fails it, idle changes
// nothing. troupe checks each one's worktree and ranks them fixer,
// breaker, idle (a failing change ranks before no change), fixer the
// winner. A project-folder agent is refused naming the fix; so is an agent
// whose worktree holds work. `troupe merge fixer` takes the winner;
// `troupe attempt discard` resets the others through the person's reset,
// after which they start from the new HEAD, where the unchanged agent now
// passes (ranked first, but no winner: it changed nothing).
func TestAttemptRanksThreeAgentsByTheCheck(t *testing.T) {
	proj := attemptDemo(t, "\n[[agent]]\nname = \"home\"\nengine = \"fake\"\n")
	state := t.TempDir()
	ctx, _, cl, p := serveProject(t, state, proj, nil, 2*time.Minute)
	base := strings.TrimSpace(gitIn(t, proj, "rev-parse", "HEAD"))

	_, errs, code := runCLI(t, state, proj, "attempt", "make sh test.sh pass", "--agents", "fixer,home")
	if code == 0 || !strings.Contains(errs, `home works in the project folder`) || !strings.Contains(errs, `workspace = "worktree"`) {
		t.Fatalf("attempt with a project-folder agent: exit %d: %s", code, errs)
	}

	a := attemptJSON(t, mustTroupe(t, state, proj, "attempt", "make sh test.sh pass", "--agents", "idle,breaker,fixer", "--wait", "--json"))
	if a.State != attempt.Done || a.Winner != "fixer" || a.Base != base || a.Check != "test" || len(a.Members) != 3 {
		t.Fatalf("attempt = %+v; want done from %s, won by fixer", a, base)
	}
	want := []struct {
		agent   troupe.AgentID
		verdict troupe.CheckState
		output  string
		files   int
		reason  string
	}{
		{"fixer", troupe.CheckPassed, "2 + 2 = 4", 1, "best: passed test with +1 -1 in 1 file"},
		{"breaker", troupe.CheckFailed, "2 + 2 = 5", 1, "after fixer: failed test (exit 1)"},
		{"idle", troupe.CheckFailed, "2 + 2 = 0", 0, "after breaker: changed nothing"},
	}
	for i, w := range want {
		m := a.Members[i]
		if m.Agent != w.agent || m.Rank != i+1 || m.Verdict != w.verdict || !strings.Contains(m.Output, w.output) || m.Change.Files != w.files ||
			!strings.Contains(m.Reason, w.reason) || m.Request == "" || m.RequestState != troupe.ReqAnswered || m.Check == 0 || m.DurationMS <= 0 {
			t.Fatalf("rank %d = %+v; want %s, %s, %q, %d file(s), reason %q", i+1, m, w.agent, w.verdict, w.output, w.files, w.reason)
		}
		// The check's result is troupe's own record, of this worktree.
		rs, err := cl.CheckResults(ctx, p.ID, m.Agent, 1)
		if err != nil || len(rs) != 1 || rs[0].ID != m.Check || rs[0].State != w.verdict {
			t.Fatalf("%s's check results = %+v, %v; want result %d", m.Agent, rs, err, m.Check)
		}
	}

	id := fmt.Sprint(a.ID)
	show := mustTroupe(t, state, proj, "attempt", "show", id)
	for _, re := range []string{`(?m)^1\s+fixer\s+fake\s+done\s+passed\s+0\s+\+1 -1\s+1\s`, `(?m)^2\s+breaker\s+fake\s+done\s+failed\s+1\s`,
		`(?m)^3\s+idle\s+fake\s+done\s+failed\s+1\s+\+0 -0\s+0\s`, `│ 2 \+ 2 = 4`, `merge the winner: troupe merge fixer`} {
		if !regexp.MustCompile(re).MatchString(show) {
			t.Fatalf("troupe attempt show %s:\n%s\nwant a line matching %s", id, show, re)
		}
	}
	list := mustTroupe(t, state, proj, "attempts")
	if !regexp.MustCompile(`(?m)^` + id + `\s+done\s+fixer,breaker,idle\s+test\s+fixer\s`).MatchString(list) {
		t.Fatalf("troupe attempts:\n%s", list)
	}

	// breaker's worktree holds its work: a new attempt is refused, naming
	// the reset.
	_, errs, code = runCLI(t, state, proj, "attempt", "again", "--agents", "breaker")
	if code == 0 || !strings.Contains(errs, "troupe worktree reset breaker") {
		t.Fatalf("attempt over breaker's work: exit %d: %s", code, errs)
	}

	mustTroupe(t, state, proj, "merge", "fixer")
	if b, _ := os.ReadFile(filepath.Join(proj, "add.sh")); !strings.Contains(string(b), "$1 + $2") {
		t.Fatalf("after merge, add.sh = %q", b)
	}
	if _, errs, code := runCLI(t, state, proj, "attempt", "discard", id); code == 0 || !strings.Contains(errs, "--yes") {
		t.Fatalf("discard without --yes: exit %d: %s", code, errs)
	}
	out := mustTroupe(t, state, proj, "attempt", "discard", id, "--yes")
	if !strings.Contains(out, "breaker: worktree reset") || !strings.Contains(out, "idle: worktree reset") || strings.Contains(out, "fixer: worktree reset") {
		t.Fatalf("discard:\n%s", out)
	}
	// As troupe worktree reset does: a checkpoint of the work first.
	cps, err := cl.Checkpoints(ctx, p.ID, "breaker")
	if err != nil || len(cps.Checkpoints) == 0 || cps.Checkpoints[len(cps.Checkpoints)-1].Reason != "worktree reset" {
		t.Fatalf("breaker's checkpoints = %+v, %v; want the last one made by the reset", cps, err)
	}

	// From the new HEAD (fixer's work merged), the same task again.
	b := attemptJSON(t, mustTroupe(t, state, proj, "attempt", "make sh test.sh pass", "--agents", "breaker,idle", "--wait", "--json"))
	if b.Base == base || b.Winner != "" || b.Members[0].Agent != "idle" || !b.Members[0].Passed() || b.Members[0].Change.Files != 0 ||
		!strings.Contains(b.Members[0].Reason, "nothing to merge") || b.Members[1].Agent != "breaker" || b.Members[1].Passed() {
		t.Fatalf("second attempt = %+v; want idle passing with no change, no winner, breaker failing", b)
	}
}

// TestAttemptResumesAfterARestart: the daemon stops while one member
// still works (a slow fake agent); the attempt, saved, is resumed by the
// next daemon: the slow agent's task is redelivered, it finishes, its
// check runs, and the attempt is ranked.
func TestAttemptResumesAfterARestart(t *testing.T) {
	slow := "\n[[agent]]\nname = \"slow\"\nengine = \"fake\"\nworkspace = \"worktree\"\nallowed_tools = [\"Bash\"]\n\n[agent.fake]\nrespond = '''\n!sleep 2s\n!sh printf 'echo 4\\n' > add.sh\n'''\n"
	proj := attemptDemo(t, slow)
	state := t.TempDir()
	ctx, d, cl, p := serveProject(t, state, proj, nil, 2*time.Minute)
	a, err := cl.StartAttempt(ctx, p.ID, api.AttemptRequest{Task: "make sh test.sh pass", Agents: []troupe.AgentID{"fixer", "slow"}})
	if err != nil {
		t.Fatal(err)
	}
	// fixer ends; slow is still asleep in its turn.
	got := waitAttempt(t, ctx, cl, p.ID, a.ID, func(a api.Attempt) bool { return a.Members[0].State == attempt.Finished })
	if got.Members[1].State != attempt.Working {
		t.Fatalf("slow is %s already; the test needs it working", got.Members[1].State)
	}
	d.stop(syscall.SIGTERM)
	startDaemon(t, state, "--project", proj)
	cl2, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	got = waitAttempt(t, ctx, cl2, p.ID, a.ID, func(a api.Attempt) bool { return a.State == attempt.Done })
	if got.Winner != "fixer" || got.Members[1].Agent != "slow" || !got.Members[1].Passed() || got.Members[1].Check == 0 {
		t.Fatalf("after the restart: %+v; want slow checked (passing, the larger change), fixer first", got)
	}
}

// waitAttempt follows the event feed until attempt id of p satisfies
// done: it reads it first, then at each attempt.changed (no polling).
func waitAttempt(t testing.TB, ctx context.Context, cl *client.Client, p troupe.ProjectID, id attempt.ID, done func(api.Attempt) bool) api.Attempt {
	t.Helper()
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var a api.Attempt
	check := func() bool {
		got, err := cl.Attempt(ctx, p, int64(id))
		if err != nil {
			t.Fatal(err)
		}
		a = got
		return done(a)
	}
	if check() {
		return a
	}
	_, err = cl.Events(ctx, st.LastEvent, nil, func(ev events.Event) error {
		if ev.Type == events.TypeAttemptChanged && check() {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("waiting for attempt %d: %v; it is %+v", id, err, a)
	}
	return a
}

// TestAttemptDemo runs examples/attempt-demo as its README says: run.sh
// makes a git repository of it and adds it to the running daemon; then the
// README's commands, each checked for what the README says it prints.
func TestAttemptDemo(t *testing.T) {
	state := t.TempDir()
	startDaemon(t, state)
	script, _ := filepath.Abs("../../examples/attempt-demo/run.sh")
	cmd := exec.Command("sh", script, "--state-dir", state)
	cmd.Env = append(os.Environ(), "TROUPE="+binary, "TMPDIR="+t.TempDir(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run.sh: %v\n%s", err, out)
	}
	_, rest, ok := strings.Cut(string(out), "demo repository: ")
	if !ok || !strings.Contains(string(out), "registered ") || !strings.Contains(string(out), "attempt 'make sh test.sh pass' --agents fixer,breaker,idle --wait") {
		t.Fatalf("run.sh said:\n%s", out)
	}
	demo, _, _ := strings.Cut(rest, "\n")
	if st := gitIn(t, demo, "status", "--porcelain"); st != "" {
		t.Fatalf("the demo repository is not committed:\n%s", st)
	}
	for _, step := range []struct {
		args []string
		want []string // regular expressions
	}{
		{[]string{"attempt", "make sh test.sh pass", "--agents", "fixer,breaker,idle", "--wait"}, []string{
			`(?m)^1\s+fixer\s+fake\s+done\s+passed\s+0\s+\+1 -1\s+1\s`, `(?m)^2\s+breaker\s+fake\s+done\s+failed\s+1\s+\+1 -1\s+1\s`, `(?m)^3\s+idle\s+fake\s+done\s+failed\s+1\s+\+0 -0\s+0\s`,
			`best: passed test with \+1 -1 in 1 file`, `after fixer: failed test \(exit 1\)`,
			`after breaker: changed nothing \(an empty change ranks after any change with the same verdict\)`,
			`│ 2 \+ 2 = 4`, `│ 2 \+ 2 = 5`, `│ 2 \+ 2 = 0`}},
		{[]string{"attempts"}, []string{`(?m)^1\s+done\s+fixer,breaker,idle\s+test\s+fixer\s`}},
		{[]string{"diff", "fixer"}, []string{`(?m)^-echo \$\(\(\$1 - \$2\)\)$`, `(?m)^\+echo \$\(\(\$1 \+ \$2\)\)$`}},
		{[]string{"merge", "fixer"}, []string{`fixer: merged troupe/fixer into main`}},
		{[]string{"attempt", "discard", "1", "--yes"}, []string{`breaker: worktree reset to its base`, `idle: worktree reset to its base`}},
	} {
		got := mustTroupe(t, state, demo, step.args...)
		for _, re := range step.want {
			if !regexp.MustCompile(re).MatchString(got) {
				t.Fatalf("troupe %s:\n%s\nwant a match of %s", strings.Join(step.args, " "), got, re)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(demo, "add.sh")); !strings.Contains(string(b), "$1 + $2") {
		t.Fatalf("add.sh = %q", b)
	}
}
