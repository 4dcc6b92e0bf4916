package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// verifyTeam: the project's check is `test -f ok` in each agent's
// worktree. fixer makes it pass only once troupe told it the check
// failed (its message then holds troupe's verdict); claimer only says
// all tests pass; lead delegates through the MCP tool.
const verifyTeam = `
[[agent]]
name = "lead"
engine = "fake"
workspace = "worktree"
permission_mode = "bypassPermissions"

[[agent]]
name = "fixer"
engine = "fake"
workspace = "worktree"
permission_mode = "bypassPermissions"

[agent.fake]
respond = '''
!sh case "{text}" in *"[check test: failed"*) touch ok ;; esac
all tests pass
'''

[[agent]]
name = "claimer"
engine = "fake"
workspace = "worktree"
permission_mode = "bypassPermissions"

[agent.fake]
respond = "!say all tests pass"

[checks]
test = "test -f ok || { echo 'no file ok in the workspace'; exit 1; }"
`

// TestVerifiedDelegationOnTheFakeEngine (issue 25, items 2 and 5): a
// delegation from the person (troupe delegate --verify) whose first try
// fails the check and whose second passes, the result carrying troupe's
// verdict; and a worker that claims success while the check fails, given
// the task by an agent through the MCP delegate tool, reported failed to
// its delegator with the check's output. Each check run is recorded on
// the worker's turn it checked.
func TestVerifiedDelegationOnTheFakeEngine(t *testing.T) {
	state := t.TempDir()
	proj := gitProject(t, verifyTeam)
	ctx, _, cl, p := serveProject(t, state, proj, nil, 2*time.Minute)

	// An unknown check is refused, naming the field and the checks.
	if _, errs, code := runCLI(t, state, proj, "delegate", "fixer", "make the tests pass", "--verify", "tests"); code == 0 ||
		!strings.Contains(errs, "verify") || !strings.Contains(errs, `no check named "tests"`) || !strings.Contains(errs, "checks are test") {
		t.Fatalf("delegate --verify tests: exit %d, %s; want refused naming verify and the project's checks", code, errs)
	}

	// First try fails, second passes.
	out, errs, code := runCLI(t, state, proj, "delegate", "fixer", "make the tests pass", "--verify", "test", "--wait", "90s", "--json")
	if code != 0 {
		t.Fatalf("troupe delegate fixer --verify test: exit %d\n%s%s", code, out, errs)
	}
	var req troupe.Request
	if err := json.Unmarshal([]byte(out), &req); err != nil {
		t.Fatalf("troupe delegate --json printed %q: %v", out, err)
	}
	if req.State != troupe.ReqAnswered || req.Tried != 2 || req.Tries != 2 || req.Verdict == nil || !req.Verdict.Passed() ||
		req.Verdict.Try != 2 || !strings.Contains(req.Answer, "all tests pass") {
		t.Fatalf("verified delegation to fixer = %+v; want answered on its second try with a passing verdict", req)
	}
	results := verifyResults(t, ctx, cl, p.ID, req.ID)
	if len(results) != 1 || results[0].To != troupe.Person || !strings.HasPrefix(results[0].Text, "[check test: passed, exit 0, ") ||
		!strings.Contains(results[0].Text, "try 2 of 2, by troupe]") {
		t.Fatalf("results to the person = %+v; want one, starting with troupe's passing verdict", results)
	}
	var retried bool
	ms, err := allMessages(ctx, cl, p.ID, "fixer")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.From == troupe.CheckSender && m.Request == req.ID {
			retried = strings.Contains(m.Text, "[check test: failed, exit 1") && strings.Contains(m.Text, "no file ok in the workspace")
		}
	}
	if !retried {
		t.Errorf("fixer's conversation %+v: no message from troupe with the failed check and its output", ms)
	}
	var runs []api.CheckResult
	if err := listJSON(mustTroupe(t, state, proj, "checks", "fixer", "--json"), "checks", &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].State != troupe.CheckPassed || runs[1].State != troupe.CheckFailed || runs[0].Turn == "" || runs[0].Turn == runs[1].Turn ||
		runs[0].ID != req.Verdict.Result {
		t.Errorf("fixer's check runs = %+v; want the failed one then the passed one, each on its own turn, the verdict naming the last", runs)
	}

	// A worker that claims success on a failing check, delegated by lead
	// through MCP: lead gets one result, failed, with the check's output.
	if _, err := cl.Send(ctx, p.ID, "lead", `!tool delegate {"to":"claimer","task":"make the tests pass","verify":"test"}`); err != nil {
		t.Fatal(err)
	}
	var result troupe.Message
	waitFor(t, ctx, cl, "claimer's result to lead", func() bool {
		ms, err := allMessages(ctx, cl, p.ID, "lead")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Kind == troupe.KindResult && m.From == "claimer" {
				result = m
				return true
			}
		}
		return false
	})
	got, err := cl.Request(ctx, p.ID, result.Request, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != troupe.ReqFailed || got.Tried != 2 || got.Verdict == nil || got.Verdict.State != troupe.CheckFailed || got.Answer != "all tests pass" {
		t.Errorf("claimer's delegation = %+v; want failed after two tries, its claim kept beside the failing verdict", got)
	}
	for _, want := range []string{"failed (request " + string(got.ID) + ")", "did not pass check test", "[check test: failed, exit 1",
		"no file ok in the workspace", "all tests pass"} {
		if !strings.Contains(result.Text, want) {
			t.Errorf("lead's result %q lacks %q", result.Text, want)
		}
	}
	if rs := verifyResults(t, ctx, cl, p.ID, got.ID); len(rs) != 1 {
		t.Errorf("lead got %d results for the delegation, want exactly one", len(rs))
	}
}

