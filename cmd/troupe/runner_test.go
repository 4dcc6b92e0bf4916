package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// runnerProc is a `troupe runner` child in its own process group, with a
// HOME and a root of its own: nothing shared with the daemon but the link.
type runnerProc struct {
	cmd  *exec.Cmd
	root string
	logs *syncBuffer
	done chan struct{}
}

// startRunner mints runner name's credentials on the daemon of state (the
// first time) and starts it; it returns once the runner said hello.
func startRunner(t testing.TB, state, name, creds string, extra ...string) *runnerProc {
	t.Helper()
	if _, err := os.Stat(creds); err != nil {
		if out, errOut, code := runCLI(t, state, "", "runner", "add", name, "-o", creds); code != 0 {
			t.Fatalf("runner add: %d\n%s%s", code, out, errOut)
		}
	}
	home := t.TempDir()
	r := &runnerProc{root: filepath.Join(home, "root"), logs: &syncBuffer{}, done: make(chan struct{})}
	args := append([]string{"runner", "--creds", creds, "--root", r.root, "--log-level", "debug"}, extra...)
	r.cmd = exec.Command(binary, args...)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.cmd.Env = append(os.Environ(), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"))
	r.cmd.Stderr, r.cmd.Stdout = r.logs, r.logs
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
	})
	if l := r.logs.waitFor(time.Minute, "connected to the daemon"); !strings.Contains(l, "connected to the daemon") {
		t.Fatalf("runner %s did not connect:\n%s", name, l)
	}
	return r
}

func (r *runnerProc) kill(t testing.TB) {
	t.Helper()
	syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	<-r.done
}

const runnerTeam = `
[[agent]]
name = "lead"
engine = "fake"

[[agent]]
name = "coder"
engine = "fake"
runner = "r1"
allowed_tools = ["Bash"]
`

// TestRunnerRemoteAgent: a daemon and a runner as two processes with
// nothing shared but the bus. The runner's agent works in its own clone of
// the project (not the daemon's folder), a local agent's ask_agent reaches
// it, its own ask_agent and shell go through the link (its MCP calls with
// its session's token; its shell approved by the team's allowed_tools),
// and a runner killed mid-turn fails that turn with the reason, the
// next message running once it is back.
func TestRunnerRemoteAgent(t *testing.T) {
	state := t.TempDir()
	proj := gitProject(t, runnerTeam)
	ctx, d, cl, p := serveProject(t, state, proj, append(os.Environ(), "HOME="+t.TempDir()), 3*time.Minute,
		"--runners", "127.0.0.1:0", "--runner-beat", "300ms")
	creds := filepath.Join(t.TempDir(), "r1.creds")
	r := startRunner(t, state, "r1", creds)

	ask := func(agent, text string) troupe.Request {
		t.Helper()
		res, err := cl.Ask(ctx, p.ID, troupe.AgentID(agent), text, 0)
		if err != nil {
			t.Fatalf("ask %s: %v\ndaemon:\n%s\nrunner:\n%s", agent, err, d.logs.String(), r.logs.String())
		}
		return res
	}
	res := ask("coder", "!cwd")
	want := filepath.Join(r.root, string(p.ID), "repo", "troupe", "worktrees", "coder")
	if res.State != troupe.ReqAnswered || !strings.Contains(res.Answer, want) {
		t.Fatalf("coder's cwd: %+v, want %s\nrunner:\n%s", res, want, r.logs.String())
	}
	res = ask("lead", "!ask coder !sh echo made on the runner > made.txt; cat README\n!say lead got: {result}")
	if !strings.Contains(res.Answer, "lead got:") || !strings.Contains(res.Answer, "hello") {
		t.Fatalf("lead's answer: %+v\nrunner:\n%s", res, r.logs.String())
	}
	if b, err := os.ReadFile(filepath.Join(want, "made.txt")); err != nil || string(b) != "made on the runner\n" {
		t.Errorf("the coder's file on the runner: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(proj, "made.txt")); err == nil {
		t.Error("the coder's file landed in the daemon's project folder")
	}

	// A runner killed mid-turn: the turn fails naming it.
	errc := make(chan error, 1)
	var got troupe.Request
	go func() {
		var err error
		got, err = cl.Ask(ctx, p.ID, "coder", "!sleep 1m", 0)
		errc <- err
	}()
	waitAgent(t, cl, p.ID, "coder", troupe.StateBusy)
	r.kill(t)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got.State == troupe.ReqAnswered || !strings.Contains(got.Error, "runner r1 unreachable") {
		t.Fatalf("ask to a killed runner's agent: %+v", got)
	}
	r = startRunner(t, state, "r1", creds)
	if res := ask("coder", "back"); res.State != troupe.ReqAnswered || !strings.Contains(res.Answer, "echo: back") {
		t.Fatalf("after the runner came back: %+v", res)
	}
}
