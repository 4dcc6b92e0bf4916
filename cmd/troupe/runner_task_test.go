package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
)

const runnerTaskTeam = `
[[agent]]
name = "lead"
engine = "fake"

[[agent]]
name = "coder"
engine = "fake"
runner = "r1"
allowed_tools = ["run_in_background"]
`

// startedTask reads the id of the task an agent's "!bg" started from its
// answer ("started task ID; …").
func startedTask(t *testing.T, answer string) task.ID {
	t.Helper()
	m := regexp.MustCompile(`started task ([0-9a-f]+)`).FindStringSubmatch(answer)
	if m == nil {
		t.Fatalf("no task started: %q", answer)
	}
	return task.ID(m[1])
}

// taskMessages are the completions in coder's inbox naming task id.
func taskMessages(t *testing.T, ctx context.Context, cl *client.Client, p troupe.ProjectID, id task.ID) []troupe.Message {
	t.Helper()
	ms, err := allMessages(ctx, cl, p, "coder")
	if err != nil {
		t.Fatal(err)
	}
	var out []troupe.Message
	for _, m := range ms {
		if m.Kind == troupe.KindTask && strings.Contains(m.Text, "task "+string(id)+" ") {
			out = append(out, m)
		}
	}
	return out
}

// TestRunnerTaskEndsWhileTheDaemonIsKilled: an agent on a runner starts a
// background task; it runs on the runner, in the agent's worktree and
// sandbox there (the runner's credentials file hidden from it). The
// daemon is SIGKILLed, the task ends while it is down (its end kept on
// the runner, tried again), the daemon comes back on the same state: the
// agent gets exactly one completion with the task's exit code and
// output, and `troupe tasks` shows it ended on the runner. A remote
// task's output and kill go through the runner.
func TestRunnerTaskEndsWhileTheDaemonIsKilled(t *testing.T) {
	state := t.TempDir()
	proj := gitProject(t, runnerTaskTeam)
	start := restartableRunnerDaemon(t, state, proj)
	d, cl := start()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "r1.creds")
	r := startRunner(t, state, "r1", creds)
	work := filepath.Join(r.root, string(p.ID), "repo", "troupe", "worktrees", "coder")
	bg := func(command string) task.ID {
		t.Helper()
		res, err := cl.Ask(ctx, p.ID, "coder", "!bg "+command+"\n!say {result}", 0)
		if err != nil || res.State != troupe.ReqAnswered {
			t.Fatalf("ask coder to start %q: %+v, %v\ndaemon:\n%s\nrunner:\n%s", command, res, err, d.logs.String(), r.logs.String())
		}
		return startedTask(t, res.Answer)
	}

	// The sandbox on the runner hides its credentials from the task.
	peek := bg("cat " + creds + "; echo peeked in $(pwd)")
	waitTaskMessages(t, ctx, cl, p.ID, "coder", 1)
	ms := taskMessages(t, ctx, cl, p.ID, peek)
	if len(ms) != 1 || !strings.Contains(ms[0].Text, "peeked in "+work) || strings.Contains(ms[0].Text, "secret:") {
		t.Fatalf("the task reading the runner's credentials: %+v", ms)
	}

	// A task that waits for a file the test makes in the agent's worktree
	// on the runner.
	id := bg("while [ ! -e gate ]; do sleep 0.05; done; echo remote says $(cat gate); exit 4")
	tk, err := cl.Task(ctx, p.ID, id)
	if err != nil || tk.State != task.Running || tk.Runner != "r1" {
		t.Fatalf("task %s: %+v, %v: want running on r1", id, tk, err)
	}
	syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	<-d.done
	if err := os.WriteFile(filepath.Join(work, "gate"), []byte("go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// It ended with no daemon to tell: the runner keeps trying.
	if l := r.logs.waitFor(time.Minute, "publish a task's end; trying again"); !strings.Contains(l, "publish a task's end; trying again") {
		t.Fatalf("the runner did not try to report the task's end while the daemon was down:\n%s", l)
	}

	d, cl = start()
	t.Cleanup(func() { d.stop(syscall.SIGTERM) })
	waitTaskMessages(t, ctx, cl, p.ID, "coder", 2)
	ms = taskMessages(t, ctx, cl, p.ID, id)
	if len(ms) != 1 || !strings.Contains(ms[0].Text, "exited 4") || !strings.Contains(ms[0].Text, "remote says go") {
		t.Fatalf("completions of the task that ended while the daemon was down: %+v\ndaemon:\n%s\nrunner:\n%s", ms, d.logs.String(), r.logs.String())
	}
	out, errOut, code := runCLI(t, state, proj, "tasks", "--json")
	var ts []api.Task
	if code != 0 || listJSON(out, "tasks", &ts) != nil {
		t.Fatalf("troupe tasks --json: %d\n%s%s", code, out, errOut)
	}
	found := false
	for _, x := range ts {
		if x.ID == id {
			found = true
			if x.State != task.Exited || x.ExitCode != 4 || x.Runner != "r1" {
				t.Errorf("troupe tasks shows %+v, want exited 4 on runner r1", x)
			}
		}
	}
	if !found {
		t.Errorf("troupe tasks does not list %s:\n%s", id, out)
	}
	if out, _, _ := runCLI(t, state, proj, "tasks"); !strings.Contains(out, "runner r1") {
		t.Errorf("troupe tasks does not say where the task ran:\n%s", out)
	}
	if out, errOut, code := runCLI(t, state, proj, "task", "show", string(id)); code != 0 || !strings.Contains(out, "remote says go") {
		t.Errorf("troupe task show (its output read on the runner): %d\n%s%s", code, out, errOut)
	}

	// A remote kill.
	long := bg("sleep 600")
	if out, errOut, code := runCLI(t, state, proj, "task", "kill", string(long)); code != 0 {
		t.Fatalf("troupe task kill: %d\n%s%s", code, out, errOut)
	}
	waitTaskMessages(t, ctx, cl, p.ID, "coder", 3)
	if ms := taskMessages(t, ctx, cl, p.ID, long); len(ms) != 1 || !strings.Contains(ms[0].Text, "was killed") {
		t.Errorf("completion of the killed remote task: %+v", ms)
	}
	// And still exactly one completion of the task that ended while the
	// daemon was down.
	if ms := taskMessages(t, ctx, cl, p.ID, id); len(ms) != 1 {
		t.Errorf("%d completions of task %s, want 1", len(ms), id)
	}
}