// TestC6_VerifiedDelegationCheckSurvivesSIGKILL: the daemon is killed
// while the check of a delegation runs; the next daemon runs the check
// again (its first run fails if it ever ends, its second passes) and the
// delegator gets exactly one result.
func TestC6_VerifiedDelegationCheckSurvivesSIGKILL(t *testing.T) {
	team := "[[agent]]\nname = \"w\"\nengine = \"fake\"\nworkspace = \"worktree\"\n\n" +
		"[checks.slow]\ncommand = \"if [ -f .ran ]; then echo again >> .ran; exit 0; fi; echo first > .ran; echo started > .gate; sleep 3; exit 1\"\ntimeout = \"20s\"\n"
	state := t.TempDir()
	proj := gitProject(t, team)
	d := startDaemon(t, state, "--project", proj)
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		t.Fatal(err)
	}
	// A first turn makes w's worktree, where the check's first run tells
	// the test through a fifo that it runs.
	if got, err := cl.Ask(ctx, p.ID, "w", "hello", 0); err != nil || got.State != troupe.ReqAnswered {
		t.Fatalf("ask w: %+v, %v", got, err)
	}
	wt, err := filepath.EvalSymlinks(state)
	if err != nil {
		t.Fatal(err)
	}
	wt = filepath.Join(wt, "worktrees", string(p.ID), "w")
	t.Cleanup(func() { killStragglers(t, wt) }) // the first run's sleep, if still there
	gate := fifo(t, wt, ".gate")
	req, err := cl.Delegate(ctx, p.ID, "w", api.DelegateRequest{Text: "do the work", Verify: "slow", Tries: 1})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { // opening blocks until the check opens the fifo to write
		b, err := os.ReadFile(gate)
		if err == nil && string(b) != "started\n" {
			err = fmt.Errorf("the check wrote %q to the gate", b)
		}
		started <- err
	}()
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the check's first run never started")
	}
	ran := filepath.Join(wt, ".ran")
	if got, err := cl.Request(ctx, p.ID, req.ID, 0); err != nil || got.State != troupe.ReqPending || !got.Checking {
		t.Fatalf("request while its check runs = %+v, %v; want pending, checking", got, err)
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done

	d = startDaemon(t, state)
	cl, _ = client.FromStateDir(state)
	got, err := cl.Request(ctx, p.ID, req.ID, 60)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != troupe.ReqAnswered || got.Verdict == nil || !got.Verdict.Passed() || got.Tried != 1 {
		t.Fatalf("request after the restart = %+v; want answered by the check run again", got)
	}
	if b, _ := os.ReadFile(ran); string(b) != "first\nagain\n" {
		t.Errorf(".ran = %q; want the check run twice: once cut by the kill, once after the restart", b)
	}
	if rs := verifyResults(t, ctx, cl, p.ID, req.ID); len(rs) != 1 || !strings.HasPrefix(rs[0].Text, "[check slow: passed") {
		t.Errorf("results = %+v; want exactly one, with the passing verdict", rs)
	}
	d.stop(syscall.SIGTERM)
}

// verifyResults are the result messages of request id in project p.
func verifyResults(t *testing.T, ctx context.Context, cl *client.Client, p troupe.ProjectID, id troupe.RequestID) []troupe.Message {
	t.Helper()
	ms, err := allMessages(ctx, cl, p, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []troupe.Message
	for _, m := range ms {
		if m.Kind == troupe.KindResult && m.Request == id {
			out = append(out, m)
		}
	}
	return out
}
